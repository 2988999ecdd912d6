"""The encoder: the stack of blocks and the final norm, with stochastic depth growing over depth.

Inference can run every block through one compiled block function (`keras_vit.nn.block_graph`).
"""

from __future__ import annotations

from typing import Optional, Union

import keras

from keras_vit.nn import block_graph
from keras_vit.nn.encoder_block import BLOCK_OPTIONS, EncoderBlock, layer_norm, remat_mode
from keras_vit.nn.initializers import PACKAGE as _PACKAGE
from keras_vit.nn.mlp import activation_name
from keras_vit.nn.parallel_branches import ParallelBranchesBlock
from keras_vit.nn.specs import ArraySpecs


def key_value_heads_per_block(key_value_heads, num_layers: int) -> Optional[tuple]:
    """Grouped-query attention's key/value heads of each block: None (as many as query heads), one count for
    every block, or a count per block (Sapiens2 keeps full attention in its first and last blocks)."""
    if key_value_heads is None:
        return None
    counts = (
        (key_value_heads,) * num_layers if isinstance(key_value_heads, int) else tuple(int(k) for k in key_value_heads)
    )
    if len(counts) != num_layers:
        raise ValueError(f"key_value_heads gives {len(counts)} blocks' counts for a {num_layers}-block model.")
    return counts


# the family options the encoder takes: every block's (`BLOCK_OPTIONS`) and those of the stack; the model passes
# each field of its record of one of these names (`keras_vit.vit.components`)
ENCODER_OPTIONS = (*BLOCK_OPTIONS, "layer_scale_init", "final_norm", "key_value_heads", "parallel_branches")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Encoder(ArraySpecs, keras.layers.Layer):
    """The stack of `num_layers` EncoderBlocks followed by the final LayerNorm (none with `final_norm=False`:
    models that normalise after pooling instead, timm's fc_norm).

    Stochastic depth grows linearly from 0 (first block) to `drop_path_rate` (last). The family's block
    options (`BLOCK_OPTIONS`) go to every block.
    """

    def __init__(
        self,
        num_layers: int,
        num_heads: int,
        mlp_dim: int,
        dropout_rate: float = 0.0,
        attention_dropout_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        gelu_approximate=None,
        remat: Union[bool, str] = False,
        layer_scale_init: Optional[float] = None,
        final_norm: bool = True,
        key_value_heads=None,
        parallel_branches: int = 1,
        **options,
    ):
        block_options = {k: options.pop(k, v) for k, v in BLOCK_OPTIONS.items()}
        super().__init__(**options)
        self.parallel_branches = int(parallel_branches)
        block_options["activation"] = activation_name(block_options["activation"], gelu_approximate)
        self.layer_scale_init = None if layer_scale_init is None else float(layer_scale_init)
        self.num_layers, self.num_heads, self.mlp_dim = int(num_layers), int(num_heads), int(mlp_dim)
        self.remat, self.final_norm = remat_mode(remat), bool(final_norm)
        self.dropout_rate = float(dropout_rate)
        self.attention_dropout_rate = float(attention_dropout_rate)
        self.drop_path_rate = float(drop_path_rate)
        steps = max(self.num_layers - 1, 1)
        self.key_value_heads = key_value_heads_per_block(key_value_heads, self.num_layers)

        def block(i: int, name: str) -> EncoderBlock:
            return EncoderBlock(
                self.num_heads,
                self.mlp_dim,
                self.dropout_rate,
                self.attention_dropout_rate,
                self.drop_path_rate * i / steps,
                None,
                self.remat,
                self.layer_scale_init,
                **block_options,
                num_key_value_heads=self.key_value_heads[i] if self.key_value_heads else None,
                block_index=i,
                dtype=self.dtype_policy,
                name=name,
            )

        self.blocks = [
            block(i, f"encoderblock_{i}")
            if self.parallel_branches == 1
            else ParallelBranchesBlock(
                [block(i, f"branch_{j}") for j in range(self.parallel_branches)],
                dtype=self.dtype_policy,
                name=f"encoderblock_{i}",
            )
            for i in range(self.num_layers)
        ]
        self.encoder_norm = (
            layer_norm(
                "encoder_norm", self.dtype_policy, block_options["layer_norm_epsilon"], block_options["rms_norm"]
            )
            if self.final_norm
            else None
        )

    def _trackable_children(self, save_type="checkpoint", **kwargs):
        """TensorFlow's object graph (`tf.train.Checkpoint`, `CheckpointManager`) does not follow the `blocks`
        list that Keras tracks: each block is named here as `encoderblock_<i>`, so a checkpoint holds every
        variable and `assert_consumed` refuses one of another depth. (Only TensorFlow calls this.)"""
        children = dict(super()._trackable_children(save_type, **kwargs))
        if save_type == "checkpoint":
            children.update((block.name, block) for block in self.blocks)
        return children

    @property
    def activation(self) -> str:
        return self.blocks[0].activation if self.blocks else activation_name(None, None)

    @property
    def gelu_approximate(self) -> bool:
        return self.activation == "gelu_tanh"

    def build(self, input_shape):
        for block in self.blocks:
            block.build(input_shape)
        if self.encoder_norm is not None:
            self.encoder_norm.build(input_shape)

    def finish(self, x):
        """The last blocks' output through the final LayerNorm (if the encoder has one)."""
        return self.encoder_norm(x) if self.encoder_norm is not None else x

    def call(self, x, rotary=None, training=None, return_attention=False):
        """`rotary`: the (tokens, 2 * head_dim) table of rotary embeddings (`keras_vit.nn.rotary`), or None."""
        if not return_attention and block_graph.applies() and not training:  # one compiled block, every block
            y = block_graph.run_blocks(self, x, rotary)
            if y is not None:
                return self.finish(y)
        attention = []
        for block in self.blocks:
            if return_attention:
                x, probs = block(x, rotary=rotary, training=training, return_attention=True)
                attention.append(probs)
            else:
                x = block(x, rotary=rotary, training=training)
        x = self.finish(x)
        return (x, attention) if return_attention else x

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        options = self.blocks[0].options() if self.blocks else dict(BLOCK_OPTIONS)
        options.setdefault("parallel_branches", self.parallel_branches)
        return {
            **super().get_config(),
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "mlp_dim": self.mlp_dim,
            "dropout_rate": self.dropout_rate,
            "attention_dropout_rate": self.attention_dropout_rate,
            "drop_path_rate": self.drop_path_rate,
            "remat": self.remat,
            "layer_scale_init": self.layer_scale_init,
            "final_norm": self.final_norm,
            "key_value_heads": list(self.key_value_heads) if self.key_value_heads else None,
            **options,
        }
