"""A serving SavedModel that takes encoded images: what TF Serving and Vertex AI clients send.

`serving_default(images: string[batch])` decodes each JPEG/PNG/GIF/BMP at its own bit depth (8- or
16-bit), applies the checkpoint's own preprocessing (`model.preprocessor()`: resize, centre crop and
normalisation per its data config) and returns
the top-k `classes` (int32), `scores` (softmax probabilities) and `labels` (strings: the file given at export,
else the model's own class names).
"""

from __future__ import annotations

from typing import Sequence


def read_labels(path: str, classes: int) -> list:
    """One label per line, exactly `classes` of them."""
    try:
        with open(path, encoding="utf-8") as f:
            labels = [line.rstrip("\n") for line in f if line.strip()]
    except OSError as e:
        raise ValueError(f"--labels {path!r} is not readable: {e}") from e
    if len(labels) != classes:
        raise ValueError(f"--labels {path!r} has {len(labels)} labels; the model has {classes} classes.")
    return labels


def write(model, directory: str, labels: Sequence[str], top_k: int = 5) -> str:
    """Saves the bytes-in serving model of `model` (a keras_vit classifier of fixed size) at `directory`."""
    import tensorflow as tf

    if not model.include_top:
        raise ValueError(f"A serving export returns classes; model {model.name!r} has no head (include_top=False).")
    if len(labels) != model.classes:
        raise ValueError(f"{len(labels)} labels for a {model.classes}-class model.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= model.classes:
        raise ValueError(f"top_k must be an integer in [1, {model.classes}], got {top_k!r}.")
    net = model.logits_model()
    (h, w), channels = model.base_image_size, model.channels  # an any-size model serves at its stored grid
    preprocessing = model.preprocessor()

    class Serving(tf.Module):
        def __init__(self):
            super().__init__()
            self.net = net
            self.labels = tf.constant(list(labels))

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")])
        def serve(self, images):
            pixels = tf.map_fn(
                lambda encoded: preprocessing(decode(encoded, channels))[0],
                images,
                fn_output_signature=tf.TensorSpec([h, w, channels], tf.float32),
            )
            logits = tf.cast(self.net(pixels, training=False), tf.float32)
            scores, classes = tf.math.top_k(tf.nn.softmax(logits), k=top_k)
            return {"classes": classes, "scores": scores, "labels": tf.gather(self.labels, classes)}

    module = Serving()
    tf.saved_model.save(module, directory, signatures={"serving_default": module.serve})
    return directory


def decode(encoded, channels: int):
    """One encoded image -> float32 pixels in [0, 255] at its own size, as the signature decodes them (8- and
    16-bit images alike: `convert_image_dtype` scales by the dtype's maximum)."""
    import tensorflow as tf

    image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
    image.set_shape([None, None, channels])
    return tf.image.convert_image_dtype(image, tf.float32) * 255.0
