"""Pre-training, paper Table 3: one variant per row (`--config=recipes/configs/pretrain.py:vit_b16_i21k`).

Table 3's BiT ResNet baselines (R50x1 ... R152x2) are not rows here: keras_vit builds ViTs
and R+ViT hybrids only. Pre-training heads carry a Dense+tanh pre-logits layer of width D.

All rows: Adam β1 0.9, β2 0.999, batch 4096, linear warmup 10k steps, resolution 224;
ImageNet rows also clip the global gradient norm at 1. Weight decay is decoupled
(AdamW); dropout after every dense layer except qkv and after the position embeddings.
"""

from keras_vit import vit_config
from recipes.configs.base import base_config, pick

JFT = dict(name="jft300m", num_classes=18291, train_examples=303_000_000)  # not public
I21K = dict(name="imagenet21k", num_classes=21843, train_examples=14_197_122)
I1K = dict(name="imagenet2012", num_classes=1000, train_examples=1_281_167)

# variant: (model, data, epochs, base LR, decay, weight decay, dropout)
ROWS = {
    "vit_b16_jft": ("ViT-B/16", JFT, 7, 8e-4, "linear", 0.1, 0.0),
    "vit_b32_jft": ("ViT-B/32", JFT, 7, 8e-4, "linear", 0.1, 0.0),
    "vit_l32_jft": ("ViT-L/32", JFT, 7, 6e-4, "linear", 0.1, 0.0),
    "vit_l16_jft": ("ViT-L/16", JFT, 7, 4e-4, "linear", 0.1, 0.0),
    "vit_l16_jft_14ep": ("ViT-L/16", JFT, 14, 4e-4, "linear", 0.1, 0.0),
    "vit_h14_jft": ("ViT-H/14", JFT, 14, 3e-4, "linear", 0.1, 0.0),
    "r50_vit_b16_jft": ("R50+ViT-B/16", JFT, 7, 8e-4, "linear", 0.1, 0.0),
    "r50_vit_b32_jft": ("R50+ViT-B/32", JFT, 7, 8e-4, "linear", 0.1, 0.0),
    "r50_vit_l32_jft": ("R50+ViT-L/32", JFT, 7, 2e-4, "linear", 0.1, 0.0),
    "r50_vit_l16_jft": ("R50+ViT-L/16", JFT, 7, 4e-4, "linear", 0.1, 0.0),
    "r50_vit_l16_jft_14ep": ("R50+ViT-L/16", JFT, 14, 4e-4, "linear", 0.1, 0.0),
    "vit_b16_i21k": ("ViT-B/16", I21K, 90, 1e-3, "linear", 0.03, 0.1),
    "vit_b32_i21k": ("ViT-B/32", I21K, 90, 1e-3, "linear", 0.03, 0.1),
    "vit_l16_i21k": ("ViT-L/16", I21K, 90, 1e-3, "linear", 0.03, 0.1),
    "vit_l32_i21k": ("ViT-L/32", I21K, 90, 1e-3, "linear", 0.03, 0.1),
    "vit_l16_i21k_30ep": ("ViT-L/16", I21K, 30, 1e-3, "linear", 0.03, 0.1),
    "vit_l32_i21k_30ep": ("ViT-L/32", I21K, 30, 1e-3, "linear", 0.03, 0.1),
    "vit_b16_i1k": ("ViT-B/16", I1K, 300, 3e-3, "cosine", 0.3, 0.1),
    "vit_b32_i1k": ("ViT-B/32", I1K, 300, 3e-3, "cosine", 0.3, 0.1),
    "vit_l16_i1k": ("ViT-L/16", I1K, 300, 3e-3, "cosine", 0.3, 0.1),
    "vit_l32_i1k": ("ViT-L/32", I1K, 300, 3e-3, "cosine", 0.3, 0.1),
}


def get_config(arg: str = "vit_b16_i21k"):
    model, data, epochs, lr, decay, wd, dropout = pick(ROWS, arg, "pretrain.py")
    c = base_config()
    c.model.name = model
    c.model.representation_size = vit_config(model).hidden_size  # pre-training heads carry pre-logits
    c.model.dropout_rate = dropout
    c.dataset.update(
        name=data["name"],
        num_classes=data["num_classes"],
        train_examples=data["train_examples"],
        train_split="train",
        eval_split="validation" if data is I1K else "",
        image_size=224,
    )
    c.batch_size = 4096
    c.num_epochs = float(epochs)
    c.optimizer.update(
        name="adamw",
        learning_rate=lr,
        b1=0.9,
        b2=0.999,
        weight_decay=wd,
        warmup_steps=10_000,
        decay=decay,
        clip_norm=1.0 if data is I1K else 0.0,
    )
    return c


def variants() -> list:
    return list(ROWS)
