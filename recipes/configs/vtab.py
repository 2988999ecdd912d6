"""VTAB-1k fine-tuning protocol of the paper (§4.1, B.1.1): `vtab.py:<task>`.

Every task: SGD momentum 0.9, lr 0.01, 2,500 steps, batch 512, 384x384, cosine decay,
global-norm clip 1, zero-initialised head, train on train800val200, test on the test
split; task-agnostic pre-processing (plain resize, no crops or flips).
"""

from recipes.configs.base import base_config, pick
from recipes.vtab_tasks import TASKS


def get_config(arg: str = "cifar100"):
    task = pick(TASKS, arg, "vtab.py")
    c = base_config()
    c.model.name = "ViT-B/16"
    c.dataset.update(
        name=task.tfds_name,
        num_classes=task.num_classes,
        train_split=task.train800val200,
        eval_split=task.test,
        image_size=384,
        crop_area_min=1.0,
        flip=False,
    )
    c.batch_size = 512
    c.total_steps = 2500
    c.optimizer.update(
        name="sgd", learning_rate=0.01, momentum=0.9, weight_decay=0.0, clip_norm=1.0, warmup_steps=500, decay="cosine"
    )
    c.checkpoint_every = 500
    return c


def variants() -> list:
    return list(TASKS)
