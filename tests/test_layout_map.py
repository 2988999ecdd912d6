"""`keras_vit.layout_map`: the Megatron layout names exactly the block kernels it should, and refuses meshes
that do not divide the heads or the MLP width (the training run on that layout: tests/test_jax_recipes.py)."""

import keras
import numpy as np
import pytest

import keras_vit


def _mesh(batch, model, axes=("batch", "model")):
    devices = np.array([f"cpu:{i}" for i in range(batch * model)]).reshape(batch, model)
    return keras.distribution.DeviceMesh((batch, model), axes, devices=devices)


def test_every_variable_gets_the_megatron_layout_or_none():
    model = keras_vit.VisionTransformer(
        patch_size=4,
        hidden_size=32,
        mlp_dim=64,
        num_heads=4,
        num_layers=2,
        input_shape=(16, 16, 3),
        classes=5,
        representation_size=8,
    )
    layouts = keras_vit.layout_map(model, _mesh(2, 2))
    expected = {
        "query/kernel": (None, "model", None),
        "key/kernel": (None, "model", None),
        "value/kernel": (None, "model", None),
        "query/bias": ("model", None),
        "key/bias": ("model", None),
        "value/bias": ("model", None),
        "out/kernel": ("model", None, None),
        "Dense_0/kernel": (None, "model"),
        "Dense_0/bias": ("model",),
        "Dense_1/kernel": ("model", None),
    }
    sharded = 0
    for v in model.variables:
        layout = layouts[v.path]
        want = next(
            (
                axes
                for suffix, axes in expected.items()
                if v.path.startswith("Transformer/encoderblock_") and v.path.endswith(suffix)
            ),
            None,
        )
        if want is None:
            assert layout is None, v.path  # embeddings, cls, position embeddings, norms, out/Dense_1 bias, head
        else:
            sharded += 1
            assert tuple(layout.axes) == want and len(want) == len(v.shape), v.path
    assert sharded == 2 * 10


def test_names_configs_and_the_model_axis():
    layouts = keras_vit.layout_map("ViT-H/14", _mesh(1, 8, ("data", "tp")), model_axis="tp")
    assert tuple(layouts["Transformer/encoderblock_31/MlpBlock_3/Dense_0/kernel"].axes) == (None, "tp")
    assert keras_vit.layout_map(keras_vit.vit_config("ViT-B/16"), _mesh(2, 4)) is not None


@pytest.mark.parametrize(
    "source,ways,message",
    [
        ("ViT-B/16", 8, "num_heads=12 does not split over the 8 devices of mesh axis 'model'"),
        ("ViT-Ti/16", 2, "num_heads=3 does not split"),
        (keras_vit.ViTConfig("custom", 16, 64, 30, 4, 2), 4, "mlp_dim=30 does not split"),
    ],
)
def test_indivisible_meshes_are_refused(source, ways, message):
    with pytest.raises(ValueError, match=message):
        keras_vit.layout_map(source, _mesh(1, ways))


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match=r"model_axis='tensor' is not one of them"):
        keras_vit.layout_map("ViT-B/16", _mesh(2, 2), model_axis="tensor")
    with pytest.raises(TypeError, match="takes a keras_vit.VisionTransformer"):
        keras_vit.layout_map(12, _mesh(2, 2))
