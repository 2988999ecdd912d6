"""Parallel branches (Touvron et al., 2022, "Three things everyone should know about Vision Transformers"; timm's
`ParallelThingsBlock`, its `vit_*_18x2_*` models): each block holds N attention branches and N MLP branches, each
with its own norm and LayerScale, and adds their sums in turn,

    x = x + sum_j LS_j(MSA_j(LN_j(x)))
    x = x + sum_j LS'_j(MLP_j(LN'_j(x)))

a wider, shallower encoder at the same parameters and FLOPs (18 blocks of two branches for the 36 of a deep
ViT-S). Each branch is an `EncoderBlock` used for its parts (its two norms, attention, MLP, LayerScales and
stochastic depth), so branch j's weights are named, read and written as a block's are, under `branch_<j>/`.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_vit.nn.initializers import PACKAGE
from keras_vit.nn.specs import ArraySpecs


@keras.saving.register_keras_serializable(package=PACKAGE)
class ParallelBranchesBlock(ArraySpecs, keras.layers.Layer):
    """One encoder block of `len(branches)` parallel attention and MLP branches (`branches`: `EncoderBlock`
    layers, or their serialised configs, all of one configuration). Called like an `EncoderBlock`; with
    `return_attention=True` the attention probabilities are the branches' mean."""

    def __init__(self, branches, **kwargs):
        super().__init__(**kwargs)
        self.branches = [
            b if isinstance(b, keras.layers.Layer) else keras.saving.deserialize_keras_object(b) for b in branches
        ]
        if len(self.branches) < 2:
            raise ValueError(f"parallel branches need at least two branches, got {len(self.branches)}.")
        if self.branches[0].remat is True:
            raise ValueError("remat=True recomputes whole blocks; keras_vit does not build it with parallel branches.")
        if self.branches[0].parallel_layers or self.branches[0].post_norm:
            raise ValueError("parallel branches are pre-norm blocks: no parallel_layers or post_norm inside them.")

    @property
    def remat(self):
        return self.branches[0].remat

    @property
    def activation(self) -> str:
        return self.branches[0].activation

    def build(self, input_shape):
        for branch in self.branches:
            branch.build(input_shape)

    def call(self, x, rotary=None, training=None, return_attention=False):
        outputs, maps = [], []
        for b in self.branches:
            y = b.attention(b.layer_norm_0(x), rotary=rotary, training=training, return_attention=return_attention)
            if return_attention:
                y, probs = y
                maps.append(probs)
            y = b.dropout(y, training=training)
            y = b.layer_scale_0(y) if b.layer_scale_0 is not None else y
            outputs.append(ops.cast(b.drop_path(y, training=training), x.dtype))
        x = x + sum(outputs[1:], outputs[0])
        outputs = []
        for b in self.branches:
            y = b.mlp(b.layer_norm_2(x), training=training)
            y = b.layer_scale_2(y) if b.layer_scale_2 is not None else y
            outputs.append(ops.cast(b.drop_path(y, training=training), x.dtype))
        x = x + sum(outputs[1:], outputs[0])
        return (x, sum(maps[1:], maps[0]) / len(maps)) if return_attention else x

    def compute_output_shape(self, input_shape):
        return input_shape

    def options(self) -> dict:
        """The block options of its branches, and how many there are."""
        return {**self.branches[0].options(), "parallel_branches": len(self.branches)}

    def computation(self) -> dict:
        """What the block computes at inference (`keras_vit.nn.block_graph` keys its functions by it)."""
        return {**self.branches[0].computation(), "parallel_branches": len(self.branches)}

    def get_config(self):
        return {
            **super().get_config(),
            "branches": [keras.saving.serialize_keras_object(b) for b in self.branches],
        }
