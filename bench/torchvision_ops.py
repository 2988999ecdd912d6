"""Import torchvision on a CPU torch its wheel was not built against (bench only, for timm's transforms).

The torchvision wheel that matches torch 2.13 here carries compiled detection ops (nms, roi_align, ...) whose
library does not load on the CPU build; torchvision then fails at import while registering their shape
functions. Registrations for ops that do not exist are skipped here; the transforms timm's data pipeline
uses are pure Python over PIL and are unaffected. Calling a detection op still fails.
"""

import torch.library

_register_fake = torch.library.register_fake


def _register_fake_if_defined(op, func=None, /, **kwargs):
    def register(fn):
        try:
            _register_fake(op, fn, **kwargs)
        except RuntimeError:  # "operator torchvision::nms does not exist": its library did not load
            pass
        return fn

    return register(func) if func is not None else register


torch.library.register_fake = _register_fake_if_defined
try:
    import torchvision  # noqa: F401,E402
finally:
    torch.library.register_fake = _register_fake
