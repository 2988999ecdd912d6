"""`VisionTransformer`: the ViT (or R-hybrid) as a Keras model that describes itself.

This is the one module that knows the model's anatomy. The graph is built
functionally in `__init__` (as keras-hub's backbones are); the model keeps its
components (`stem`, `patch_embedding`, `class_token`, `position_embedding`,
`encoder`, `pre_logits`, `head`), its description (`vit_config`, `classifier`,
`grid_size`, ...) and the feature API (`keras_vit.vit.features`: `feature_model`,
`intermediates`, `logits_model`) that every consumer uses instead of looking layers up
by name. It does no file I/O: `weights=` goes to the loader `keras_vit.weights` registers.
"""

from __future__ import annotations

import inspect
import re
import warnings
from typing import Optional, Sequence, Tuple, Union

import keras
import numpy as np

from keras_vit.vit import table
from keras_vit.vit.all_or_nothing import all_or_nothing
from keras_vit.vit.arguments import (
    DEFAULT_CLASSES,
    check_arguments,
    model_inputs,
    position_grid_for,
    resolve_arguments,
)
from keras_vit.vit.features import POOLING_MODES, FeatureAPI
from keras_vit.vit.predict_function import PredictFunction
from keras_vit.vit.fit_memory import FitMemory
from keras_vit.nn.initializers import PACKAGE
from keras_vit.vit.components import make_components
from keras_vit.nn.token_pooling import TokenPooling
from keras_vit.vit.lora import LoRA
from keras_vit.vit.data_config import DataConfig
from keras_vit.vit.preprocessing import PreprocessingAPI
from keras_vit.vit.quantization import Quantization
from keras_vit.nn.specs import ArraySpecs
from keras_vit.vit.variant import Variant


def _layer_policy(dtype):
    """What every layer gets as `dtype`: a policy's name (a policy object defeats Keras' auto-config of
    argument-free layers), or a `keras.dtype_policies.DTypePolicyMap` itself, which each layer reads at its own
    path (per-layer and quantized policies, as Keras expresses them)."""
    policy = keras.dtype_policies.get(dtype) if dtype is not None else keras.mixed_precision.global_policy()
    return policy if isinstance(policy, keras.dtype_policies.DTypePolicyMap) else policy.name


def _default_name(vit_config) -> str:
    """The table name in a Keras-safe spelling ("ViT-B_16"), or "vision_transformer" for a custom size."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", vit_config.name) if vit_config.name in table.MODELS else "vision_transformer"


def rescale_pixels(x):
    """Float pixels in [0, 255] -> [-1, 1], the range the official checkpoints were trained on: the one
    input-range rule (arithmetic only, so numpy arrays, any backend's tensors and tf.data graphs take it)."""
    return (x - 127.5) / 127.5


def preprocess_input(x):
    """Maps pixels in [0, 255] (uint8 or float) to [-1, 1], the models' input range. A NumPy float array that
    already lies in [-1, 1] with negative values (preprocessed once) warns: a second pass squeezes it into
    [-1.008, -0.992]."""
    if isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, (list, tuple)):
        if (
            isinstance(x, np.ndarray)
            and x.dtype.kind == "f"
            and x.size
            and -1.0 <= float(x.min()) < 0.0
            and float(x.max()) <= 1.0
        ):
            warnings.warn(
                "preprocess_input takes pixels in [0, 255], but these values lie in [-1, 1] with negatives: "
                "they look preprocessed already.",
                stacklevel=2,
            )
        return rescale_pixels(np.asarray(x, dtype="float32"))
    return rescale_pixels(keras.ops.cast(x, "float32"))


