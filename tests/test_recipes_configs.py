"""The experiment configs encode the paper's Tables 3 and 4 (values typed from the paper / REFERENCE §4)."""

import pytest

from recipes.configs import demo, finetune, mpp, pretrain

# Table 3: variant -> (model, data, epochs, base LR, decay, weight decay, dropout)
TABLE_3 = {
    "vit_b16_jft": ("ViT-B/16", "jft300m", 7, 8e-4, "linear", 0.1, 0.0),
    "vit_b32_jft": ("ViT-B/32", "jft300m", 7, 8e-4, "linear", 0.1, 0.0),
    "vit_l32_jft": ("ViT-L/32", "jft300m", 7, 6e-4, "linear", 0.1, 0.0),
    "vit_l16_jft": ("ViT-L/16", "jft300m", 7, 4e-4, "linear", 0.1, 0.0),
    "vit_l16_jft_14ep": ("ViT-L/16", "jft300m", 14, 4e-4, "linear", 0.1, 0.0),
    "vit_h14_jft": ("ViT-H/14", "jft300m", 14, 3e-4, "linear", 0.1, 0.0),
    "r50x1_jft": ("BiT-R50x1", "jft300m", 7, 1e-3, "linear", 0.1, 0.0),
    "r50x2_jft": ("BiT-R50x2", "jft300m", 7, 1e-3, "linear", 0.1, 0.0),
    "r101x1_jft": ("BiT-R101x1", "jft300m", 7, 8e-4, "linear", 0.1, 0.0),
    "r152x1_jft": ("BiT-R152x1", "jft300m", 7, 6e-4, "linear", 0.1, 0.0),
    "r152x2_jft": ("BiT-R152x2", "jft300m", 7, 6e-4, "linear", 0.1, 0.0),
    "r50_vit_b16_jft": ("R50+ViT-B/16", "jft300m", 7, 8e-4, "linear", 0.1, 0.0),
    "r50_vit_b32_jft": ("R50+ViT-B/32", "jft300m", 7, 8e-4, "linear", 0.1, 0.0),
    "r50_vit_l32_jft": ("R50+ViT-L/32", "jft300m", 7, 2e-4, "linear", 0.1, 0.0),
    "r50_vit_l16_jft": ("R50+ViT-L/16", "jft300m", 7, 4e-4, "linear", 0.1, 0.0),
    "r50_vit_l16_jft_14ep": ("R50+ViT-L/16", "jft300m", 14, 4e-4, "linear", 0.1, 0.0),
    "vit_b16_i21k": ("ViT-B/16", "imagenet21k", 90, 1e-3, "linear", 0.03, 0.1),
    "vit_b32_i21k": ("ViT-B/32", "imagenet21k", 90, 1e-3, "linear", 0.03, 0.1),
    "vit_l16_i21k": ("ViT-L/16", "imagenet21k", 90, 1e-3, "linear", 0.03, 0.1),
    "vit_l32_i21k": ("ViT-L/32", "imagenet21k", 90, 1e-3, "linear", 0.03, 0.1),
    "vit_l16_i21k_30ep": ("ViT-L/16", "imagenet21k", 30, 1e-3, "linear", 0.03, 0.1),
    "vit_l32_i21k_30ep": ("ViT-L/32", "imagenet21k", 30, 1e-3, "linear", 0.03, 0.1),
    "vit_b16_i1k": ("ViT-B/16", "imagenet2012", 300, 3e-3, "cosine", 0.3, 0.1),
    "vit_b32_i1k": ("ViT-B/32", "imagenet2012", 300, 3e-3, "cosine", 0.3, 0.1),
    "vit_l16_i1k": ("ViT-L/16", "imagenet2012", 300, 3e-3, "cosine", 0.3, 0.1),
    "vit_l32_i1k": ("ViT-L/32", "imagenet2012", 300, 3e-3, "cosine", 0.3, 0.1),
}

# Table 4: variant -> (TFDS name, steps, LR sweep, dev split of train)
TABLE_4 = {
    "imagenet": ("imagenet2012", 20_000, [0.003, 0.01, 0.03, 0.06], "train[99%:]"),
    "cifar100": ("cifar100", 10_000, [0.001, 0.003, 0.01, 0.03], "train[98%:]"),
    "cifar10": ("cifar10", 10_000, [0.001, 0.003, 0.01, 0.03], "train[98%:]"),
    "pets": ("oxford_iiit_pet", 500, [0.001, 0.003, 0.01, 0.03], "train[90%:]"),
    "flowers": ("oxford_flowers102", 500, [0.001, 0.003, 0.01, 0.03], "train[90%:]"),
}


def test_every_table_3_row():
    assert set(pretrain.ROWS) == set(TABLE_3)
    for variant, (model, data, epochs, lr, decay, wd, dropout) in TABLE_3.items():
        c = pretrain.get_config(variant)
        assert (c.model.name, c.dataset.name, c.num_epochs, c.optimizer.learning_rate, c.optimizer.decay,
                c.optimizer.weight_decay, c.model.dropout_rate) == (model, data, epochs, lr, decay, wd, dropout)
        assert (c.batch_size, c.optimizer.warmup_steps, c.optimizer.b1, c.optimizer.b2) == (4096, 10_000, 0.9, 0.999)
        assert c.dataset.image_size == 224 and c.optimizer.name == "adamw"
        assert c.optimizer.clip_norm == (1.0 if data == "imagenet2012" else 0.0)


def test_every_table_4_row():
    for variant, (name, steps, sweep, dev) in TABLE_4.items():
        for v in (variant, variant + "_polyak"):
            c = finetune.get_config(v)
            assert (c.dataset.name, c.total_steps, list(c.lr_sweep), c.dev_split) == (name, steps, sweep, dev)
            assert (c.optimizer.name, c.optimizer.momentum, c.optimizer.decay, c.optimizer.weight_decay) == \
                ("sgd", 0.9, "cosine", 0.0)
            assert (c.batch_size, c.optimizer.clip_norm, c.dataset.image_size, c.optimizer.warmup_steps) == \
                (512, 1.0, 384, 500)
            assert c.optimizer.learning_rate in sweep
            assert c.ema_decay == (0.9999 if v.endswith("_polyak") else 0.0)


def test_mpp_config_follows_appendix_b12():
    c = mpp.get_config("vit_b16_jft")
    assert c.mpp.enabled and (c.mpp.corrupt_rate, c.mpp.mask_rate, c.mpp.random_rate, c.mpp.bits) == (0.5, 0.8, 0.1, 3)
    assert 2 ** (3 * c.mpp.bits) == 512
    assert (c.optimizer.learning_rate, c.optimizer.warmup_steps, c.optimizer.decay, c.batch_size) == \
        (2e-4, 10_000, "cosine", 4096)


@pytest.mark.parametrize("module", [pretrain, finetune, mpp, demo])
def test_unknown_variant_lists_known_ones(module):
    with pytest.raises(ValueError, match="Unknown variant 'nope'.*known variants: "):
        module.get_config("nope")
