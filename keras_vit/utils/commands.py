"""The name a command-line tool was started by, for its usage line and messages.

Each tool runs as `python -m <module>` and as a console script (`keras-vit-predict`, `keras-vit-inference`,
`keras-vit-train`, `keras-vit-export`; setup.cfg). The console scripts exist because `python -m` puts the working
directory first on `sys.path`, where a user's own `recipes/` package would be imported instead of ours.
"""

from __future__ import annotations

import os
import sys


def prog(module_form: str) -> str:
    """The console script's name when started by one (`keras-vit-...`), else `module_form`
    ("python -m keras_vit.predict")."""
    started = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return started if started.startswith("keras-vit-") else module_form
