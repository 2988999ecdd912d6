"""Shared pytest set-up: quiet TF logs, the repository root on sys.path, tiny model builders."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
FLAX_FIXTURES = os.path.join(FIXTURES, "flax_reference")
