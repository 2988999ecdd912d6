"""VTAB-1k task table, label pre-processing, and the suite runner on mocked TFDS data."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from recipes import vtab
from recipes.vtab_tasks import TASKS, bin_label, get_tasks

# From the VTAB paper (Zhai et al. 2019, Table 1 / appendix): group and number of classes per task.
EXPECTED = {
    "caltech101": ("Natural", 102),
    "cifar100": ("Natural", 100),
    "dtd": ("Natural", 47),
    "flowers102": ("Natural", 102),
    "pets": ("Natural", 37),
    "sun397": ("Natural", 397),
    "svhn": ("Natural", 10),
    "patch_camelyon": ("Specialized", 2),
    "eurosat": ("Specialized", 10),
    "resisc45": ("Specialized", 45),
    "retinopathy": ("Specialized", 5),
    "clevr_count": ("Structured", 8),
    "clevr_dist": ("Structured", 6),
    "dmlab": ("Structured", 6),
    "dsprites_loc": ("Structured", 16),
    "dsprites_ori": ("Structured", 16),
    "kitti_dist": ("Structured", 4),
    "smallnorb_azim": ("Structured", 18),
    "smallnorb_elev": ("Structured", 9),
}


def test_task_table():
    assert len(TASKS) == 19
    assert {n: (t.group, t.num_classes) for n, t in TASKS.items()} == EXPECTED
    assert [t.group for t in TASKS.values()].count("Natural") == 7
    assert [t.group for t in TASKS.values()].count("Specialized") == 4
    assert [t.group for t in TASKS.values()].count("Structured") == 8
    with pytest.raises(ValueError, match="Unknown VTAB task.*'imagenet'.*known: all, caltech101"):
        get_tasks("cifar100,imagenet")


@pytest.mark.parametrize("task", sorted(TASKS))
def test_split_strings_parse_with_tfds(task):
    t = TASKS[task]
    for split in (t.train800, t.val200, t.train800val200, t.test):
        assert tfds.core.ReadInstruction.from_spec(split) is not None
    assert t.train800 == "train[:800]" and t.train800val200 == f"train[:800]+{t.val200}"


def test_binning_rule():
    thresholds = [-100.0, 8.0, 20.0, 999.0]
    assert [int(bin_label(v, thresholds)) for v in (3.0, 8.0, 8.1, 19.9, 25.0, 1000.0)] == [0, 0, 1, 1, 2, 3]


def test_label_maps_on_synthetic_examples():
    kitti = TASKS["kitti_dist"]

    def k(types, z):
        loc = np.zeros((len(types), 3), "float32")
        loc[:, 2] = z
        return int(kitti.label({"objects": {"type": tf.constant(types, tf.int64), "location": tf.constant(loc)}}))

    assert k([0, 1], [30.0, 12.0]) == 1  # closest vehicle at 12 m
    assert k([2, 5], [5.0, 1.0]) == 0  # a pedestrian (type 5) closer than the truck does not count
    assert k([0], [45.0]) == 2
    assert k([4, 6], [3.0, 4.0]) == 3  # no vehicle at all
    count, dist = TASKS["clevr_count"], TASKS["clevr_dist"]
    objs = {
        "size": tf.zeros(5, tf.int64),
        "pixel_coords": tf.constant([[1, 1, 9.2], [2, 2, 11.0], [0, 0, 12.0], [0, 0, 13.0], [0, 0, 14.0]], tf.float32),
    }
    assert int(count.label({"objects": objs})) == 2 and int(dist.label({"objects": objs})) == 3
    assert int(TASKS["dsprites_loc"].label({"label_x_position": tf.constant(31, tf.int64)})) == 15
    assert int(TASKS["dsprites_ori"].label({"label_orientation": tf.constant(39, tf.int64)})) == 15
    assert int(TASKS["dsprites_ori"].label({"label_orientation": tf.constant(5, tf.int64)})) == 2
    img = TASKS["dsprites_loc"].image({"image": tf.ones((64, 64, 1), tf.uint8)})
    assert img.shape == (64, 64, 3) and int(tf.reduce_max(img)) == 255
    norb = {
        "image": tf.ones((96, 96, 1), tf.uint8),
        "label_azimuth": tf.constant(17, tf.int64),
        "label_elevation": tf.constant(8, tf.int64),
    }
    assert int(TASKS["smallnorb_azim"].label(norb)) == 17 and int(TASKS["smallnorb_elev"].label(norb)) == 8
    assert TASKS["smallnorb_elev"].image(norb).shape == (96, 96, 3)


def test_suite_end_to_end_on_mocked_tfds(tmp_path, capsys):
    import keras_vit

    model = keras_vit.VisionTransformer(8, 32, 64, 2, 1, input_shape=(32, 32, 3), classes=7)
    weights = str(tmp_path / "tiny.keras")
    model.save(weights)
    args = [
        "--weights",
        weights,
        "--tasks",
        "eurosat,dsprites_loc",
        "--workdir",
        str(tmp_path / "vtab"),
        "--steps",
        "3",
        "--batch_size",
        "8",
        "--image_size",
        "32",
        "--warmup_steps",
        "1",
    ]
    with tfds.testing.mock_data(num_examples=24):
        assert vtab.main(args) == 0
        for task in ("eurosat", "dsprites_loc"):
            result = json.load(open(tmp_path / "vtab" / task / "result.json"))
            assert 0.0 <= result["accuracy"] <= 1.0 and result["steps"] == 3
        stamp = os.path.getmtime(tmp_path / "vtab" / "eurosat" / "result.json")
        capsys.readouterr()
        assert vtab.main(args) == 0
        assert "eurosat: done already" in capsys.readouterr().out
        assert os.path.getmtime(tmp_path / "vtab" / "eurosat" / "result.json") == stamp
    report = (tmp_path / "vtab" / "vtab_report.md").read_text()
    assert "2 of 19 tasks finished" in report and "eurosat" in report
    rows = (tmp_path / "vtab" / "vtab_report.csv").read_text().splitlines()
    assert rows[0].startswith("model,caltech101") and rows[0].endswith("Natural,Specialized,Structured,Mean")
    assert os.path.getsize(tmp_path / "vtab" / "vtab_report.png") > 1000
    assert vtab.main(["--tasks", "nope", "--workdir", str(tmp_path / "x")]) == 2
