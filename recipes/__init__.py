"""Training recipes for keras_vit: one trainer on two engines, TensorFlow (tf.distribute) and JAX
(keras.distribution). The engine is Keras' backend: `KERAS_BACKEND=jax`, or `--backend=jax` on the trainer's
command line (read here, before Keras is imported); TensorFlow when neither says otherwise."""

import os
import sys


def _backend_flag(argv) -> str:
    """The value of `--backend=X` / `--backend X` when this process is `python -m recipes.train`."""
    if not argv or not (argv[0] == "-m" or argv[0].endswith(os.path.join("recipes", "train.py"))):
        return ""
    for i, arg in enumerate(argv[1:], 1):
        if arg.startswith("--backend="):
            return arg.split("=", 1)[1]
        if arg == "--backend" and i + 1 < len(argv):
            return argv[i + 1]
    return ""


if _backend_flag(sys.argv):
    os.environ["KERAS_BACKEND"] = _backend_flag(sys.argv)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
