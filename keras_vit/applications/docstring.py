"""The documentation every paper-model constructor shares (`keras_vit.applications.paper_models`): its keywords
and, generated from the record's field table, the family options."""

from keras_vit.vit.variant import Variant

ARGS = """
    Reference: "An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale" (Dosovitskiy et
    al., ICLR 2021); AugReg variants from "How to train your ViT?" (Steiner et al., 2022).

    Args:
      include_top: whether to end with the classification head.
      weights: None (random initialisation) or a weight source: a release name ("imagenet21k",
        "imagenet21k+imagenet2012", "augreg_in21k", "augreg_in21k_ft_in1k", "augreg_in21k_ft_in1k_384",
        "sam"; all: `keras_vit.weights.releases.release_names()`) or an AugReg filename, an official or
        big_vision `.npz`, a `.keras` model, a `.weights.h5` file, a timm `.safetensors` state dict, or a
        `transformers` ViT directory. Position embeddings are resized to `input_shape`; a head of another
        size is zero-initialised (with a warning).
      input_shape: (height, width, channels), default (224, 224, 3); height and width multiples of the
        effective patch size. None height/width: any size at call time. Any channel count; RGB weights
        are adapted to it.
      input_tensor: optional Keras tensor to use as the model's input.
      pooling: with `include_top=False`: None (the pre-logits vector), "token", "avg", "max" or "sequence".
      classes: head size; unset: 1000, or with a released checkpoint its own head.
      classifier_activation: the head's activation ("softmax"; None for logits).
      classifier: "token" (class token) or "gap" (global average pooling, no class token).
      representation_size: width of a Dense+tanh pre-logits layer; None for none.
      dropout_rate: dropout after the embeddings and each dense layer.
      attention_dropout_rate: dropout on the attention probabilities.
      drop_path_rate: stochastic depth of the last block (linear from 0 over the blocks).
      include_preprocessing: True: inputs are pixels in [0, 255], normalised inside per `data_config`.
      position_grid: (rows, cols) of the stored position embeddings of an any-size model.
      name: the model's name (default: the table name, e.g. "ViT-B_16").
      dtype: dtype policy of every layer (e.g. "mixed_bfloat16"; default: the global policy).
      trainable: False freezes every weight.
      remat: True recomputes each encoder block in the backward pass (`keras.remat`): less training
        memory, same gradients; "attention" recomputes only the attention probabilities.
      data_config: the checkpoint's evaluation preprocessing (`keras_vit.DataConfig` or its dict); default:
        what `weights` implies, else the original code's (square resize, [-1, 1]). `model.preprocessor()`
        applies it.
      variant: the family options (`keras_vit.vit.variant.Variant`, its dict nested by part or flat), the
        paper's model by default; each field may also be given as a keyword of its own (below).
      gelu_approximate: deprecated (0.2): activation="gelu_tanh" (True) or "gelu" (False).

    The record's fields, by part (`variant=` or keywords):
{variant_fields}

    Returns:
      A `keras_vit.VisionTransformer` (a `keras.Model`).
"""


_ARGS = ARGS.replace("{variant_fields}", Variant.documentation())  # once for all constructors


def constructor_doc(model_name: str) -> str:
    """The docstring of the constructor of `model_name`'s row of the table."""
    from keras_vit.vit import table

    config = table.MODELS[model_name]
    hybrid = f" on a BiT-ResNet stem with stages {config.resnet_layers}" if config.is_hybrid else ""
    return (
        f"Builds {config.name}: {config.num_layers} layers, D={config.hidden_size}, MLP {config.mlp_dim}, "
        f"{config.num_heads} heads, {config.effective_patch_size}x{config.effective_patch_size} pixels per "
        f"token{hybrid}.\n" + _ARGS
    )
