"""The module-level `__getattr__` every stub submodule uses: any name is a class that raises when built."""


def unavailable(module: str):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)

        class Unavailable:  # a class, so timm can subclass it at import time
            def __init__(self, *args, **kwargs):
                raise RuntimeError(f"{module}.{name} is not available in the torchvision stub")

        Unavailable.__name__ = name
        return Unavailable

    return __getattr__
