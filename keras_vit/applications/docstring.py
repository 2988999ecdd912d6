"""The Args section every paper-model constructor shares (`keras_vit.applications.paper_models`)."""

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
      gelu_approximate: the MLP's GELU in tanh form (True, the original code) or exact (False, timm).
      position_grid: (rows, cols) of the stored position embeddings of an any-size model.
      name: the model's name (default: the table name, e.g. "ViT-B_16").
      dtype: dtype policy of every layer (e.g. "mixed_bfloat16"; default: the global policy).
      trainable: False freezes every weight.
      remat: True recomputes each encoder block in the backward pass (`keras.remat`): less training
        memory, same gradients; "attention" recomputes only the attention probabilities.
      data_config: the checkpoint's evaluation preprocessing (`keras_vit.DataConfig` or its dict); default:
        what `weights` implies, else the original code's (square resize, [-1, 1]). `model.preprocessor()`
        applies it.
      The ViT family's variations, each defaulting to the paper's model (`keras_vit.vit.variant.Variant`):
      layer_scale_init: LayerScale (DeiT-III, DINOv2) initialised to this value; None for none.
      prefix_position_embedding: False: the prefix tokens are prepended after the position embeddings
        (DeiT-III, DINOv2).
      activation: the MLP's: "gelu_tanh" (default), "gelu" (exact) or "quick_gelu" (OpenAI CLIP).
      layer_norm_epsilon: every LayerNorm's epsilon (CLIP: 1e-5).
      num_register_tokens: DINOv2's register tokens.
      distillation_token: DeiT's distillation token and head (the two heads' logits averaged).
      pre_norm: a LayerNorm on the embeddings (CLIP).
      fc_norm: the final LayerNorm after pooling instead of before (MAE, EVA).
      final_norm: False: no final LayerNorm at all (RADIO, InternViT).
      qk_norm: LayerNorm on each head's queries and keys.
      qkv_bias: biases of the query/key/value projections.
      patch_bias: a bias in the patch embedding (CLIP has none).
      class_token: True keeps a class token in a "gap" / "map" model (EVA).
      stem_numerics: a hybrid stem's numerics, "original" or "timm".
      position_interpolation: how position embeddings are resized: "linear" (the original code's) or "bicubic"
        (timm's).
      rotary_embedding: rotary position embeddings (EVA-02, DINOv3, PE, RoPE-ViT): a dict of
        `keras_vit.nn.rotary.Rotary`'s fields; None for none.
      absolute_position_embedding: False: no learned position table (DINOv3, RoPE-ViT).
      swiglu: the SwiGLU MLP (EVA-02, DINOv3 "plus").
      mlp_norm: a LayerNorm on the SwiGLU's hidden layer (EVA-02).
      attention_norm: a LayerNorm on the attention's output (EVA-CLIP).
      attention_pooling_heads: the MAP head's own head count (PE); None: the encoder's.
      pooling_includes_prefix: the pooling reads the prefix tokens too (timm's EVA MAP head).
      key_bias: False: query and value biases only (EVA).
      rms_norm: every norm an RMSNorm (AIMv2).
      patch_norm: a norm on the patch embeddings (AIMv2).
      projection_bias: False: no bias on the attention output and MLP projections (AIMv2).
      post_norm: each residual branch normalised after it (timm's ResPostBlock, EVA-CLIP enormous).
      attention_only_layer_scale: LayerScale on the attention branch only (Sapiens2).
      parallel_layers: attention and MLP side by side on one norm (ViT-22B; timm's ParallelScalingBlock).
      position_resampling: a position table of the patches kept at its trained grid and resampled to each input's
        (SigLIP 2 NaFlex, RADIO; timm's naflexvit): a dict of `keras_vit.vit.position_resampling.PositionResampling`.
      differential_attention: the Differential Transformer's attention, the difference of two softmax maps per head
        (timm's `dwee` / `dlittle` ViTs).
      convolutional_stem: ((channels, kernel size), ...) convolutions with BatchNorm and GELU before the patch
        embedding, which takes the rest of the patch (MobileCLIP's ViT-B: ((192, 4), (192, 2))).
      key_value_heads: grouped-query attention's key/value heads, one count or one per block (Sapiens2).

    Returns:
      A `keras_vit.VisionTransformer` (a `keras.Model`).
"""


def variant(model_name: str):
    """Gives the constructor below it the docstring of `model_name`'s row of the table."""
    from keras_vit.vit import table

    config = table.MODELS[model_name]

    def document(function):
        hybrid = f" on a BiT-ResNet stem with stages {config.resnet_layers}" if config.is_hybrid else ""
        function.__doc__ = (
            f"Builds {config.name}: {config.num_layers} layers, D={config.hidden_size}, MLP {config.mlp_dim}, "
            f"{config.num_heads} heads, {config.effective_patch_size}x{config.effective_patch_size} pixels per "
            f"token{hybrid}.\n" + ARGS
        )
        return function

    return document
