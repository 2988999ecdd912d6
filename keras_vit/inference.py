"""`python -m keras_vit.inference SOURCE --weights=W --output=DIR`: top-k classes or features of every image of
a folder, a file list or a TFDS split, in resumable shards.

The short path to `keras_vit.analysis.inference` (where the CLI and `run_inference` live).
"""

from keras_vit.analysis.inference import main, run_inference

__all__ = ["main", "run_inference"]

if __name__ == "__main__":
    raise SystemExit(main())
