from torchvision.transforms import functional  # noqa: F401
from torchvision.transforms.functional import InterpolationMode  # noqa: F401


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    class Unavailable:  # a class, so timm can subclass transforms at import time
        def __init__(self, *args, **kwargs):
            raise RuntimeError(f"torchvision.transforms.{name} is not available in the torchvision stub")

    Unavailable.__name__ = name
    return Unavailable
