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


if _backend_flag(sys.argv) in ("tensorflow", "jax"):  # another value is left for the flag parser to refuse
    os.environ["KERAS_BACKEND"] = _backend_flag(sys.argv)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def _is_the_trainer() -> bool:
    """Whether this process is the trainer's command line (`python -m recipes.train`, `keras-vit-train`)."""
    argv = list(getattr(sys, "orig_argv", []))
    options = argv[1 : len(argv) - len(sys.argv) + 1]  # the interpreter's, before the program's arguments
    if options[-2:] == ["-m", "recipes.train"]:
        return True
    return os.path.basename(sys.argv[0] if sys.argv else "") == "keras-vit-train"


if _is_the_trainer():  # Keras first through keras_vit: its CLIs start without TensorFlow's start-up log lines
    import keras_vit  # noqa: F401

# Module paths before 0.3, forwarded to recipes.trainer with a DeprecationWarning (keras_vit.utils.moved; loaded only
# when an old path is imported, so `import recipes` stays light)
MOVED = {
    f"recipes.{old}": (f"recipes.trainer.{new}",)
    for old, new in (
        ("tf_train", "tf_run"),
        ("jax_train", "jax_run"),
        ("steps", "tf_step"),
        ("checkpointing", "checkpoints"),
        ("jax_engine", "jax_step"),
        ("orbax_checkpointing", "jax_checkpoints"),
        ("losses", "losses"),
        ("optim", "optim"),
        ("distribute", "distribute"),
        ("lock", "lock"),
        ("config_checks", "config_checks"),
        ("fewshot_callback", "fewshot_callback"),
    )
}


class _OldPaths:
    """A `sys.meta_path` finder for the names of `MOVED` that hands them to `keras_vit.utils.moved.Forwarder`."""

    forwarder = None

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        if self.forwarder is None:
            from keras_vit.utils.moved import Forwarder

            self.forwarder = Forwarder(MOVED, "recipes 0.4")
        return self.forwarder.find_spec(fullname)


if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
    sys.meta_path.append(_OldPaths())
