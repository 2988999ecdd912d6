"""Old module paths that forward to new ones, with a DeprecationWarning: how a package moves a module without
breaking its users for a release.

`Forwarder({old: (new, ...)}, removal)` on `sys.meta_path` answers the old names: importing one gives a module
whose attributes are looked up in the new modules in order; `python -m <old>` runs the first new module.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from typing import Dict, Optional, Tuple


class Forwarder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of `moved`; their modules forward attribute look-ups to the new ones."""

    def __init__(self, moved: Dict[str, Tuple[str, ...]], removal: str):
        self.moved, self.removal = moved, removal

    def warn(self, old: str) -> None:
        new = " and ".join(self.moved[old])
        warnings.warn(
            f"{old} is deprecated and will be removed in {self.removal}; use {new}.", DeprecationWarning, stacklevel=4
        )

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.moved:
            return None
        origin = importlib.util.find_spec(self.moved[fullname][0]).origin
        return importlib.machinery.ModuleSpec(fullname, self, origin=origin)

    def create_module(self, spec):
        return types.ModuleType(spec.name)

    def exec_module(self, module) -> None:
        targets = [importlib.import_module(name) for name in self.moved[module.__name__]]
        module.__doc__ = f"Deprecated alias of {' and '.join(self.moved[module.__name__])}."

        def forward(attribute: str):
            for target in targets:
                if hasattr(target, attribute):
                    return getattr(target, attribute)
            raise AttributeError(f"module {module.__name__!r} has no attribute {attribute!r}")

        module.__getattr__ = forward
        module.__dir__ = lambda: sorted({a for t in targets for a in dir(t)})
        self.warn(module.__name__)

    def get_code(self, fullname):
        """`python -m <old path>` runs the new module as `__main__`."""
        self.warn(fullname)
        return importlib.util.find_spec(self.moved[fullname][0]).loader.get_code(self.moved[fullname][0])

    def install(self) -> "Forwarder":
        """Puts this forwarder on `sys.meta_path` (once); returns it."""
        if self not in sys.meta_path:
            sys.meta_path.append(self)
        return self

    def resolve(self, name: str) -> Optional[types.ModuleType]:
        """The (deprecated) module of an old path, imported on first use; None for any other name."""
        return importlib.import_module(name) if name in self.moved else None
