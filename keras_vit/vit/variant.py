"""The ViT family's variations on the paper's model, as one checked record (`Variant`).

DeiT, DeiT-III, DINOv2, CLIP, SigLIP, EVA-02, DINOv3, AIMv2, NaFlex and MobileCLIP's image towers are the paper's
encoder with a few parts added, moved or switched off. Each such choice is one field of `Variant`, declared once
below with the part of the model it belongs to, its documentation, what the official `.npz` layout calls it when it
has no place there, and whether timm builds it from an architecture's name alone. Everything that lists the options
derives from this table: `VisionTransformer`'s and the constructors' documentation, the nested config
(`{"attention": {"qk_norm": True}, ...}`), the official writer's refusals and timm's writer's choice of a
registered architecture.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import List, Optional, Tuple

from keras_vit.nn.rotary import Rotary
from keras_vit.utils import validate
from keras_vit.nn.convolutional_stem import checked_stem
from keras_vit.nn.layer_norm import LAYER_NORM_EPSILON
from keras_vit.nn.mlp import activation_name
from keras_vit.nn.position_resampling import PositionResampling

# the parts of the model, in the order a token meets them
PARTS = {
    "embedding": "the patch embedding and a stem before it",
    "tokens": "the tokens before the patches",
    "position": "position information",
    "block": "each encoder block's shape and norms",
    "attention": "each block's attention",
    "mlp": "each block's MLP",
    "head": "pooling and the final norm",
}


def _option(default, part: str, doc: str, official: str, timm_by_name: bool = False, seen=None):
    """One family option: its default (the paper's model), its part of the model (`PARTS`), its documentation,
    what the official layout lacks when it is not the default (`non_official_parts`), whether timm builds it
    from an architecture's name only (`timm_writer_lacks`) and, where the arrays show it, `seen(params, block)`:
    its value read off official-key arrays (`block`: the first block's key prefix), None where they do not show
    it (`keras_vit.weights.architecture` asks every field that has one)."""
    assert part in PARTS, part
    return dataclasses.field(
        default=default, metadata=dict(part=part, doc=doc, official=official, timm_by_name=timm_by_name, seen=seen)
    )


def _present(key: str, value=True):
    """`seen` for an option the arrays show by one key (relative to the first block's prefix when it starts with
    '/'): `value` where that key is present."""

    def seen(params, block):
        return value if (block + key[1:] if key.startswith("/") else key) in params else None

    return seen


@dataclasses.dataclass(frozen=True)
class Variant:
    """The family options of one model, the paper's model by default. Given to `VisionTransformer` as
    `variant=` (this record, its nested or flat dict, or a registered architecture name), each field also as a
    keyword of its own; kept as `model.variant`. `Variant.documentation()` lists the fields by part."""

    # embedding
    patch_bias: bool = _option(
        True, "embedding", "a bias in the patch embedding (CLIP has none).", "a patch embedding without bias"
    )
    patch_norm: bool = _option(
        False,
        "embedding",
        "a norm on the patch embeddings (AIMv2).",
        "a norm on the patch embeddings",
        True,
        seen=_present("embedding_norm/scale"),
    )
    convolutional_stem: Optional[Tuple[Tuple[int, int], ...]] = _option(
        None,
        "embedding",
        "((channels, kernel size = stride), ...) convolutions with BatchNorm and GELU before the patch embedding, "
        "which takes the rest of the patch (MobileCLIP's ViT-B: ((192, 4), (192, 2)) with 16-pixel patches); "
        "None.",
        "a convolutional stem",
        True,
    )
    stem_numerics: str = _option(
        "original",
        "embedding",
        'a hybrid\'s ResNet stem computed as the original code ("original") or timm ("timm": weight '
        "standardisation sqrt(var + 1e-8), GroupNorm epsilon 1e-5).",
        "timm's ResNet-stem numerics",
    )
    pre_norm: bool = _option(
        False,
        "embedding",
        "a LayerNorm on the embeddings before the first block (CLIP).",
        "a LayerNorm after the embeddings",
        seen=_present("pre_norm/scale"),
    )
    # tokens
    class_token: Optional[bool] = _option(
        None,
        "tokens",
        'a class token in a model that pools otherwise ("gap" / "map": EVA, some MAE models keep one that '
        "attends but is not read); None: as the classifier says.",
        "a class token the classifier does not read",
    )
    distillation_token: bool = _option(
        False,
        "tokens",
        "DeiT's second prefix token with its own head; the two heads' logits are averaged.",
        "a distillation token",
        seen=_present("dist"),
    )
    num_register_tokens: int = _option(
        0,
        "tokens",
        "learned tokens after the class token that take part in attention and are then dropped (DINOv2 with "
        "registers, Darcet et al. 2024).",
        "register tokens",
        seen=lambda params, block: int(params["reg"].shape[1]) if "reg" in params else None,
    )
    # position
    absolute_position_embedding: bool = _option(
        True,
        "position",
        "a learned position table added to the tokens (False: DINOv3 and RoPE-ViT rely on rotary embeddings alone).",
        "no learned position table",
        True,
    )
    prefix_position_embedding: bool = _option(
        True,
        "position",
        "whether the prefix tokens have position embeddings (the paper's, DeiT) or are prepended after them "
        "(DeiT-III, DINOv2; timm's no_embed_class).",
        "prefix tokens without position embeddings",
    )
    position_interpolation: str = _option(
        "linear",
        "position",
        'how position embeddings are resized to another grid, as the source\'s own code does: "linear" (the '
        "original code's) or \"bicubic\" (timm's, antialiased). Not a weight: any file loads.",
        "another position interpolation",
    )
    rotary_embedding: Optional[Rotary] = _option(
        None,
        "position",
        "rotary position embeddings on every block's queries and keys (EVA-02, DINOv3, PE, RoPE-ViT): a "
        "`keras_vit.nn.rotary.Rotary` or its dict; None.",
        "rotary position embeddings",
        True,
    )
    position_resampling: Optional[PositionResampling] = _option(
        None,
        "position",
        "the position table kept at the grid it was trained on and resampled to each input's grid, patches only "
        "(FlexiViT; SigLIP 2 NaFlex and RADIO, timm's naflexvit): a "
        "`keras_vit.nn.position_resampling.PositionResampling` or its dict; None.",
        "a position table resampled per input (NaFlex)",
    )
    # block
    layer_norm_epsilon: float = _option(
        LAYER_NORM_EPSILON, "block", "every norm's epsilon (1e-6; CLIP 1e-5).", "another LayerNorm epsilon"
    )
    rms_norm: bool = _option(False, "block", "every norm an RMSNorm instead of a LayerNorm (AIMv2).", "RMSNorm", True)
    layer_scale_init: Optional[float] = _option(
        None,
        "block",
        "LayerScale on both residual branches, initialised to this (DeiT-III, DINOv2); None.",
        "LayerScale",
    )
    attention_only_layer_scale: bool = _option(
        False, "block", "LayerScale on the attention branch only (Sapiens2).", "LayerScale on attention only", True
    )
    post_norm: bool = _option(
        False,
        "block",
        "each residual branch normalised after it, x + LN(f(x)) (timm's ResPostBlock, EVA-CLIP enormous).",
        "post-norm blocks",
        True,
    )
    parallel_layers: bool = _option(
        False,
        "block",
        "attention and MLP side by side on one norm, x + MSA(LN(x)) + MLP(LN(x)) (ViT-22B; timm's "
        "ParallelScalingBlock).",
        "parallel layers",
        True,
        seen=lambda params, block: (
            True if block + "LayerNorm_0/scale" in params and block + "LayerNorm_2/scale" not in params else None
        ),
    )
    parallel_branches: int = _option(
        1,
        "block",
        "attention and MLP branches per block, each with its own norm and LayerScale, their outputs "
        "summed: x + sum_j MSA_j(LN_j(x)), then x + sum_j MLP_j(LN_j(x)) (Touvron et al. 2022, Three things "
        "everyone should know about ViTs; timm's ParallelThingsBlock, its vit_*_18x2_* models); 1: the paper's "
        "block.",
        "parallel branches",
        True,
        seen=lambda params, block: (
            len({k.split("/")[2] for k in params if k.startswith("Transformer/encoderblock_0/branch_")}) or None
        ),
    )
    projection_bias: bool = _option(
        True,
        "block",
        "biases on the attention's output projection and the MLP's Dense layers (AIMv2 has none).",
        "projections without bias",
        True,
    )
    # attention
    qkv_bias: bool = _option(
        True, "attention", "biases on the query/key/value projections.", "query/key/value without biases"
    )
    key_bias: bool = _option(
        True,
        "attention",
        "with qkv_bias, whether the key projection has one too (False: EVA's query and value biases).",
        "no key bias",
        True,
    )
    qk_norm: bool = _option(
        False,
        "attention",
        "a norm on each head's queries and keys.",
        "qk-norm",
        seen=_present("/MultiHeadDotProductAttention_1/query_norm/scale"),
    )
    attention_norm: bool = _option(
        False,
        "attention",
        "a norm on the attention's output before its projection (EVA-CLIP).",
        "a norm on the attention's output",
        True,
        seen=_present("/MultiHeadDotProductAttention_1/norm/scale"),
    )
    key_value_heads: Optional[Tuple[int, ...]] = _option(
        None,
        "attention",
        "grouped-query attention's key/value heads: one count, or one per block (Sapiens2); "
        "None: as many as query heads.",
        "grouped-query attention",
        True,
    )
    differential_attention: bool = _option(
        False,
        "attention",
        "each head the difference of two softmax maps (the Differential Transformer, Ye et "
        "al. 2024; timm's DiffAttention).",
        "differential attention",
        seen=_present("/MultiHeadDotProductAttention_1/lambda_q1"),
    )
    # mlp
    activation: str = _option(
        "gelu_tanh",
        "mlp",
        'the MLP\'s activation: "gelu_tanh" (the paper\'s code), "gelu" (exact; timm, DeiT, DINOv2) or '
        '"quick_gelu" (OpenAI CLIP).',
        "the quick GELU",
    )
    swiglu: bool = _option(
        False,
        "mlp",
        "the SwiGLU MLP in place of the paper's (EVA-02, DINOv3 plus).",
        "a SwiGLU MLP",
        True,
        seen=_present("/MlpBlock_3/gate/kernel"),
    )
    mlp_norm: bool = _option(
        False,
        "mlp",
        "a norm on the MLP's hidden layer (EVA-02's sub-LN; BEiT-3).",
        "a norm inside the MLP",
        True,
        seen=_present("/MlpBlock_3/norm/scale"),
    )
    # head
    final_norm: bool = _option(
        True,
        "head",
        "whether there is a final norm at all (RADIO and InternViT backbones have none).",
        "no final LayerNorm",
    )
    fc_norm: bool = _option(
        False,
        "head",
        "the final norm after pooling instead of before it (MAE-style GAP models).",
        "a LayerNorm after pooling",
        seen=_present("fc_norm/scale"),
    )
    attention_pooling_heads: Optional[int] = _option(
        None,
        "head",
        "heads of the MAP head when they differ from the encoder's (PE: 8); None.",
        "a MAP head with its own head count",
        True,
    )
    pooling_includes_prefix: bool = _option(
        False,
        "head",
        "the pooling also reads the prefix tokens (timm's EVA MAP head attends to every token; "
        "timm's pool_include_prefix averages them in).",
        "pooling over the prefix tokens",
        True,
    )

    @classmethod
    def seen_in(cls, params: dict, block: str) -> dict:
        """{field: value} of the fields whose value the official-key `params` show (their `seen`)."""
        found = {}
        for f in dataclasses.fields(cls):
            value = f.metadata["seen"](params, block) if f.metadata["seen"] else None
            if value is not None:
                found[f.name] = value
        return found

    @classmethod
    def fields(cls, part: Optional[str] = None) -> tuple:
        """The option names (each also a `VisionTransformer` keyword), all or those of one part."""
        return tuple(f.name for f in dataclasses.fields(cls) if part is None or f.metadata["part"] == part)

    @classmethod
    def documentation(cls, indent: str = "      ") -> str:
        """The fields' documentation by part, as a docstring's Args lines (the model's and constructors' docs)."""
        lines = []
        for part, what in PARTS.items():
            lines.append(f"{indent}{part} ({what}):")
            for f in dataclasses.fields(cls):
                if f.metadata["part"] == part:
                    lines += textwrap.wrap(
                        f"{f.name}: {f.metadata['doc']}",
                        width=116,
                        initial_indent=indent + "  ",
                        subsequent_indent=indent + "    ",
                    )
        return "\n".join(lines)

    @classmethod
    def markdown(cls) -> str:
        """The fields as a Markdown table by part (docs/models.md's, written by tools/make_docs_tables.py)."""
        rows = ["| part | field and default | what it is |", "|---|---|---|"]
        for f in dataclasses.fields(cls):
            rows.append(f"| {f.metadata['part']} | `{f.name}={f.default!r}` | {f.metadata['doc']} |")
        return "\n".join(rows)

    @classmethod
    def flatten(cls, config) -> dict:
        """{field: value} of a nested or flat config (None: {}); unknown names refused with the closest one."""
        if config is None:
            return {}
        if isinstance(config, Variant):
            return config.flat_config()
        if not isinstance(config, dict):
            raise TypeError(f"variant must be a Variant, a dict or an architecture name, got {config!r}.")
        flat, fields = {}, cls.fields()
        for key, value in config.items():
            if key in PARTS:
                if not isinstance(value, dict):
                    raise TypeError(f"variant part {key!r} must be a dict of its fields, got {value!r}.")
                unknown = [k for k in value if k not in cls.fields(key)]
                if unknown:
                    raise ValueError(
                        f"variant part {key!r} has no field {unknown[0]!r}{validate.did_you_mean(unknown[0], cls.fields(key))}."
                    )
                flat.update(value)
            elif key in fields:
                flat[key] = value
            else:
                raise ValueError(
                    f"variant has no part or field {key!r}{validate.did_you_mean(key, (*PARTS, *fields))}."
                )
        return flat

    def flat_config(self) -> dict:
        """{field: JSON value}: the record flat (`describe()`, 0.3's config layout)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if hasattr(value, "to_config"):
                value = value.to_config()
            elif isinstance(value, tuple):
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            out[f.name] = value
        return out

    def to_config(self) -> dict:
        """{part: {field: JSON value}} of every field (`get_config`'s "variant"); `flatten` reads it back."""
        flat = self.flat_config()
        out = {}
        for f in dataclasses.fields(self):
            out.setdefault(f.metadata["part"], {})[f.name] = flat[f.name]
        return out

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
        options["parallel_branches"] = validate.integer(
            "parallel_branches", options.get("parallel_branches", 1), minimum=1
        )
        registers = validate.integer("num_register_tokens", options.get("num_register_tokens", 0), minimum=0)
        options["num_register_tokens"] = registers
        for field in (f.name for f in dataclasses.fields(cls) if f.type in ("bool", "Optional[bool]")):
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

    def has_class_token(self, classifier: str) -> bool:
        return classifier == "token" if self.class_token is None else self.class_token

    def num_prefix_tokens(self, classifier: str) -> int:
        """Tokens before the patches: the class token, the distillation token, the registers."""
        return int(self.has_class_token(classifier)) + int(self.distillation_token) + self.num_register_tokens

    def timm_writer_lacks(self) -> List[str]:
        """The parts timm builds from an architecture's name only (timm's `Eva` models: EVA-02, DINOv3, PE, RoPE-ViT; AIMv2, parallel
        layers, MobileCLIP's stem) this model has, as `field=value`: what timm builds from an architecture's name
        only, so timm's writers write the model as the registered architecture that has them
        (`keras_vit.weights.timm.model_args.registered_architecture`). The name is kept from when they were refused."""
        default = Variant()
        return [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in dataclasses.fields(self)
            if f.metadata["timm_by_name"] and getattr(self, f.name) != getattr(default, f.name)
        ]

    def non_official_parts(self, has_prefix_tokens: bool = True) -> List[str]:
        """What the official `.npz` layout has no place for (`save_npz` refuses these, naming them). The two GELUs
        are allowed (the file does not say which; timm-read models use the exact one)."""
        default = Variant(
            activation="gelu" if self.activation == "gelu" else "gelu_tanh",
            position_interpolation=self.position_interpolation,
            prefix_position_embedding=True if has_prefix_tokens else self.prefix_position_embedding,
        )
        return [
            f"{f.metadata['official']} ({f.name}={getattr(self, f.name)!r})"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        ]
