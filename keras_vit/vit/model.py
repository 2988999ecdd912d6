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

import re
import types
from typing import Callable, Optional, Sequence, Tuple, Union

import keras
import numpy as np

from keras_vit.utils import validate
from keras_vit.vit import table
from keras_vit.vit.arguments import DEFAULT_CLASSES, check_arguments, model_inputs, position_grid_for
from keras_vit.vit.features import POOLING_MODES, FeatureAPI
from keras_vit.vit.initializers import PACKAGE
from keras_vit.vit.layers import ClassToken, Encoder, PatchEmbedding, TokenPooling
from keras_vit.vit.lora import LoRA
from keras_vit.vit.position_embedding import AddPositionEmbedding
from keras_vit.vit.data_config import DataConfig
from keras_vit.vit.preprocessing import ImagePreprocessing, PreprocessingAPI
from keras_vit.vit.quantization import Quantization
from keras_vit.vit.resnet import ResNetStem
from keras_vit.vit.specs import ArraySpecs


# The loader behind `VisionTransformer(weights=...)`, registered by `keras_vit.weights` when it is imported:
# this module does no file I/O and imports nothing of the weights room.
_weights_loader = None


def register_weights_loader(loader) -> None:
    """Installs `loader` (an object with `head_size(weights, model_name, classes, representation_size)` and
    `load_weights(model, weights)`) for the `weights=` keyword of `VisionTransformer`."""
    global _weights_loader
    _weights_loader = loader


def _weights_room(weights, vit_config, classes, representation_size, data_config) -> tuple:
    """(loader, classes, representation_size, data_config) for `VisionTransformer(weights=...)`: the release's
    own head and the source's data config (unless given) are resolved before the model is built. Without
    weights: (None, ...) with the data config given, or the original code's."""
    if weights is None:
        return None, classes, representation_size, DataConfig.from_dict(data_config)
    if _weights_loader is None:
        raise ValueError("VisionTransformer(weights=...) needs keras_vit.weights imported (import keras_vit).")
    classes, representation_size = _weights_loader.head_size(weights, vit_config.name, classes, representation_size)
    if data_config is None:
        data_config = _weights_loader.data_config(weights, vit_config.name)
    return _weights_loader, classes, representation_size, DataConfig.from_dict(data_config)


def _layer_policy(dtype):
    """What every layer gets as `dtype`: a policy's name (a policy object defeats Keras' auto-config of
    argument-free layers), or a `keras.dtype_policies.DTypePolicyMap` itself, which each layer reads at its own
    path (per-layer and quantized policies, as Keras expresses them)."""
    policy = keras.dtype_policies.get(dtype) if dtype is not None else keras.mixed_precision.global_policy()
    return policy if isinstance(policy, keras.dtype_policies.DTypePolicyMap) else policy.name


def _default_name(vit_config) -> str:
    """The table name in a Keras-safe spelling ("ViT-B_16"), or "vision_transformer" for a custom size."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", vit_config.name) if vit_config.name in table.MODELS else "vision_transformer"


def _layer_scale(value) -> Optional[float]:
    """`layer_scale_init` checked: None, or a number > 0."""
    return None if value is None else validate.number("layer_scale_init", value, positive=True)


def rescale_pixels(x):
    """Float pixels in [0, 255] -> [-1, 1], the range the official checkpoints were trained on: the one
    input-range rule (arithmetic only, so numpy arrays, any backend's tensors and tf.data graphs take it)."""
    return (x - 127.5) / 127.5


def preprocess_input(x):
    """Maps pixels in [0, 255] (uint8 or float) to [-1, 1], the models' input range."""
    if isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, (list, tuple)):
        return rescale_pixels(np.asarray(x, dtype="float32"))
    return rescale_pixels(keras.ops.cast(x, "float32"))


