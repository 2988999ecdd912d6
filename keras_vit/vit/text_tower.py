"""`TextTower`: the record that describes an image-text model's text tower (CLIP, SigLIP and their kin).

A text tower is a Transformer over token ids: a learned embedding per token and per position, pre-LN blocks
(causal in CLIP, whose tower reads left to right; bidirectional in SigLIP), a final LayerNorm, one token's
features pooled (`keras_vit.nn.text_pooling`) and projected into the space it shares with the image tower.
The defaults are OpenAI CLIP ViT-B/16's text tower as open_clip configures it.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from keras_vit.nn.mlp_core import ACTIVATIONS
from keras_vit.nn.text_pooling import TEXT_POOLING
from keras_vit.utils.validate import refuse_unknown


@dataclasses.dataclass(frozen=True)
class TextTower:
    """A text tower's sizes and form.

    Fields:
      vocab_size: token ids are 0..vocab_size-1 (CLIP's BPE: 49408).
      context_length: the longest token sequence, the rows of the position table (CLIP 77, SigLIP 64).
      width: the token width D.
      num_heads, num_layers, mlp_dim: the blocks' heads, depth and MLP width.
      output_dim: the shared embedding's width (the projection's output); None: no projection.
      causal: each token attends to itself and the tokens before it (CLIP); False: to every token (SigLIP).
      pooling: which token stands for the text (`keras_vit.nn.text_pooling.TEXT_POOLING`): "argmax" (CLIP's
        end-of-text token, the highest id), "eos" (the first `eos_id`), "last" (SigLIP), "first".
      eos_id: the end-of-text token's id (needed by pooling "eos").
      projection_bias: the projection is a dense layer with a bias (SigLIP's, open_clip's `proj_bias`); False:
        a plain matrix (CLIP's `text_projection`).
      activation: the MLP's (`keras_vit.nn.mlp_core.ACTIVATIONS`): "quick_gelu" for OpenAI's CLIP, "gelu" for
        those trained with PyTorch's exact GELU, "gelu_tanh" for SigLIP.
      layer_norm_epsilon: 1e-5 (PyTorch's LayerNorm default, open_clip's); SigLIP in big_vision 1e-6.
      layer_scale_init: LayerScale on both branches (None: none).
    """

    vocab_size: int = 49408
    context_length: int = 77
    width: int = 512
    num_heads: int = 8
    num_layers: int = 12
    mlp_dim: int = 2048
    output_dim: Optional[int] = 512
    causal: bool = True
    pooling: str = "argmax"
    eos_id: Optional[int] = None
    projection_bias: bool = False
    activation: str = "gelu"
    layer_norm_epsilon: float = 1e-5
    layer_scale_init: Optional[float] = None

    def __post_init__(self):
        for name in ("vocab_size", "context_length", "width", "num_heads", "num_layers", "mlp_dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TextTower.{name} must be a positive int, got {value!r}.")
        if self.width % self.num_heads:
            raise ValueError(f"TextTower.width {self.width} is not divisible by num_heads {self.num_heads}.")
        if self.output_dim is not None and (isinstance(self.output_dim, bool) or int(self.output_dim) < 1):
            raise ValueError(f"TextTower.output_dim must be a positive int or None, got {self.output_dim!r}.")
        if self.pooling not in TEXT_POOLING:
            raise ValueError(f"TextTower.pooling {self.pooling!r}; expected one of {TEXT_POOLING}.")
        if self.pooling == "eos" and self.eos_id is None:
            raise ValueError("TextTower.pooling 'eos' needs eos_id, the end-of-text token's id.")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"TextTower.activation {self.activation!r}; expected one of {ACTIVATIONS}.")

    @classmethod
    def fields(cls) -> tuple:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, values: dict) -> "TextTower":
        """The record from a dict of its fields (a saved config); an unknown key is refused naming it."""
        refuse_unknown("TextTower", sorted(values), cls.fields())
        return cls(**values)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
