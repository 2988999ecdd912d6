import enum


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def __getattr__(name):
    def unavailable(*args, **kwargs):
        raise RuntimeError(f"torchvision.transforms.functional.{name} is not available in the stub")

    return unavailable
