"""The 19 VTAB-1k tasks: TFDS builders, splits, label pre-processing (paper §4.1, B.1.1).

Taken from the benchmark's public definition, google-research/task_adaptation
(`task_adaptation/data/*.py`), restated as data here: train800 = `train[:800]`
everywhere; val200 = the first 200 examples of the task's own validation split;
train800val200 = both; evaluation on the full test split. The Natural /
Specialized / Structured grouping is from the VTAB paper (Zhai et al. 2019).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import tensorflow as tf

GROUPS = ("Natural", "Specialized", "Structured")


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    tfds_name: str
    num_classes: int
    group: str
    val200: str
    test: str
    label_fn: Optional[Callable] = None  # example dict -> int label (default: ex["label"])
    image_fn: Optional[Callable] = None  # example dict -> uint8 HxWxC image (default: ex["image"])
    manual_download: bool = False

    @property
    def train800(self) -> str:
        return "train[:800]"

    @property
    def train800val200(self) -> str:
        return f"{self.train800}+{self.val200}"

    def label(self, example) -> tf.Tensor:
        return tf.cast(self.label_fn(example) if self.label_fn else example["label"], tf.int32)

    def image(self, example) -> tf.Tensor:
        return self.image_fn(example) if self.image_fn else example["image"]


def bin_label(value, thresholds: Sequence[float]) -> tf.Tensor:
    """The largest index i with thresholds[i] < value (the benchmark's binning rule)."""
    t = tf.constant(thresholds, tf.float32)
    return tf.reduce_max(tf.where(t < tf.cast(value, tf.float32), tf.range(len(thresholds)), 0))


def _kitti_distance(ex):
    vehicles = ex["objects"]["type"] < 3  # Car, Van, Truck
    depth = tf.boolean_mask(ex["objects"]["location"][:, 2], vehicles)
    closest = tf.cond(tf.size(depth) > 0, lambda: tf.reduce_min(depth), lambda: tf.constant(1000.0))
    return bin_label(closest, [-100.0, 8.0, 20.0, 999.0])


def _clevr_distance(ex):
    return bin_label(tf.reduce_min(ex["objects"]["pixel_coords"][:, 2]), [0.0, 8.0, 8.5, 9.0, 9.5, 10.0, 100.0])


def _clevr_count(ex):
    return tf.size(ex["objects"]["size"]) - 3


def _dsprites_image(ex):
    return tf.tile(tf.cast(ex["image"], tf.uint8) * 255, [1, 1, 3])


def _tiled(ex):
    return tf.tile(ex["image"], [1, 1, 3])


def _floor_div(key, div):
    return lambda ex: tf.cast(tf.floor(tf.cast(ex[key], tf.float32) / div), tf.int64)


TASKS = {
    t.name: t
    for t in (
        Task("caltech101", "caltech101:3.*.*", 102, "Natural", "train[2754:2954]", "test"),
        Task("cifar100", "cifar100:3.*.*", 100, "Natural", "train[45000:45200]", "test"),
        Task("dtd", "dtd:3.*.*", 47, "Natural", "validation[:200]", "test"),
        Task("flowers102", "oxford_flowers102:2.*.*", 102, "Natural", "validation[:200]", "test"),
        Task("pets", "oxford_iiit_pet:3.*.*", 37, "Natural", "train[2944:3144]", "test"),
        Task("sun397", "sun397/tfds:4.*.*", 397, "Natural", "validation[:200]", "test"),
        Task("svhn", "svhn_cropped:3.*.*", 10, "Natural", "train[65931:66131]", "test"),
        Task("patch_camelyon", "patch_camelyon:2.*.*", 2, "Specialized", "validation[:200]", "test"),
        Task("eurosat", "eurosat/rgb:2.*.*", 10, "Specialized", "train[16200:16400]", "train[21600:]"),
        Task(
            "resisc45", "resisc45:3.*.*", 45, "Specialized", "train[18900:19100]", "train[25200:]", manual_download=True
        ),
        Task(
            "retinopathy",
            "diabetic_retinopathy_detection/btgraham-300:3.*.*",
            5,
            "Specialized",
            "validation[:200]",
            "test",
            manual_download=True,
        ),
        Task("clevr_count", "clevr:3.*.*", 8, "Structured", "train[63000:63200]", "validation", _clevr_count),
        Task("clevr_dist", "clevr:3.*.*", 6, "Structured", "train[63000:63200]", "validation", _clevr_distance),
        Task("dmlab", "dmlab:2.0.1", 6, "Structured", "validation[:200]", "test"),
        Task(
            "dsprites_loc",
            "dsprites:2.*.*",
            16,
            "Structured",
            "train[589824:590024]",
            "train[663552:]",
            _floor_div("label_x_position", 2.0),
            _dsprites_image,
        ),
        Task(
            "dsprites_ori",
            "dsprites:2.*.*",
            16,
            "Structured",
            "train[589824:590024]",
            "train[663552:]",
            _floor_div("label_orientation", 2.5),
            _dsprites_image,
        ),
        Task("kitti_dist", "kitti:3.1.0", 4, "Structured", "validation[:200]", "test", _kitti_distance),
        Task(
            "smallnorb_azim",
            "smallnorb:2.*.*",
            18,
            "Structured",
            "test[:200]",
            "test[50%:]",
            lambda ex: ex["label_azimuth"],
            _tiled,
        ),
        Task(
            "smallnorb_elev",
            "smallnorb:2.*.*",
            9,
            "Structured",
            "test[:200]",
            "test[50%:]",
            lambda ex: ex["label_elevation"],
            _tiled,
        ),
    )
}


def get_tasks(spec: str) -> list:
    """`all` or a comma-separated list of task names -> [Task]."""
    if spec == "all":
        return list(TASKS.values())
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in TASKS]
    if unknown or not names:
        raise ValueError(f"Unknown VTAB task(s) {unknown or spec!r}; known: all, {', '.join(TASKS)}.")
    return [TASKS[n] for n in names]
