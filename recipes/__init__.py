"""Training recipes for keras_vit on tf.distribute (TensorFlow backend)."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
