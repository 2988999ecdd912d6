"""The feature API of `VisionTransformer`: feature models, taps (big_vision's `out` dict) and input checks.

A mixin over the model's own components and description (`encoder`, `head`, `_taps`, `image_size`, ...):
what every consumer (few-shot, inspection, export, masked patch prediction) uses instead of looking layers
up by name.
"""

from __future__ import annotations

import warnings
from typing import Dict, Optional, Sequence

import keras
import numpy as np

from keras_vit.utils import validate
from keras_vit.vit.arguments import POOLINGS
from keras_vit.nn.initializers import PACKAGE
from keras_vit.nn.token_pooling import TokenPooling
from keras_vit.vit.predict_function import PredictFunction

POOLING_MODES = {"token": "token", "avg": "gap", "max": "max"}


@keras.saving.register_keras_serializable(package=PACKAGE)
class FeatureModel(PredictFunction, keras.Model):
    """The `keras.Model` that `feature_model` / `logits_model` return: the source model's layers up to a tap,
    whose `predict` and `predict_on_batch` check their input as the source model's do (`check_batch`: the
    clear message for a wrong size, channel layout or rank, instead of an error deep in the graph). Saved and
    reloaded, it is a plain functional model again (the check belongs to the source model)."""

    def __init__(self, *args, check=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._input_check = check  # a bound method of the source model (not tracked: no second copy of it)

    def predict(self, x, *args, **kwargs):
        if self._input_check is not None:
            self._input_check(x, "predict")
        return super().predict(x, *args, **kwargs)

    def predict_on_batch(self, x):
        if self._input_check is not None:
            self._input_check(x, "predict_on_batch")
        return super().predict_on_batch(x)


class FeatureAPI:
    """Feature taps of a `VisionTransformer` (mixed into it; needs its components and description)."""

    def feature_model(self, pooling: Optional[str] = None, *, patch_transform=None) -> keras.Model:
        """A `keras.Model` on the same inputs and weights ending at a feature tap.

        `pooling` as in the constructor: None -> pre-logits, "token", "avg", "max", "sequence".
        `patch_transform`: a layer applied to the patch embeddings (batch, grid tokens, D) before
        the class token and position embeddings (masked patch prediction corrupts them there);
        when it returns a tuple, the first item flows on and the others become extra outputs.
        """
        if pooling not in POOLINGS:
            raise ValueError(f"Unknown pooling {pooling!r}; expected one of {POOLINGS}.")
        if pooling == "token" and self.class_token is None:
            raise ValueError(f"pooling='token' needs a class token; this is a classifier={self.classifier!r} model.")
        extras = ()
        if patch_transform is None:
            tokens = self._taps["sequence"]
        else:
            if self.rotary_embedding is not None:  # the rotary table follows the grid, not a rewritten sequence
                raise ValueError(
                    "patch_transform rewrites the patch sequence, which a model with rotary position "
                    "embeddings rotates by grid position: not supported for this model."
                )
            x, extras = self._embed(self.inputs[0], patch_transform=patch_transform)
            tokens = self.encoder(x)
        if pooling is None:
            if "pre_logits" not in self._taps:
                raise ValueError(
                    f"Model {self.name!r} was built with include_top=False, pooling={self.pooling!r}: "
                    "it has no pre-logits; ask for pooling='sequence', 'avg', 'max' or 'token'."
                )
            out = self._taps["pre_logits"] if patch_transform is None else self._pool(tokens)
        elif pooling == "sequence":
            out = tokens
        else:
            out = TokenPooling(POOLING_MODES[pooling], self.num_prefix_tokens, dtype=self._layer_policy)(tokens)
        outputs = [out, *extras] if extras else out
        return FeatureModel(
            self.inputs, outputs, name=f"{self.name}_features_{pooling or 'pre_logits'}", check=self.check_batch
        )

    def logits_model(self) -> keras.Model:
        """The classifier without its activation: images -> logits (batch, classes)."""
        if not self.include_top:
            raise ValueError(f"Model {self.name!r} has no head (include_top=False).")
        if self.predictions is None:
            return self
        return FeatureModel(self.inputs, self._taps["logits"], name=f"{self.name}_logits", check=self.check_batch)

    def _block_indices(self, blocks) -> list:
        n = self.vit_config.num_layers
        if blocks is None:
            return list(range(n))
        blocks = [blocks] if isinstance(blocks, int) else list(blocks)
        bad = [b for b in blocks if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not -n <= b < n]
        if bad:
            raise ValueError(f"blocks {bad} out of range for a {n}-block model (use 0..{n - 1} or negatives).")
        return sorted({int(b) % n for b in blocks})

    def check_images(self, images: "np.ndarray | keras.KerasTensor"):
        """`images` as a (batch, H, W, 3) array of the model's size, or a ValueError naming the shapes."""
        shape = tuple(keras.ops.shape(images))
        if len(shape) == 3:
            images, shape = keras.ops.expand_dims(images, 0), (1, *shape)
        want = (*self.image_size, self.channels)
        fits = len(shape) == 4 and all(w is None or s == w for s, w in zip(shape[1:], want))
        if not fits:
            hint = (
                " (channels first? move the channel axis last)" if len(shape) == 4 and shape[1] == self.channels else ""
            )
            raise ValueError(
                f"images must be (batch, {want[0]}, {want[1]}, {want[2]}) for model {self.name!r}, got {shape}{hint}."
            )
        p = self.effective_patch_size
        bad = [(axis, s) for axis, s in (("height", shape[1]), ("width", shape[2])) if s is not None and s % p]
        if bad:
            raise ValueError(
                f"images {shape} for model {self.name!r}: "
                + "; ".join(
                    f"{axis} {s} is not a multiple of the effective patch size {p} (try {validate.nearest_multiples(s, p)})"
                    for axis, s in bad
                )
                + "."
            )
        if shape[0] == 0:
            raise ValueError(f"images is an empty batch {shape} for model {self.name!r}.")
        return images

    def check_batch(self, x, where: str = "predict"):
        """The input check of every eager entry point (`predict`, `predict_on_batch`): an array of the wrong
        rank, size, channel layout or an empty batch gets the message a direct call gives; integer pixels into
        a model that takes normalised values (or values inside [-1, 1] into one that takes [0, 255]) warn
        once. Datasets and generators go to Keras as they are."""
        if not hasattr(x, "shape") or not hasattr(x, "dtype") or isinstance(x, keras.KerasTensor):
            return
        shape = tuple(x.shape)
        if len(shape) == 3 and shape[-1] == self.channels:
            raise ValueError(
                f"{where} takes a batch (batch, H, W, {self.channels}); got one image {shape}: add a "
                "batch axis (x[None])."
            )
        self.check_images(x)
        if isinstance(x, np.ndarray) and x.size:
            self._warn_about_range(x, where)

    def _warn_about_range(self, x: np.ndarray, where: str) -> None:
        """One warning per model when the values of `x` look like another range than `input_range`: pixels
        (integers, or floats above the normalised range) into a model that takes normalised values, or values
        inside [-1, 1] into one that takes [0, 255]."""
        if getattr(self, "_range_warned", False):
            return
        low, high = self.input_range
        integers = np.issubdtype(x.dtype, np.integer)
        top, bottom = float(np.max(x)), float(np.min(x))
        if high < 255:
            wrong = integers or top > 2.0 * high + 1.0
            hint = "model.preprocessor() on pixels in [0, 255] (or keras_vit.preprocess_input for [-1, 1])"
        else:
            wrong = not integers and -1.0 <= bottom and top <= 1.0 and (bottom < 0 or top > 0)
            hint = "pixels in [0, 255]: this model normalises them itself (include_preprocessing=True)"
        if wrong:
            self._range_warned = True
            warnings.warn(
                f"{where}: model {self.name!r} takes values in [{low:g}, {high:g}] but got "
                f"{'integer pixels' if integers else 'values'} in [{bottom:g}, {top:g}]; feed it {hint}.",
                stacklevel=3,
            )

    def __call__(self, *args, **kwargs):
        """`keras.Model.__call__` with `predict`'s input check: a batch of the wrong size or channel count is one
        line naming the shapes (not a backend's convolution error), and a NumPy batch of another range than the
        model takes warns once (tensors are not read back: that would cost a device sync on every call)."""
        if (
            args
            and hasattr(args[0], "shape")
            and not isinstance(args[0], keras.KerasTensor)
            and len(args[0].shape) == 4
            and all(isinstance(d, int) for d in tuple(args[0].shape)[1:])
        ):
            # the static sizes only (a traced call's batch axis is unknown): checked on a symbolic stand-in
            self.check_images(keras.KerasTensor((1, *tuple(args[0].shape)[1:]), "float32"))
        if args and isinstance(args[0], np.ndarray) and args[0].ndim == 4 and args[0].size:
            self._warn_about_range(args[0], "model(x)")
        return super().__call__(*args, **kwargs)

    def predict(self, x, *args, **kwargs):
        """`keras.Model.predict`, with `check_batch` first; an empty array gives an empty result of the
        output's shape instead of failing inside Keras."""
        if isinstance(x, np.ndarray) and x.ndim == 4 and x.shape[0] == 0:
            self.check_images(np.zeros((1, *x.shape[1:]), "float32"))  # the shape, all but the batch
            return np.zeros((0, *self.output.shape[1:]), dtype=self.output.dtype)
        self.check_batch(x, "predict")
        return super().predict(x, *args, **kwargs)

    def predict_on_batch(self, x):
        """`keras.Model.predict_on_batch`, with `check_batch` first."""
        self.check_batch(x, "predict_on_batch")
        return super().predict_on_batch(x)

    def intermediates(
        self, images, *, blocks: Optional[Sequence[int]] = None, attention: bool = False, training: bool = False
    ) -> Dict[str, object]:
        """Runs `images` and returns the model's taps (big_vision's `out` dict).

        Keys: "blocks" {index: (batch, tokens, D) output of that encoder block}, "attention"
        {index: (batch, heads, tokens, tokens) float32 probabilities} when `attention=True`,
        "encoded" (after the final LayerNorm; rows as `model.token_layout` says), "pre_logits" (when the model
        has them) and
        "logits" (with a head, before its activation). `blocks`: indices to keep (default all).
        """
        wanted = set(self._block_indices(blocks))
        if isinstance(images, np.ndarray) and images.size:
            self._warn_about_range(images, "intermediates")
        images = keras.ops.convert_to_tensor(self.check_images(images), "float32")
        x, rotary = self._embed(images, training=training), self._rotary(images)
        out: Dict[str, object] = {"blocks": {}}
        if attention:
            out["attention"] = {}
        for i, block in enumerate(self.encoder.blocks):
            if attention:
                x, probs = block(x, rotary=rotary, training=training, return_attention=True)
            else:
                x = block(x, rotary=rotary, training=training)
            if i in wanted:
                out["blocks"][i] = x
                if attention:
                    out["attention"][i] = probs
        out["encoded"] = self.encoder.finish(x)
        if "pre_logits" in self._taps:
            out["pre_logits"] = self._pool(out["encoded"])
        if self.head is not None:
            out["logits"] = self._logits(out["encoded"], out["pre_logits"])
        return out
