"""Masked patch prediction (paper appendix B.1.2): BERT-style self-supervision for ViT.

Half of the patch embeddings are corrupted — 80 % of those replaced by a learned
[mask] embedding, 10 % by the embedding of a random other patch of the batch, 10 %
left as they are — and a 512-way head predicts each corrupted patch's 3-bit mean
colour from its output token. The paper's code was never released; this follows
the text. The encoder it trains is the classifier's own (shared layers), so the
classifier saved at the end starts fine-tuning from the self-supervised weights.
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="recipes")
class PatchCorruption(keras.layers.Layer):
    """Corrupts token embeddings; returns (tokens, corrupted mask as float [batch, tokens])."""

    def __init__(self, corrupt_rate=0.5, mask_rate=0.8, random_rate=0.1, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not (0 < corrupt_rate <= 1 and mask_rate >= 0 and random_rate >= 0 and mask_rate + random_rate <= 1):
            raise ValueError(
                "config.mpp needs 0 < corrupt_rate <= 1 and mask_rate + random_rate <= 1, got "
                f"{corrupt_rate}, {mask_rate}, {random_rate}."
            )
        self.corrupt_rate, self.mask_rate, self.random_rate = corrupt_rate, mask_rate, random_rate
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, input_shape):
        self.mask_embedding = self.add_weight(
            name="mask_embedding", shape=(input_shape[-1],), initializer=keras.initializers.RandomNormal(stddev=0.02)
        )

    def call(self, tokens):
        b, n, d = ops.shape(tokens)[0], ops.shape(tokens)[1], ops.shape(tokens)[2]
        u = keras.random.uniform((b, n), seed=self.seed_generator)
        v = keras.random.uniform((b, n), seed=self.seed_generator)
        corrupt = u < self.corrupt_rate
        use_mask = ops.logical_and(corrupt, v < self.mask_rate)
        use_random = ops.logical_and(
            corrupt, ops.logical_and(v >= self.mask_rate, v < self.mask_rate + self.random_rate)
        )
        flat = ops.reshape(tokens, (-1, d))
        picks = keras.random.randint((b * n,), 0, b * n, seed=self.seed_generator)
        random_tokens = ops.reshape(ops.take(flat, picks, axis=0), (b, n, d))
        mask = ops.cast(self.mask_embedding, tokens.dtype)
        out = ops.where(use_mask[..., None], mask, ops.where(use_random[..., None], random_tokens, tokens))
        return out, ops.cast(corrupt, "float32")

    def compute_output_shape(self, input_shape):
        return input_shape, input_shape[:2]

    def get_config(self):
        return {
            **super().get_config(),
            "corrupt_rate": self.corrupt_rate,
            "mask_rate": self.mask_rate,
            "random_rate": self.random_rate,
            "seed": self.seed,
        }


def mean_colour_targets(images, patch: int, bits: int = 3):
    """Class id of each patch's mean colour, each channel quantised to `bits` bits -> [batch, tokens]."""
    levels = 2**bits
    colour = ops.average_pool((ops.cast(images, "float32") + 1.0) / 2.0, patch, patch, "valid")
    q = ops.clip(ops.cast(ops.floor(colour * levels), "int32"), 0, levels - 1)
    ids = q[..., 0] * levels * levels + q[..., 1] * levels + q[..., 2]
    return ops.reshape(ids, (ops.shape(images)[0], -1))


def build(model: keras.Model, mpp_config):
    """The MPP network sharing `model`'s layers, and its loss `loss_fn(outputs, images, labels)` for either
    engine's train step (`outputs` is the network's output on `images`; keras.ops only)."""
    classes = 2 ** (3 * mpp_config.bits)
    corruption = PatchCorruption(
        mpp_config.corrupt_rate, mpp_config.mask_rate, mpp_config.random_rate, name="corruption"
    )
    tokens, corrupted = model.feature_model("sequence", patch_transform=corruption).outputs
    patches = tokens[:, model.num_prefix_tokens :]
    logits = keras.layers.Dense(classes, kernel_initializer="zeros", name="mpp_head")(patches)
    network = keras.Model(model.inputs, [logits, corrupted], name=f"{model.name}_mpp")
    pixels_per_token = model.effective_patch_size

    def loss_fn(outputs, images, labels):
        del labels
        logits, corrupted = outputs
        targets = mean_colour_targets(images, pixels_per_token, mpp_config.bits)
        ce = ops.sparse_categorical_crossentropy(targets, ops.cast(logits, "float32"), from_logits=True)
        per_example = ops.sum(ce * corrupted, axis=1) / ops.maximum(ops.sum(corrupted, axis=1), 1.0)
        return per_example, ops.reshape(logits, (-1, classes)), ops.reshape(targets, (-1,))

    return network, loss_fn
