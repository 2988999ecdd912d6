from torchvision._unavailable import unavailable
from torchvision.transforms import functional  # noqa: F401
from torchvision.transforms.functional import InterpolationMode  # noqa: F401

__getattr__ = unavailable("torchvision.transforms")
