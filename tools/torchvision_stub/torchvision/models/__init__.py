def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    class Unavailable:
        def __init__(self, *args, **kwargs):
            raise RuntimeError(f"torchvision.models.{name} is not available in the torchvision stub")

    Unavailable.__name__ = name
    return Unavailable