@keras.saving.register_keras_serializable(package=PACKAGE)
class VisionTransformer(
    ArraySpecs, FitMemory, Quantization, LoRA, FeatureAPI, PreprocessingAPI, PredictFunction, keras.Model
):
    """A Vision Transformer (Dosovitskiy et al., 2021), or an R-hybrid when `resnet_layers` is given.

        The model is its sizes, its family options (one `keras_vit.vit.variant.Variant` record, the paper's model by
        default) and how it is used (head, input, dropout, preprocessing, dtype). Weights are not this class's business:
        `keras_vit.create_model(name, weights=...)` and `keras_vit.load_model(source)` build and load.

        Args:
          patch_size: patch side in pixels (on the ResNet feature map for hybrids).
          hidden_size, mlp_dim, num_heads, num_layers: Transformer sizes (paper Table 1). Taken from `variant` when
            it names a registered architecture and they are not given.
          resnet_layers: units per BiT-ResNet stage, e.g. (3, 4, 9); None for a plain ViT.
          resnet_width: ResNet width factor (root width 64 * factor).
          include_top: whether to end with the classification head.
          variant: the family options: a `Variant`, its dict (nested by part, `{"attention": {"qk_norm": True}}`, or
            flat, `{"qk_norm": True}`), or a registered architecture name (`keras_vit.list_models("timm")`), which
            also supplies the sizes, classifier, input size, head and data config, each overridable. Each field of
            the record may also be given as a keyword of its own (`qk_norm=True`), overriding `variant`'s.
          input_shape: (height, width, channels); default (224, 224, 3); multiples of the effective patch. None
            height/width: any size at call time, position embeddings resized to each input's grid. Any channel
            count; RGB weights loaded into a C-channel model adapt the first kernel (timm's `in_chans` rule).
          input_tensor: optional Keras tensor to use as the model's input.
          pooling: with `include_top=False`: None -> the pre-logits vector (pooled per `classifier`,
            then the representation layer if any); "token" -> the class token; "avg" / "max" over
            the patch tokens; "sequence" -> all tokens after the final LayerNorm, (batch, tokens, D).
          classes: head size (default 1000).
          classifier_activation: activation of the head ("softmax", None for logits, ...).
          classifier: "token" (class token; the default), "gap" (global average pooling, no class token) or "map"
            (multihead attention pooling, SigLIP's head; no class token).
          representation_size: width of the Dense+tanh pre-logits layer; None for none.
          dropout_rate, attention_dropout_rate: dropout after dense layers / on attention weights.
          drop_path_rate: stochastic depth of the last block (linear from 0).
          include_preprocessing: if True, inputs are pixels in [0, 255], normalised inside per `data_config`.
          position_grid: (rows, cols) of the stored position embeddings of a model with None height/width
            (default: a 224-pixel side's grid).
          data_config: how the checkpoint's images were prepared (a `keras_vit.DataConfig` or its dict: mean, std,
            crop_pct, crop_mode, interpolation, antialias, labels). Default: the original code's evaluation (square
            resize, [-1, 1]); the loaders pass their source's own.
          remat: True recomputes each encoder block's activations in the backward pass instead of keeping
            them (`keras.remat`, one block at a time): less training memory for more compute. "attention"
            recomputes only the attention probabilities, which training on TensorFlow and JAX does anyway; it is
            kept as a name for that. Outputs and gradients are unchanged.
          name: model name (default: the table name, e.g. "ViT-B_16").
          dtype: dtype policy of every layer (default: the global policy when built).
          trainable: False freezes every weight (a frozen backbone reloads frozen).
          gelu_approximate: deprecated (0.2): `activation="gelu_tanh"` (True) or `"gelu"` (False).

        The record's fields, by part (`variant=` or keywords):
    {variant_fields}
    """

    def __init__(
        self,
        patch_size: Optional[int] = None,
        hidden_size: Optional[int] = None,
        mlp_dim: Optional[int] = None,
        num_heads: Optional[int] = None,
        num_layers: Optional[int] = None,
        resnet_layers: Optional[Sequence[int]] = None,
        resnet_width: float = 1,
        include_top: bool = True,
        *,
        variant: Union[None, str, dict, Variant] = None,
        input_shape: Optional[Tuple[Optional[int], Optional[int], int]] = None,
        input_tensor=None,
        pooling: Optional[str] = None,
        classes: Optional[int] = None,
        classifier_activation: Union[str, None] = "softmax",
        classifier: Optional[str] = None,
        representation_size: Optional[int] = None,
        dropout_rate: float = 0.0,
        attention_dropout_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        include_preprocessing: bool = False,
        position_grid: Optional[Tuple[int, int]] = None,
        data_config: Union[None, dict, DataConfig] = None,
        remat: Union[bool, str] = False,
        name: Optional[str] = None,
        dtype=None,
        trainable: bool = True,
        **options,
    ):
        given = resolve_arguments(
            dict(
                patch_size=patch_size,
                hidden_size=hidden_size,
                mlp_dim=mlp_dim,
                num_heads=num_heads,
                num_layers=num_layers,
                resnet_layers=resnet_layers,
                resnet_width=resnet_width,
            ),
            variant,
            options,
            dict(
                classifier=classifier,
                input_shape=input_shape,
                classes=classes,
                include_top=include_top,
                data_config=data_config,
                representation_size=representation_size,
            ),
            _KEYWORDS,
        )
        classifier, input_shape, classes, include_top = (
            given[k] for k in ("classifier", "input_shape", "classes", "include_top")
        )
        sizes, resnet_layers, resnet_width, representation_size, classes, rates = check_arguments(
            given["sizes"],
            given["resnet_layers"],
            given["resnet_width"],
            dict(
                include_top=include_top, include_preprocessing=include_preprocessing, trainable=trainable, remat=remat
            ),
            classifier,
            pooling,
            given["representation_size"],
            classes,
            dict(
                dropout_rate=dropout_rate, attention_dropout_rate=attention_dropout_rate, drop_path_rate=drop_path_rate
            ),
        )
        variant = Variant.for_model(classifier, representation_size, **given["variant"])
        vit_config = table.custom_config(**sizes, resnet_layers=resnet_layers, resnet_width=resnet_width)
        data_config = DataConfig.from_dict(given["data_config"])
        classes, policy = DEFAULT_CLASSES if classes is None else classes, _layer_policy(dtype)
        data_config = data_config.for_head(classes) if include_top else data_config

        inputs, (h, w, channels) = model_inputs(input_shape, input_tensor, vit_config.effective_patch_size)
        data_config.for_channels(channels)  # mean/std that cannot spread over the channels are refused here
        prefix = variant.num_prefix_tokens(classifier)
        grid = position_grid_for(h, w, vit_config.effective_patch_size, position_grid)
        parts = make_components(
            vit_config,
            resnet_width,
            data_config if include_preprocessing else None,
            classifier,
            grid,
            dict(rates, dynamic=h is None or w is None, remat=remat),
            variant,
            representation_size if include_top or pooling is None else None,
            classes if include_top else None,
            classifier_activation,
            policy,
        )
        outputs, taps = self._make_graph(inputs, include_top, pooling, prefix, policy, parts)
        super().__init__(inputs, outputs, name=name or _default_name(vit_config), trainable=trainable)
        self._dtype_policy = keras.dtype_policies.get(dtype) if dtype is not None else self._dtype_policy  # own too
        for component, layer in vars(parts).items():  # only now: torch Modules take attributes after __init__
            setattr(self, component, layer)
        self.vit_config = vit_config  # the description
        self.include_top, self.pooling, self.classes = bool(include_top), pooling, int(classes)
        self.classifier_activation, self.classifier, self.representation_size = (
            classifier_activation,
            classifier,
            representation_size,
        )
        self.dropout_rate, self.attention_dropout_rate, self.drop_path_rate = (
            float(dropout_rate),
            float(attention_dropout_rate),
            float(drop_path_rate),
        )
        self.include_preprocessing, self.data_config, self.variant = bool(include_preprocessing), data_config, variant
        self.image_size, self.grid_size, self.num_prefix_tokens, self.channels = (h, w), grid, prefix, int(channels)
        self._taps, self._layer_policy = taps, policy

    def _make_graph(self, inputs, include_top, pooling, prefix, policy, parts) -> tuple:
        """(outputs, taps): the functional graph on the components `parts`, and its named feature taps."""
        tokens = parts.encoder(self._embed(inputs, parts=parts), rotary=self._rotary(inputs, parts))
        taps = {"sequence": tokens}
        if include_top or pooling is None:
            taps["pre_logits"] = self._pool(tokens, parts)
        if include_top:
            taps["logits"] = self._logits(tokens, taps["pre_logits"], parts)
            return (parts.predictions(taps["logits"]) if parts.predictions is not None else taps["logits"]), taps
        if pooling == "sequence":
            return tokens, taps
        if pooling is not None:
            return TokenPooling(POOLING_MODES[pooling], prefix, dtype=policy, name="feature_pooling")(tokens), taps
        return taps["pre_logits"], taps

    # ------------------------------------------------------------------ description

    @property
    def effective_patch_size(self) -> int:
        """Pixels per token side (patch size times the ResNet stem's stride)."""
        return self.vit_config.effective_patch_size

    @property
    def gelu_approximate(self) -> bool:
        """True when the MLP uses the tanh GELU (`activation == "gelu_tanh"`; the older spelling)."""
        return self.variant.activation == "gelu_tanh"

    @property
    def prefix_position_embedding(self) -> bool:
        return self.variant.prefix_position_embedding

    @property
    def token_layout(self) -> dict:
        """{part: (start, stop)} rows of the token sequence: "class", "distillation", "registers" (those the
        model has) and "patches" (stop None: any-size models have as many as the input gives)."""
        layout, start = {}, 0
        for part, count in (
            ("class", self.class_token is not None),
            ("distillation", self.variant.distillation_token),
            ("registers", self.variant.num_register_tokens),
        ):
            if count:
                layout[part], start = (start, start + int(count)), start + int(count)
        layout["patches"] = (start, None if self.dynamic_size else start + self.grid_size[0] * self.grid_size[1])
        return layout

    @property
    def remat(self) -> Union[bool, str]:
        """What the backward pass recomputes (the constructor's `remat`): False, True or "attention"."""
        return self.encoder.remat

    @property
    def num_tokens(self) -> int:
        return self.grid_size[0] * self.grid_size[1] + self.num_prefix_tokens

    @property
    def dynamic_size(self) -> bool:
        """True for a model built with a None height or width (any input size at call time)."""
        return None in self.image_size

    @property
    def base_image_size(self) -> Tuple[int, int]:
        """(H, W) the model runs at by default: its input size, or for an any-size model the size of its
        stored position grid (what the CLIs resize images to when not told otherwise)."""
        p = self.effective_patch_size
        return tuple(s if s is not None else g * p for s, g in zip(self.image_size, self.grid_size))

    def _sizes(self) -> dict:
        """The Transformer's sizes and a hybrid's ResNet, as constructor keywords."""
        c = self.vit_config
        return dict(
            patch_size=c.patch_size,
            hidden_size=c.hidden_size,
            mlp_dim=c.mlp_dim,
            num_heads=c.num_heads,
            num_layers=c.num_layers,
            resnet_layers=list(c.resnet_layers) if c.is_hybrid else None,
            resnet_width=c.resnet_width,
        )

    def describe(self) -> dict:
        """The sizes and choices that define this model, JSON-serialisable (model cards, reports)."""
        return dict(
            name=self.vit_config.name,
            **self._sizes(),
            classifier=self.classifier,
            representation_size=self.representation_size,
            classes=self.classes if self.include_top else None,
            image_size=list(self.image_size),
            grid_size=list(self.grid_size),
            num_prefix_tokens=self.num_prefix_tokens,
            include_preprocessing=self.include_preprocessing,
            channels=self.channels,
            any_input_size=self.dynamic_size,
            data_config=self.data_config.to_dict(),
            **self.variant.flat_config(),
        )

    def get_config(self) -> dict:
        """The constructor's keywords, the record nested by part under "variant" (weights live in the saved file,
        not the config), plus `quantized_layers` {layer path: mode} once `quantize` has run, so a saved int8 model
        reloads as one. `from_config` also reads 0.3's flat layout (each field a key of its own)."""
        quantized = self.quantized_layers()
        extra = {"quantized_layers": quantized} if quantized else {}
        return dict(
            **extra,
            **self._sizes(),
            include_top=self.include_top,
            variant=self.variant.to_config(),
            input_shape=[*self.image_size, self.channels],
            input_tensor=None,
            pooling=self.pooling,
            classes=self.classes,
            classifier_activation=self.classifier_activation,
            classifier=self.classifier,
            representation_size=self.representation_size,
            dropout_rate=self.dropout_rate,
            attention_dropout_rate=self.attention_dropout_rate,
            drop_path_rate=self.drop_path_rate,
            include_preprocessing=self.include_preprocessing,
            position_grid=list(self.grid_size) if self.dynamic_size else None,
            name=self.name,
            dtype=(
                self._layer_policy
                if isinstance(self._layer_policy, str)
                else keras.saving.serialize_keras_object(self._layer_policy)
            ),
            trainable=self.trainable,
            remat=self.remat,
            data_config=self.data_config.to_dict(),
        )

    @classmethod
    def from_config(cls, config: dict) -> "VisionTransformer":
        config = dict(config)
        quantized = config.pop("quantized_layers", None)
        model = cls(**config)
        for mode in sorted(set((quantized or {}).values())):  # before Keras loads the saved int8 weights
            model.quantize(
                mode,
                filters=lambda layer, m=mode: (
                    quantized.get(layer.path) == m and not getattr(layer, "quantization_mode", None)
                ),
            )  # a policy map quantized it already
        return model

    # ------------------------------------------------------------------ Keras' own entry points

    def load_weights(self, filepath, skip_mismatch: bool = False, **kwargs) -> None:
        """`keras.Model.load_weights`, all-or-nothing (`all_or_nothing`): a file that fails to load (another
        architecture, a truncated file) or holds NaN/Inf leaves every weight as it was, as
        `keras_vit.load_weights` does, instead of failing after Keras has assigned part of it."""
        all_or_nothing(
            self, lambda: keras.Model.load_weights(self, filepath, skip_mismatch=skip_mismatch, **kwargs), filepath
        )

    # ------------------------------------------------------------------ forward pieces (shared)

    def _embed(self, images, training=None, patch_transform=None, parts=None):
        """Images -> tokens entering the encoder; `patch_transform` may rewrite the patch embeddings. `parts`: the
        components (default: this model's own). Token order: class, distillation, registers, patches (timm's)."""
        p = self if parts is None else parts
        x = images
        if p.preprocessing is not None:
            x = p.preprocessing(x)
        if p.stem is not None:
            x = p.stem(x, training=training)
        x = p.patch_embedding(x)
        x = p.patch_norm(x) if p.patch_norm is not None else x  # AIMv2
        extras = ()
        if patch_transform is not None:
            x = patch_transform(x)
            if isinstance(x, (tuple, list)):
                x, extras = x[0], tuple(x[1:])
        prefix = [t for t in (p.register_tokens, p.distillation_token, p.class_token) if t is not None]
        late = p.position_embedding is not None and p.position_embedding.num_prefix_tokens == 0  # DeiT-III, DINOv2
        for token in [] if late else prefix:
            x = token(x)
        if p.position_embedding is not None:  # None: rotary embeddings alone (DINOv3, RoPE-ViT)
            x = p.position_embedding(x, images) if p.position_embedding.stride is not None else p.position_embedding(x)
        for token in prefix if late else []:
            x = token(x)
        x = p.embedding_dropout(x, training=training)
        if p.pre_norm is not None:
            x = p.pre_norm(x)
        return (x, extras) if patch_transform is not None else x

    def _rotary(self, images, parts=None):
        """The rotary embeddings' (tokens, 2 * head_dim) table for `images`' grid, or None (no rotary)."""
        p = self if parts is None else parts
        return p.rotary_embedding(images) if p.rotary_embedding is not None else None

    def _pool(self, tokens, parts=None):
        """Encoded tokens -> the pre-logits vector: pooled per `classifier` (DeiT: the mean of the class and
        distillation tokens, timm's pre-logits), then fc_norm and the representation layer where present."""
        p = self if parts is None else parts
        x = p.token_pooling(tokens)
        if p.distillation_pooling is not None:
            x = (x + p.distillation_pooling(tokens)) / 2
        if p.fc_norm is not None:
            x = p.fc_norm(x)
        return p.pre_logits(x) if p.pre_logits is not None else x

    def _logits(self, tokens, pre_logits, parts=None):
        """The head on the pre-logits; DeiT's: the mean of the class token's and the distillation token's heads."""
        p = self if parts is None else parts
        if p.head_distillation is None:
            return p.head(pre_logits)
        return (p.head(p.token_pooling(tokens)) + p.head_distillation(p.distillation_pooling(tokens))) / 2


def ensure_vit(model, hint: str = "load it with keras_vit.load_model") -> VisionTransformer:
    """`model` itself when it is a `VisionTransformer`, else a ValueError naming it (and `hint`)."""
    if not isinstance(model, VisionTransformer):
        raise ValueError(f"Model {getattr(model, 'name', model)!r} is not a keras_vit.VisionTransformer ({hint}).")
    return model


VisionTransformer.__doc__ = VisionTransformer.__doc__.replace("{variant_fields}", Variant.documentation())
# the constructor's own keywords (the record's fields are valid keywords too)
_KEYWORDS = tuple(p for p in inspect.signature(VisionTransformer.__init__).parameters if p not in ("self", "options"))


def keywords() -> frozenset:
    """Every keyword `VisionTransformer` takes: its own, the record's fields and the deprecated
    `gelu_approximate` (what `create_model`, the constructors and `load_model` check callers' keywords against)."""
    return frozenset((*_KEYWORDS, *Variant.fields(), "gelu_approximate"))
