"""The ViT family's variations on the paper's model, as one checked record (`Variant`).

DeiT, DeiT-III, DINOv2, CLIP, SigLIP and MAE-style models are the paper's encoder with a few parts added,
moved or switched off. `VisionTransformer` takes each as a keyword (defaults: the paper's model) and keeps
them here, so the description, `get_config`, the weight readers and `save_npz` see one list.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

from keras_vit.nn.rotary import Rotary
from keras_vit.utils import validate
from keras_vit.vit.convolutional_stem import checked_stem
from keras_vit.vit.layers import LAYER_NORM_EPSILON
from keras_vit.vit.mlp import activation_name
from keras_vit.vit.position_resampling import PositionResampling


@dataclasses.dataclass(frozen=True)
class Variant:
    """The family options of one model (each a constructor keyword of `VisionTransformer`).

    Attributes:
      activation: the MLP's activation: "gelu_tanh" (the paper's code), "gelu" (exact; timm, DeiT, DINOv2) or
        "quick_gelu" (OpenAI CLIP).
      layer_norm_epsilon: every LayerNorm's epsilon (1e-6; CLIP 1e-5).
      layer_scale_init: LayerScale on both residual branches, initialised to this (DeiT-III, DINOv2); None.
      num_register_tokens: learned tokens after the class token that take part in attention and are then
        dropped (DINOv2 "with registers", Darcet et al. 2024); 0.
      distillation_token: DeiT's second prefix token with its own head; the two heads' logits are averaged.
      pre_norm: a LayerNorm on the embeddings before the first block (CLIP).
      fc_norm: the final LayerNorm after pooling instead of before it (MAE-style GAP models).
      final_norm: whether there is a final LayerNorm at all (RADIO and InternViT backbones have none).
      qk_norm: LayerNorm on each head's queries and keys.
      qkv_bias: biases on the query/key/value projections.
      key_bias: with `qkv_bias`, whether the key projection has one too (False: EVA's query and value biases).
      patch_bias: a bias in the patch embedding (CLIP has none).
      prefix_position_embedding: whether the prefix tokens (class, registers, distillation) have position
        embeddings (the paper's, DeiT) or are prepended after them (DeiT-III, DINOv2; timm's no_embed_class).
      stem_numerics: a hybrid's ResNet stem computed as the original code ("original") or timm ("timm": weight
        standardisation sqrt(var + 1e-8), GroupNorm epsilon 1e-5); `keras_vit.vit.resnet.STEM_NUMERICS`.
      position_interpolation: how position embeddings are resized to another grid, as the source's own code does:
        "linear" (the original code's) or "bicubic" (timm's, antialiased). Not a weight: any file loads.
      class_token: a class token in a model that pools otherwise ("gap" / "map": EVA, some MAE models keep one
        that attends but is not read); None: as the classifier says (only "token" has one).
      rotary_embedding: rotary position embeddings on every block's queries and keys (EVA-02, DINOv3, PE,
        RoPE-ViT): a `keras_vit.nn.rotary.Rotary` or its dict; None (the paper's model) for none.
      absolute_position_embedding: whether there is a learned position table added to the tokens (False:
        DINOv3 and RoPE-ViT rely on the rotary embeddings alone).
      swiglu: the SwiGLU MLP (`keras_vit.nn.swiglu`) in place of the paper's (EVA-02, DINOv3 "plus").
      mlp_norm: a LayerNorm on the MLP's hidden layer (EVA-02's sub-LN in its SwiGLU; BEiT-3).
      attention_norm: a LayerNorm on the attention's output before its projection (EVA-CLIP).
      attention_pooling_heads: heads of the MAP head when they differ from the encoder's (PE: 8); None.
      pooling_includes_prefix: the pooling also reads the prefix tokens (timm's EVA MAP head attends to every
        token; timm's `pool_include_prefix` averages them in).
      rms_norm: every norm an RMSNorm instead of a LayerNorm (AIMv2, timm's RMSNorm ViTs).
      patch_norm: a norm on the patch embeddings (AIMv2).
      projection_bias: biases on the attention's output projection and the MLP's Dense layers (AIMv2 has none).
      post_norm: each residual branch normalised after it, x + LN(f(x)) (timm's ResPostBlock, EVA-CLIP enormous).
      attention_only_layer_scale: LayerScale on the attention branch only (Sapiens2).
      key_value_heads: grouped-query attention's key/value heads: one count, or one per block (Sapiens2); None:
        as many as query heads.
      parallel_layers: attention and MLP side by side on one norm, x + MSA(LN(x)) + MLP(LN(x)) (ViT-22B; timm's
        ParallelScalingBlock).
      position_resampling: the position table kept at the grid it was trained on and resampled to each input's
        grid, patches only (FlexiViT; SigLIP 2 NaFlex and RADIO, timm's `naflexvit`): a
        `keras_vit.vit.position_resampling.PositionResampling` or its dict; None (the paper's table).
      differential_attention: each head the difference of two softmax maps (the Differential Transformer, Ye
        et al. 2024; timm's `DiffAttention`): `keras_vit.vit.differential_attention`.
      convolutional_stem: convolutions before the patch embedding, ((channels, kernel size = stride), ...), each
        with BatchNorm and GELU, the embedding taking the rest of the patch (MobileCLIP's ViT-B: ((192, 4),
        (192, 2)) with 16-pixel patches): `keras_vit.vit.convolutional_stem`; None.
    """

    activation: str = "gelu_tanh"
    layer_norm_epsilon: float = LAYER_NORM_EPSILON
    layer_scale_init: Optional[float] = None
    num_register_tokens: int = 0
    distillation_token: bool = False
    pre_norm: bool = False
    fc_norm: bool = False
    final_norm: bool = True
    qk_norm: bool = False
    qkv_bias: bool = True
    key_bias: bool = True
    patch_bias: bool = True
    prefix_position_embedding: bool = True
    class_token: Optional[bool] = None
    stem_numerics: str = "original"
    position_interpolation: str = "linear"
    rotary_embedding: Optional[Rotary] = None
    absolute_position_embedding: bool = True
    swiglu: bool = False
    mlp_norm: bool = False
    attention_norm: bool = False
    attention_pooling_heads: Optional[int] = None
    pooling_includes_prefix: bool = False
    rms_norm: bool = False
    patch_norm: bool = False
    projection_bias: bool = True
    post_norm: bool = False
    attention_only_layer_scale: bool = False
    key_value_heads: Optional[Tuple[int, ...]] = None
    parallel_layers: bool = False
    position_resampling: Optional[PositionResampling] = None
    differential_attention: bool = False
    convolutional_stem: Optional[Tuple[Tuple[int, int], ...]] = None

    @classmethod
    def fields(cls) -> tuple:
        """The option names (each a `VisionTransformer` keyword)."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def checked(cls, gelu_approximate=None, **options) -> "Variant":
        """The record after type and range checks (errors name the keyword)."""
        options["activation"] = activation_name(options.get("activation"), gelu_approximate)
        options["layer_norm_epsilon"] = validate.number(
            "layer_norm_epsilon", options.get("layer_norm_epsilon", LAYER_NORM_EPSILON), positive=True
        )
        if options.get("layer_scale_init") is not None:
            options["layer_scale_init"] = validate.number(
                "layer_scale_init", options["layer_scale_init"], positive=True
            )
        registers = validate.integer("num_register_tokens", options.get("num_register_tokens", 0), minimum=0)
        options["num_register_tokens"] = registers
        for field in (
            "distillation_token",
            "pre_norm",
            "fc_norm",
            "final_norm",
            "qk_norm",
            "qkv_bias",
            "patch_bias",
            "prefix_position_embedding",
            "class_token",
            "absolute_position_embedding",
            "swiglu",
            "mlp_norm",
            "key_bias",
            "rms_norm",
            "patch_norm",
            "projection_bias",
            "post_norm",
            "attention_only_layer_scale",
            "attention_norm",
            "pooling_includes_prefix",
            "parallel_layers",
            "differential_attention",
        ):
            if options.get(field) is not None or field != "class_token" and field in options:
                validate.boolean(field, options[field])
        validate.choice("stem_numerics", options.get("stem_numerics", "original"), ("original", "timm"))
        validate.choice(
            "position_interpolation", options.get("position_interpolation", "linear"), ("linear", "bicubic")
        )
        options["rotary_embedding"] = Rotary.from_config(options.get("rotary_embedding"))
        options["position_resampling"] = PositionResampling.from_config(options.get("position_resampling"))
        options["convolutional_stem"] = checked_stem(options.get("convolutional_stem"))
        if options["position_resampling"] is not None and (
            options.get("prefix_position_embedding", True) or options.get("absolute_position_embedding") is False
        ):
            raise ValueError(
                "position_resampling is a learned table of the patches' rows alone: it goes with "
                "prefix_position_embedding=False (and a position table: absolute_position_embedding)."
            )
        if options.get("key_value_heads") is not None:  # a count per block; one count for all is kept as given
            heads = options["key_value_heads"]
            options["key_value_heads"] = (
                validate.integer("key_value_heads", heads)
                if isinstance(heads, int)
                else validate.integers("key_value_heads", heads)
            )
        options["attention_pooling_heads"] = validate.integer(
            "attention_pooling_heads", options.get("attention_pooling_heads"), allow_none=True
        )
        return cls(**options)

    @classmethod
    def for_model(cls, classifier: str, representation_size, gelu_approximate=None, **options) -> "Variant":
        """`checked`, plus the rules that tie the options to the classifier: an explicit `class_token` equal to
        the classifier's own is recorded as None; DeiT's distillation token needs the class token's head."""
        token = options.get("class_token")
        options["class_token"] = None if token is None or token == (classifier == "token") else token
        variant = cls.checked(gelu_approximate, **options)
        if variant.class_token is False:
            raise ValueError("classifier='token' reads the class token: class_token=False contradicts it.")
        if variant.distillation_token and (classifier != "token" or representation_size is not None):
            raise ValueError(
                "distillation_token=True goes with classifier='token' and no representation_size "
                "(DeiT's two heads read the class and distillation tokens)."
            )
        return variant

    def to_config(self) -> dict:
        out = dataclasses.asdict(self)
        if isinstance(self.key_value_heads, tuple):
            out["key_value_heads"] = list(self.key_value_heads)
        out["rotary_embedding"] = self.rotary_embedding.to_config() if self.rotary_embedding is not None else None
        out["position_resampling"] = (
            self.position_resampling.to_config() if self.position_resampling is not None else None
        )
        out["convolutional_stem"] = (
            [list(layer) for layer in self.convolutional_stem] if self.convolutional_stem else None
        )
        return out

    def has_class_token(self, classifier: str) -> bool:
        return classifier == "token" if self.class_token is None else self.class_token

    def num_prefix_tokens(self, classifier: str) -> int:
        """Tokens before the patches: the class token, the distillation token, the registers."""
        return int(self.has_class_token(classifier)) + int(self.distillation_token) + self.num_register_tokens

    TIMM_WRITER_LACKS = (
        "rotary_embedding",
        "absolute_position_embedding",
        "swiglu",
        "mlp_norm",
        "attention_norm",
        "key_bias",
        "attention_pooling_heads",
        "pooling_includes_prefix",
        "rms_norm",
        "patch_norm",
        "projection_bias",
        "post_norm",
        "attention_only_layer_scale",
        "key_value_heads",
        "parallel_layers",
        "convolutional_stem",
    )

    def timm_writer_lacks(self) -> List[str]:
        """The parts of the 2026 backbones (timm's `Eva` models: EVA-02, DINOv3, PE, RoPE-ViT; AIMv2, parallel
        layers, MobileCLIP's stem) this model has, as `field=value`: what timm builds from an architecture's name
        only, so timm's writers write the model as the registered architecture that has them
        (`keras_vit.weights.timm_args.registered_architecture`). The name is kept from when they were refused."""
        default = Variant()
        return [
            f"{field}={getattr(self, field)!r}"
            for field in self.TIMM_WRITER_LACKS
            if getattr(self, field) != getattr(default, field)
        ]

    def non_official_parts(self, has_prefix_tokens: bool = True) -> List[str]:
        """What the official `.npz` layout has no place for (`save_npz` refuses these, naming them). The two GELUs
        are allowed (the file does not say which; timm-read models use the exact one)."""
        default = Variant(
            activation="gelu" if self.activation == "gelu" else "gelu_tanh",
            position_interpolation=self.position_interpolation,
            prefix_position_embedding=True if has_prefix_tokens else self.prefix_position_embedding,
        )
        parts = {
            "activation": "the quick GELU",
            "layer_norm_epsilon": "another LayerNorm epsilon",
            "layer_scale_init": "LayerScale",
            "num_register_tokens": "register tokens",
            "distillation_token": "a distillation token",
            "pre_norm": "a LayerNorm after the embeddings",
            "fc_norm": "a LayerNorm after pooling",
            "final_norm": "no final LayerNorm",
            "qk_norm": "qk-norm",
            "qkv_bias": "query/key/value without biases",
            "patch_bias": "a patch embedding without bias",
            "prefix_position_embedding": "prefix tokens without position embeddings",
            "class_token": "a class token the classifier does not read",
            "stem_numerics": "timm's ResNet-stem numerics",
            "rotary_embedding": "rotary position embeddings",
            "absolute_position_embedding": "no learned position table",
            "swiglu": "a SwiGLU MLP",
            "mlp_norm": "a norm inside the MLP",
            "key_bias": "no key bias",
            "attention_norm": "a norm on the attention's output",
            "attention_pooling_heads": "a MAP head with its own head count",
            "pooling_includes_prefix": "pooling over the prefix tokens",
            "rms_norm": "RMSNorm",
            "patch_norm": "a norm on the patch embeddings",
            "projection_bias": "projections without bias",
            "post_norm": "post-norm blocks",
            "attention_only_layer_scale": "LayerScale on attention only",
            "key_value_heads": "grouped-query attention",
            "parallel_layers": "parallel layers",
            "position_resampling": "a position table resampled per input (NaFlex)",
            "differential_attention": "differential attention",
            "convolutional_stem": "a convolutional stem",
        }
        return [
            f"{what} ({field}={getattr(self, field)!r})"
            for field, what in parts.items()
            if getattr(self, field) != getattr(default, field)
        ]
