from torchvision._unavailable import unavailable

__getattr__ = unavailable("torchvision.utils")
