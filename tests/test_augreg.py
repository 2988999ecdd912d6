"""AugReg, SAM and the naming scheme: real filenames of the public index parsed field by field, short and full
names resolving through `weights=`, unknown names refused with close matches. Nothing is downloaded."""

import pytest

import keras_vit
from keras_vit.weights import releases

# Real filenames: the vision_transformer README's recommended table, timm's pretrained configs, and papers' code
# that cites them.
REAL = [
    "L_16-i21k-300ep-lr_0.001-aug_strong1-wd_0.1-do_0.0-sd_0.0",
    "L_16-i21k-300ep-lr_0.001-aug_strong1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384",
    "B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0",
    "B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384",
    "B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_224",
    "S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0",
    "S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384",
    "R50_L_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1",
    "R50_L_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_384",
    "R26_S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0",
    "R26_S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384",
    "Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0",
    "Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384",
    "Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224",
    "B_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0",
    "B_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384",
    "B_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224",
    "S_32-i21k-300ep-lr_0.001-aug_none-wd_0.1-do_0.0-sd_0.0",
    "S_32-i21k-300ep-lr_0.001-aug_none-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384",
    "S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224",
    "R_Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0",
    "R_Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384",
    "B_8-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0",
    "B_8-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_224",
    "L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224",
    "B_16-i1k-300ep-lr_0.001-aug_medium2-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_224",
]
MODELS = {
    "L_16": "ViT-L/16",
    "B_16": "ViT-B/16",
    "S_16": "ViT-S/16",
    "R50_L_32": "R50+ViT-L/32",
    "R26_S_32": "R26+ViT-S/32",
    "Ti_16": "ViT-Ti/16",
    "B_32": "ViT-B/32",
    "S_32": "ViT-S/32",
    "R_Ti_16": "R+ViT-Ti/16",
    "B_8": "ViT-B/8",
}


@pytest.mark.parametrize("stem", REAL)
def test_real_filenames_parse_field_by_field(stem):
    code, pretrain, _, lr, aug, wd, do, sd = stem.split("--")[0].split("-")
    r = releases.parse_augreg(f"gs://vit_models/augreg/{stem}.npz")
    assert r.name == stem and r.model == MODELS[code] and r.representation_size is None
    assert r.url.endswith(f"/augreg/{stem}.npz")
    fields = keras_vit.weights.augreg.parse_name(stem)
    assert (fields.pretrain, fields.aug, fields.lr, fields.wd, fields.dropout, fields.stochastic_depth) == (
        pretrain,
        aug[4:],
        float(lr[3:]),
        float(wd[3:]),
        float(do[3:]),
        float(sd[3:]),
    )
    if "--" in stem:
        ds, steps, ft_lr, res = stem.split("--")[1].split("-")
        assert (r.dataset, r.classes, r.resolution, fields.steps, fields.ft_lr) == (
            ds,
            1000,
            int(res[4:]),
            steps[6:],
            float(ft_lr[3:]),
        )
    else:
        assert (r.dataset, r.classes, r.resolution) == (
            f"augreg_{pretrain}",
            21843 if pretrain == "i21k" else 1000,
            224,
        )


def test_published_top1_only_for_the_readme_rows():
    top = {r.model: r.top1 for r in map(releases.parse_augreg, REAL) if r.top1 is not None}
    assert top == {
        "ViT-L/16": 85.59,
        "ViT-B/16": 85.49,
        "ViT-S/16": 83.73,
        "R50+ViT-L/32": 85.99,
        "R26+ViT-S/32": 83.85,
        "ViT-Ti/16": 78.22,
        "ViT-B/32": 83.59,
        "ViT-S/32": 79.58,
        "R+ViT-Ti/16": 75.40,
    }


@pytest.mark.parametrize(
    "short,resolution,classes",
    [
        ("augreg_in21k", 224, 21843),
        ("augreg_in21k_ft_in1k", 224, 1000),
        ("augreg_in21k_ft_in1k_384", 384, 1000),
        ("sam", 224, 1000),
    ],
)
def test_short_names_resolve_per_model(short, resolution, classes):
    for model in ("ViT-B/16", "ViT-B/32"):
        r = releases.find_release(short, model)
        assert (r.model, r.resolution, r.classes) == (model, resolution, classes)
    assert keras_vit.weights.check_source(short) == short


def test_full_filenames_resolve_as_weights_and_name_their_model():
    stem = REAL[3]
    assert keras_vit.weights.check_source(stem + ".npz") == stem + ".npz"
    assert releases.find_release(stem + ".npz", "ViT-B/16").top1 == 85.49
    with pytest.raises(ValueError, match="holds ViT-B/16, not ViT-S/16"):
        releases.find_release(stem, "ViT-S/16")
    r = releases.find_release("ViT-B_16/augreg_in21k_ft_in1k_384", None)
    assert r.url.endswith(REAL[3] + ".npz")


@pytest.mark.parametrize(
    "bad,message",
    [
        ("augreg_in21", "did you mean 'augreg_in21k'"),
        (
            "B_16-i21k-300ep-lr_0.001-aug_mediumX-wd_0.1-do_0.0-sd_0.0",
            "not an AugReg filename.*close: B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0",
        ),
        ("X_16-i21k-300ep-lr_0.001-aug_none-wd_0.1-do_0.0-sd_0.0", "model codes: Ti_16"),
        ("nonsense", "dataset-style names: augreg_in21k"),
    ],
)
def test_unknown_names_are_refused_with_close_matches(bad, message):
    with pytest.raises(ValueError, match=message):
        keras_vit.ViT_B16(weights=bad)


def test_new_table_rows_and_the_finetune_class_gap():
    assert keras_vit.vit_config("R+ViT-Ti/16").effective_patch_size == 32
    unknown = releases.parse_augreg(REAL[0] + "--kitti-steps_1k-lr_0.01-res_384")
    assert unknown.classes is None
    releases.register_release(unknown)
    try:
        with pytest.raises(ValueError, match="fine-tuned on 'kitti'.*pass classes="):
            keras_vit.ViT_L16(weights=unknown.name, input_shape=(384, 384, 3))
    finally:
        del releases._RELEASES[unknown.name]
