"""A stand-in for torchvision so that `import timm` works with torch 2.13.0 CPU on this machine.

No CPU torchvision wheel matches torch 2.13.0 here (the PyPI wheel's C ops fail to
load), and timm imports torchvision at import time for data transforms it never
uses when we only build models. This stub provides just those import-time names;
calling any of them raises. Used only by tools/ and bench/ (never by the library or CI).
Put `tools/torchvision_stub` first on sys.path to use it.
"""

__version__ = "0.0.0+stub"
STUB = True