@keras.saving.register_keras_serializable(package=PACKAGE)
class VisionTransformer(ArraySpecs, Quantization, LoRA, FeatureAPI, PreprocessingAPI, keras.Model):
    """A Vision Transformer (Dosovitskiy et al., 2021), or an R-hybrid when `resnet_layers` is given.

    Args:
      patch_size: patch side in pixels (on the ResNet feature map for hybrids).
      hidden_size, mlp_dim, num_heads, num_layers: Transformer sizes (paper Table 1).
      resnet_layers: units per BiT-ResNet stage, e.g. (3, 4, 9); None for a plain ViT.
      resnet_width: ResNet width factor (root width 64 * factor).
      include_top: whether to end with the classification head.
      weights: None (random init) or any weight source of `keras_vit.load_weights` (a release name, `.npz`,
        `.keras`, `.weights.h5`, timm `.safetensors`, a transformers directory), applied after building by
        the loader `keras_vit.weights` registers here (this class does no file I/O itself).
      input_shape: (height, width, channels); default (224, 224, 3); multiples of the effective patch. None
        height/width: any size at call time, position embeddings resized to each input's grid. Any channel
        count; RGB weights loaded into a C-channel model adapt the first kernel (timm's `in_chans` rule).
      input_tensor: optional Keras tensor to use as the model's input.
      pooling: with `include_top=False`: None -> the pre-logits vector (pooled per `classifier`,
        then the representation layer if any); "token" -> the class token; "avg" / "max" over
        the patch tokens; "sequence" -> all tokens after the final LayerNorm, (batch, tokens, D).
      classes: head size. Unset (None): 1000, or with a released checkpoint its own head (and
        pre-logits); a different number zero-initialises the head, with a warning.
      classifier_activation: activation of the head ("softmax", None for logits, ...).
      classifier: "token" (class token) or "gap" (global average pooling, no class token).
      representation_size: width of the Dense+tanh pre-logits layer; None for none.
      dropout_rate, attention_dropout_rate: dropout after dense layers / on attention weights.
      drop_path_rate: stochastic depth of the last block (linear from 0).
      include_preprocessing: if True, inputs are pixels in [0, 255], normalised inside per `data_config`.
      position_grid: (rows, cols) of the stored position embeddings of a model with None height/width
        (default: a 224-pixel side's grid).
      gelu_approximate: the MLP's GELU in the tanh form (True: the original JAX code and its checkpoints)
        or the exact erf form (False: timm and `transformers`; their loaders set it).
      name: model name (default: the table name, e.g. "ViT-B_16").
      dtype: dtype policy of every layer (default: the global policy when built).
      trainable: False freezes every weight (a frozen backbone reloads frozen).
      remat: True recomputes each encoder block's activations in the backward pass instead of keeping
        them (`keras.remat`, one block at a time): less training memory for more compute. Outputs and
        gradients are unchanged.
      layer_scale_init: LayerScale (DeiT-III, DINOv2): a learned per-channel scale on each residual branch,
        initialised to this value; None (the original ViT) for none.
      prefix_position_embedding: whether the class token gets a position embedding (True: the original ViT,
        whose table has a class-token row) or is prepended after them (False: DeiT-III, DINOv2; timm's
        `no_embed_class`).
      data_config: how the checkpoint's images were prepared (a `keras_vit.DataConfig` or its dict: mean, std,
        crop_pct, crop_mode, interpolation, antialias, labels). Default: the one `weights` implies (timm and
        `transformers` files their own), else the original code's evaluation (square resize, [-1, 1]).
    """

    def __init__(self, patch_size: int, hidden_size: int, mlp_dim: int, num_heads: int, num_layers: int,
                 resnet_layers: Optional[Sequence[int]] = None, resnet_width: float = 1,
                 include_top: bool = True, weights: Optional[str] = None,
                 input_shape: Optional[Tuple[int, int, int]] = None, input_tensor=None,
                 pooling: Optional[str] = None, classes: Optional[int] = None,
                 classifier_activation: Union[str, None] = "softmax", classifier: str = "token",
                 representation_size: Optional[int] = None, dropout_rate: float = 0.0,
                 attention_dropout_rate: float = 0.0, drop_path_rate: float = 0.0,
                 include_preprocessing: bool = False, gelu_approximate: bool = True,
                 position_grid: Optional[Tuple[int, int]] = None, name: Optional[str] = None,
                 dtype=None, trainable: bool = True, remat: bool = False,
                 data_config: Union[None, dict, DataConfig] = None, layer_scale_init: Optional[float] = None,
                 prefix_position_embedding: bool = True, **kwargs):
        rates = dict(dropout_rate=dropout_rate, attention_dropout_rate=attention_dropout_rate,
                     drop_path_rate=drop_path_rate)
        sizes, resnet_layers, resnet_width, representation_size, classes, rates = check_arguments(
            dict(patch_size=patch_size, hidden_size=hidden_size, mlp_dim=mlp_dim, num_heads=num_heads,
                 num_layers=num_layers), resnet_layers, resnet_width,
            dict(include_top=include_top, include_preprocessing=include_preprocessing, trainable=trainable,
                 gelu_approximate=gelu_approximate, remat=remat, prefix_position_embedding=prefix_position_embedding),
            classifier, pooling, representation_size, classes, rates)
        vit_config = table.custom_config(**sizes, resnet_layers=resnet_layers, resnet_width=resnet_width)
        loader, classes, representation_size, data_config = _weights_room(weights, vit_config, classes,
                                                                           representation_size, data_config)
        classes = DEFAULT_CLASSES if classes is None else classes
        policy = _layer_policy(dtype)

        inputs, (h, w, channels) = model_inputs(input_shape, input_tensor, vit_config.effective_patch_size)
        data_config.for_channels(channels)  # mean/std that cannot spread over the channels are refused here
        prefix = 1 if classifier == "token" else 0
        grid = position_grid_for(h, w, vit_config.effective_patch_size, position_grid)
        dynamic = h is None or w is None
        has_pre_logits = include_top or pooling is None
        parts = self._make_components(vit_config, resnet_width, data_config if include_preprocessing else None,
                                      prefix, grid, dict(rates, gelu_approximate=bool(gelu_approximate),
                                                         dynamic=dynamic, remat=bool(remat),
                                                         layer_scale_init=_layer_scale(layer_scale_init),
                                                         prefix_rows=prefix if prefix_position_embedding else 0),
                                      representation_size if has_pre_logits else None,
                                      classes if include_top else None, classifier_activation, policy)
        outputs, taps = self._make_graph(inputs, include_top, pooling, prefix, policy, parts)
        super().__init__(inputs, outputs, name=name or _default_name(vit_config), trainable=trainable, **kwargs)
        for component, layer in vars(parts).items():  # only now: torch Modules take attributes after __init__
            setattr(self, component, layer)

        # === the description ===
        self.vit_config = vit_config
        self.include_top, self.pooling, self.classes = bool(include_top), pooling, int(classes)
        self.classifier_activation = classifier_activation
        self.classifier, self.representation_size = classifier, representation_size
        self.dropout_rate, self.attention_dropout_rate, self.drop_path_rate = (
            float(dropout_rate), float(attention_dropout_rate), float(drop_path_rate))
        self.include_preprocessing, self.data_config = bool(include_preprocessing), data_config
        self.prefix_position_embedding, self.gelu_approximate = bool(prefix_position_embedding), bool(gelu_approximate)
        self.image_size, self.grid_size, self.num_prefix_tokens, self.channels = (h, w), grid, prefix, int(channels)
        self._taps = taps
        self._layer_policy = policy
        if loader is not None:
            loader.load_weights(self, weights)

    def _make_components(self, c, resnet_width, preprocessing, prefix, grid, options, representation_size,
                         classes, classifier_activation, policy) -> types.SimpleNamespace:
        """The layers, named after the official checkpoint tree; None where the model has no such part. Returned
        as a namespace (they become attributes after `keras.Model.__init__`)."""
        p = types.SimpleNamespace()
        p.preprocessing = ImagePreprocessing(None, preprocessing,
                                             name="preprocessing") if preprocessing is not None else None
        p.stem = ResNetStem(c.resnet_layers, resnet_width, dtype=policy, name="resnet") if c.is_hybrid else None
        p.patch_embedding = PatchEmbedding(c.patch_size, c.hidden_size, dtype=policy, name="embedding")
        p.class_token = ClassToken(dtype=policy, name="cls") if prefix else None
        p.position_embedding = AddPositionEmbedding(
            grid, options["prefix_rows"], stride=c.effective_patch_size if options["dynamic"] else None, dtype=policy,
            name="posembed_input")
        p.embedding_dropout = keras.layers.Dropout(options["dropout_rate"], dtype=policy, name="dropout")
        p.encoder = Encoder(c.num_layers, c.num_heads, c.mlp_dim, options["dropout_rate"],
                            options["attention_dropout_rate"], options["drop_path_rate"],
                            options["gelu_approximate"], options["remat"], options["layer_scale_init"], dtype=policy,
                            name="Transformer")
        p.token_pooling = TokenPooling("token" if prefix else "gap", prefix, dtype=policy, name="pooling")
        p.pre_logits = keras.layers.Dense(
            int(representation_size), activation="tanh", kernel_initializer=keras.initializers.LecunNormal(),
            dtype=policy, name="pre_logits") if representation_size is not None else None
        p.head = keras.layers.Dense(int(classes), kernel_initializer="zeros", dtype=policy,
                                    name="head") if classes is not None else None
        p.predictions = keras.layers.Activation(
            classifier_activation, dtype="float32",
            name="predictions") if classes is not None and classifier_activation is not None else None
        return p

    def _make_graph(self, inputs, include_top, pooling, prefix, policy, parts) -> tuple:
        """(outputs, taps): the functional graph on the components `parts`, and its named feature taps."""
        tokens = parts.encoder(self._embed(inputs, parts=parts))
        taps = {"sequence": tokens}
        if include_top or pooling is None:
            taps["pre_logits"] = self._pool(tokens, parts)
        if include_top:
            taps["logits"] = parts.head(taps["pre_logits"])
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
    def remat(self) -> bool:
        """Whether the encoder blocks are recomputed in the backward pass (the constructor's `remat`)."""
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

    def describe(self) -> dict:
        """The sizes and choices that define this model, JSON-serialisable (model cards, reports)."""
        c = self.vit_config
        return dict(name=c.name, patch_size=c.patch_size, hidden_size=c.hidden_size, mlp_dim=c.mlp_dim,
                    num_heads=c.num_heads, num_layers=c.num_layers,
                    resnet_layers=list(c.resnet_layers) if c.is_hybrid else None,
                    resnet_width=c.resnet_width, classifier=self.classifier,
                    representation_size=self.representation_size, classes=self.classes if self.include_top else None,
                    image_size=list(self.image_size), grid_size=list(self.grid_size),
                    num_prefix_tokens=self.num_prefix_tokens, include_preprocessing=self.include_preprocessing,
                    channels=self.channels, any_input_size=self.dynamic_size,
                    data_config=self.data_config.to_dict(), layer_scale_init=self.encoder.layer_scale_init,
                    prefix_position_embedding=self.prefix_position_embedding)

    def get_config(self) -> dict:
        """The constructor's keywords (weights live in the saved file, not the config), plus
        `quantized_layers` {layer path: mode} once `quantize` has run, so a saved int8 model reloads as one."""
        c = self.vit_config
        quantized = self.quantized_layers()
        extra = {"quantized_layers": quantized} if quantized else {}
        return dict(**extra,
            patch_size=c.patch_size, hidden_size=c.hidden_size, mlp_dim=c.mlp_dim, num_heads=c.num_heads,
            num_layers=c.num_layers, resnet_layers=list(c.resnet_layers) if c.is_hybrid else None,
            resnet_width=c.resnet_width, include_top=self.include_top, weights=None,
            input_shape=[*self.image_size, self.channels], input_tensor=None, pooling=self.pooling, classes=self.classes,
            classifier_activation=self.classifier_activation, classifier=self.classifier,
            representation_size=self.representation_size, dropout_rate=self.dropout_rate,
            attention_dropout_rate=self.attention_dropout_rate, drop_path_rate=self.drop_path_rate,
            include_preprocessing=self.include_preprocessing, gelu_approximate=self.gelu_approximate,
            position_grid=list(self.grid_size) if self.dynamic_size else None, name=self.name,
            dtype=(self._layer_policy if isinstance(self._layer_policy, str)
                   else keras.saving.serialize_keras_object(self._layer_policy)),
            trainable=self.trainable, remat=self.remat, layer_scale_init=self.encoder.layer_scale_init,
            prefix_position_embedding=self.prefix_position_embedding,
            data_config=self.data_config.to_dict())

    @classmethod
    def from_config(cls, config: dict) -> "VisionTransformer":
        config = dict(config)
        quantized = config.pop("quantized_layers", None)
        model = cls(**config)
        for mode in sorted(set((quantized or {}).values())):  # before Keras loads the saved int8 weights
            model.quantize(mode, filters=lambda layer, m=mode: quantized.get(layer.path) == m)
        return model

    # ------------------------------------------------------------------ Keras' own entry points

    def load_weights(self, filepath, skip_mismatch: bool = False, **kwargs) -> None:
        """`keras.Model.load_weights`, all-or-nothing (`all_or_nothing`): a file that fails to load (another
        architecture, a truncated file) or holds NaN/Inf leaves every weight as it was, as
        `keras_vit.load_weights` does, instead of failing after Keras has assigned part of it."""
        all_or_nothing(self, lambda: keras.Model.load_weights(self, filepath, skip_mismatch=skip_mismatch, **kwargs),
                       filepath)

    # ------------------------------------------------------------------ forward pieces (shared)

    def _embed(self, images, training=None, patch_transform=None, parts=None):
        """Images -> tokens entering the encoder; `patch_transform` may rewrite the patch embeddings. `parts`: the
        components (default: this model's own)."""
        p = self if parts is None else parts
        x = images
        if p.preprocessing is not None:
            x = p.preprocessing(x)
        if p.stem is not None:
            x = p.stem(x, training=training)
        x = p.patch_embedding(x)
        extras = ()
        if patch_transform is not None:
            x = patch_transform(x)
            if isinstance(x, (tuple, list)):
                x, extras = x[0], tuple(x[1:])
        late = p.class_token is not None and p.position_embedding.num_prefix_tokens == 0  # DeiT-III, DINOv2
        if p.class_token is not None and not late:
            x = p.class_token(x)
        x = (p.position_embedding(x, images) if p.position_embedding.stride is not None
             else p.position_embedding(x))
        if late:
            x = p.class_token(x)
        x = p.embedding_dropout(x, training=training)
        return (x, extras) if patch_transform is not None else x

    def _pool(self, tokens, parts=None):
        """Encoded tokens -> the pre-logits vector (pooled per `classifier`, then the representation)."""
        p = self if parts is None else parts
        x = p.token_pooling(tokens)
        return p.pre_logits(x) if p.pre_logits is not None else x


