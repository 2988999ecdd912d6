"""Masked patch prediction self-supervision (paper appendix B.1.2; no public code exists).

50 % of patch embeddings are corrupted: 80 % of those replaced by a learned [mask]
embedding, 10 % by another random patch's embedding, 10 % kept; the model predicts
the 3-bit mean colour (512 classes) of every corrupted patch. Adam, base LR 2e-4,
warmup 10k, cosine decay, batch 4096; the paper trains ViT-B/16 for 1M steps on JFT.
"""

from recipes.configs.base import base_config, pick

VARIANTS = {"vit_b16_jft": ("ViT-B/16", "jft300m", 18291), "vit_b16_i1k": ("ViT-B/16", "imagenet2012", 1000)}


def get_config(arg: str = "vit_b16_jft"):
    model, data, classes = pick(VARIANTS, arg, "mpp.py")
    c = base_config()
    c.model.name = model
    c.dataset.update(name=data, num_classes=classes, train_split="train", eval_split="", image_size=224)
    c.batch_size = 4096
    c.total_steps = 1_000_000
    c.optimizer.update(name="adamw", learning_rate=2e-4, weight_decay=0.0, warmup_steps=10_000, decay="cosine")
    c.mpp.update(enabled=True, corrupt_rate=0.5, mask_rate=0.8, random_rate=0.1, bits=3)
    return c


def variants() -> list:
    return list(VARIANTS)
