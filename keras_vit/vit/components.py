"""The components of a `VisionTransformer`, built from its checked keywords (one function, so that the model
class keeps the anatomy's order and its description while this keeps the list of parts)."""

from __future__ import annotations

import types

import keras

from keras_vit.nn.rotary import RotaryPositionEmbedding
from keras_vit.nn.attention_pooling import AttentionPooling
from keras_vit.nn.convolutional_stem import ConvolutionalStem, embedding_patch
from keras_vit.nn.initializers import initial
from keras_vit.nn.class_token import ClassToken
from keras_vit.nn.encoder import ENCODER_OPTIONS, Encoder
from keras_vit.nn.encoder_block import layer_norm
from keras_vit.nn.patch_embedding import PatchEmbedding
from keras_vit.nn.token_pooling import TokenPooling
from keras_vit.nn.position_embedding import AddPositionEmbedding
from keras_vit.nn.position_resampling import ResampledPositionEmbedding
from keras_vit.vit.preprocessing import ImagePreprocessing
from keras_vit.nn.resnet import ResNetStem


def make_components(
    c,
    resnet_width,
    preprocessing,
    classifier,
    grid,
    options,
    variant,
    representation_size,
    classes,
    classifier_activation,
    policy,
) -> types.SimpleNamespace:
    """The layers of a `VisionTransformer`, named after the official checkpoint tree (big_vision's for the MAP
    head); None where the model has no such part. Returned as a namespace (attributes after `Model.__init__`)."""
    p, v, eps = types.SimpleNamespace(), variant, variant.layer_norm_epsilon
    prefix = v.num_prefix_tokens(classifier)
    p.preprocessing = (
        ImagePreprocessing(None, preprocessing, name="preprocessing") if preprocessing is not None else None
    )
    p.stem = (
        ResNetStem(c.resnet_layers, resnet_width, v.stem_numerics, dtype=policy, name="resnet")
        if c.is_hybrid
        else ConvolutionalStem(v.convolutional_stem, dtype=policy, name="convolutional_stem")
        if v.convolutional_stem
        else None
    )
    p.patch_embedding = PatchEmbedding(
        embedding_patch(c.patch_size, v.convolutional_stem, c.is_hybrid),
        c.hidden_size,
        use_bias=v.patch_bias,
        dtype=policy,
        name="embedding",
    )
    p.class_token = ClassToken(dtype=policy, name="cls") if v.has_class_token(classifier) else None
    p.distillation_token = ClassToken(dtype=policy, name="dist") if v.distillation_token else None
    p.register_tokens = (
        ClassToken(v.num_register_tokens, dtype=policy, name="registers") if v.num_register_tokens else None
    )
    p.position_embedding = (
        ResampledPositionEmbedding(v.position_resampling, c.effective_patch_size, dtype=policy, name="posembed_input")
        if v.position_resampling is not None
        else AddPositionEmbedding(
            grid,
            prefix if v.prefix_position_embedding else 0,
            stride=c.effective_patch_size if options["dynamic"] else None,
            interpolation=v.position_interpolation,
            dtype=policy,
            name="posembed_input",
        )
        if v.absolute_position_embedding
        else None
    )
    p.rotary_embedding = (
        RotaryPositionEmbedding(
            v.rotary_embedding, c.hidden_size // c.num_heads, c.effective_patch_size, prefix, name="rotary_embedding"
        )
        if v.rotary_embedding is not None
        else None
    )
    p.embedding_dropout = keras.layers.Dropout(options["dropout_rate"], dtype=policy, name="dropout")
    p.patch_norm = layer_norm("embedding_norm", policy, eps, v.rms_norm) if v.patch_norm else None
    p.pre_norm = layer_norm("pre_norm", policy, eps, v.rms_norm) if v.pre_norm else None
    # the record's fields the encoder takes by name; the final norm moves after pooling with fc_norm, and the
    # rotary form's two block-level facts
    encoder_options = {name: getattr(v, name) for name in set(ENCODER_OPTIONS) & set(v.fields())}
    encoder_options.update(
        final_norm=v.final_norm and not v.fc_norm,
        rotate_half=v.rotary_embedding is not None and v.rotary_embedding.rotate_half,
        mixed_rotary_temperature=(
            v.rotary_embedding.temperature
            if v.rotary_embedding is not None and v.rotary_embedding.form == "mixed"
            else None
        ),
    )
    p.encoder = Encoder(
        c.num_layers,
        c.num_heads,
        c.mlp_dim,
        options["dropout_rate"],
        options["attention_dropout_rate"],
        options["drop_path_rate"],
        None,
        options["remat"],
        **encoder_options,
        dtype=policy,
        name="Transformer",
    )
    pooled = 0 if v.pooling_includes_prefix else prefix  # rows the pooling skips
    p.token_pooling = (
        AttentionPooling(
            v.attention_pooling_heads or c.num_heads,
            c.mlp_dim,
            v.activation,
            eps,
            pooled,
            v.rms_norm,
            dtype=policy,
            name="MAPHead_0",
        )
        if classifier == "map"
        else TokenPooling(classifier if classifier == "token" else "gap", pooled, dtype=policy, name="pooling")
    )
    p.distillation_pooling = (
        TokenPooling("token", prefix, index=1, dtype=policy, name="distillation_pooling")
        if v.distillation_token
        else None
    )
    p.fc_norm = layer_norm("fc_norm", policy, eps, v.rms_norm) if v.fc_norm and v.final_norm else None
    p.pre_logits = (
        keras.layers.Dense(
            int(representation_size),
            activation="tanh",
            kernel_initializer=initial(keras.initializers.LecunNormal()),
            bias_initializer=initial("zeros"),
            dtype=policy,
            name="pre_logits",
        )
        if representation_size is not None
        else None
    )
    p.head, p.head_distillation = (
        keras.layers.Dense(
            int(classes),
            kernel_initializer=initial("zeros"),
            bias_initializer=initial("zeros"),
            dtype=policy,
            name=name,
        )
        if classes is not None and wanted
        else None
        for name, wanted in (("head", True), ("head_dist", v.distillation_token))
    )
    p.predictions = (
        keras.layers.Activation(classifier_activation, dtype="float32", name="predictions")
        if classes is not None and classifier_activation is not None
        else None
    )
    return p