def all_or_nothing(model: keras.Model, load: Callable[[], None], source) -> keras.Model:
    """Runs `load()`, which assigns `model`'s weights; if it raises, or leaves a weight holding NaN/Inf, every
    weight is put back as it was before the error propagates. The one snapshot-and-restore of the package."""
    saved = [np.array(keras.ops.convert_to_numpy(v)) for v in model.weights]

    def restore() -> None:
        for variable, value in zip(model.weights, saved):
            variable.assign(value)

    try:
        load()
    except BaseException:
        restore()
        raise
    bad = [v.path for v in model.weights if not np.all(np.isfinite(keras.ops.convert_to_numpy(v)))]
    if bad:
        restore()
        raise ValueError(f"weights file {source!r}: {len(bad)} array(s) hold non-finite values (NaN/Inf), e.g. "
                         f"{bad[0]} -- a diverged or damaged file (no weight was changed).")
    return model


def ensure_vit(model, hint: str = "load it with keras_vit.load_model") -> VisionTransformer:
    """`model` itself when it is a `VisionTransformer`, else a ValueError naming it (and `hint`)."""
    if not isinstance(model, VisionTransformer):
        raise ValueError(f"Model {getattr(model, 'name', model)!r} is not a keras_vit.VisionTransformer ({hint}).")
    return model

