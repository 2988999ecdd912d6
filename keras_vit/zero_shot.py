"""`python -m keras_vit.zero_shot IMAGES... --weights=FOLDER --classes=a,b`: zero-shot classification.

The short path to `keras_vit.analysis.zero_shot` (where the CLI lives).
"""

from keras_vit.analysis.zero_shot import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
