"""`python -m keras_vit.predict IMAGE... --weights=W [--top=5] [--json]`: the top classes of each image.

The short path to `keras_vit.analysis.predict` (where the CLI lives), for the command users type most.
"""

from keras_vit.analysis.predict import classify, main

__all__ = ["classify", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
