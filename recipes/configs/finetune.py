"""Fine-tuning, paper Table 4 and the original code's defaults (`finetune.py:cifar10`).

SGD momentum 0.9, batch 512, cosine decay, no weight decay, global-norm clip 1,
resolution 384, zero-initialised new head, warmup 500 steps. The paper swept the
learning rates in ROWS (pick one with --config.optimizer.learning_rate) on a held-out
part of train (the dev %), which the train split here leaves out. Dropout 0.1 was used
for ViT-L/16, ViT-H/14, R50+ViT-B/16 and R50+ViT-L/32 (docs/reference.md): set it with
--config.model.dropout_rate=0.1 together with --config.model.name.
"""

from recipes.configs.base import base_config, pick

# variant: (TFDS name, classes, steps, LR sweep, dev fraction %, eval split)
ROWS = {
    "imagenet": ("imagenet2012", 1000, 20_000, [0.003, 0.01, 0.03, 0.06], 1, "validation"),
    "cifar100": ("cifar100", 100, 10_000, [0.001, 0.003, 0.01, 0.03], 2, "test"),
    "cifar10": ("cifar10", 10, 10_000, [0.001, 0.003, 0.01, 0.03], 2, "test"),
    "pets": ("oxford_iiit_pet", 37, 500, [0.001, 0.003, 0.01, 0.03], 10, "test"),
    "flowers": ("oxford_flowers102", 102, 500, [0.001, 0.003, 0.01, 0.03], 10, "test"),
}


def get_config(arg: str = "cifar10"):
    """`<dataset>`, `<dataset>_polyak` (Polyak averaging 0.9999, as for Table 2's ImageNet rows), or `folder`
    (your own images: `--config.dataset.name=folder:/path/to/images`)."""
    if arg == "folder":
        return _folder()
    polyak = arg.endswith("_polyak")
    name, classes, steps, sweep, dev, eval_split = pick(ROWS, arg[: -len("_polyak")] if polyak else arg, "finetune.py")
    c = base_config()
    c.model.name = "ViT-B/16"
    c.model.dropout_rate = 0.0
    c.init_weights = ""  # e.g. the ImageNet-21k .npz of the model
    c.dataset.update(
        name=name, num_classes=classes, train_split=f"train[:{100 - dev}%]", eval_split=eval_split, image_size=384
    )
    c.batch_size = 512
    c.total_steps = steps
    c.optimizer.update(
        name="sgd",
        learning_rate=0.03 if name == "imagenet2012" else sweep[2],
        momentum=0.9,
        nesterov=False,
        weight_decay=0.0,
        clip_norm=1.0,
        warmup_steps=500,
        decay="cosine",
    )
    c.ema_decay = 0.9999 if polyak else 0.0
    c.checkpoint_every = 500
    return c


def _folder():
    """Table 4's recipe on an image folder (`recipes.folder`): the small-dataset rows' 500 steps and middle
    learning rate, warmup over the first 10 %, classes from the folder, 10 % of the files held out (a
    folder with train/ and val/ subfolders: `--config.dataset.train_split=train --config.dataset.eval_split=val`)."""
    c = get_config("pets")
    c.dataset.update(name="folder:", num_classes=0, train_split="train[:90%]", eval_split="train[90%:]")
    c.optimizer.update(learning_rate=0.01, warmup_steps=50)
    return c


def variants() -> list:
    return [*ROWS, *(f"{row}_polyak" for row in ROWS), "folder"]
