"""VTAB-1k: `python -m recipes.vtab --weights=W --model=ViT-B/16 --tasks=all --workdir=DIR`.

Fine-tunes on each task with the paper's protocol (`recipes/configs/vtab.py`), one
sub-directory per task; a task with a `result.json` is finished and not rerun, an
unfinished one resumes from its checkpoints. Writes the report in the layout of the
paper's Table 9 (per task, group means, overall mean) as Markdown and CSV, and a bar
chart. Task definitions: `recipes/vtab_tasks.py` (from google-research/task_adaptation).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from typing import Dict, Optional

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from recipes import atomic  # noqa: E402
from recipes.vtab_tasks import GROUPS, TASKS, Task, get_tasks  # noqa: E402


def task_config(task: Task, args):
    """The task's protocol config; `--weights` decides the architecture when the source describes one (every
    kind but a bare `.weights.h5` file): `args.checkpoint`, read once per run by `main`."""
    from recipes.configs import vtab as vtab_configs

    c = vtab_configs.get_config(task.name)
    c.model.name = args.model or c.model.name
    c.init_weights = args.weights or ""
    if getattr(args, "checkpoint", None) is not None:
        c.model.update(**_model_fields(args.checkpoint, args.model or None))
    for field, value in (("total_steps", args.steps), ("batch_size", args.batch_size)):
        if value:
            c[field] = value
    if args.image_size:
        c.dataset.image_size = args.image_size
    if args.learning_rate:
        c.optimizer.learning_rate = args.learning_rate
    if args.warmup_steps is not None:
        c.optimizer.warmup_steps = args.warmup_steps
    c.dataset.data_dir = args.data_dir or ""
    return c


def read_source(weights: str, model_name: Optional[str]):
    """`--weights` read once for the whole run (`keras_vit.weights.Checkpoint`), or None when it is a bare
    `.weights.h5` file, which each task's trainer reads into its own config's model."""
    from keras_vit import weights as vit_weights

    if not weights or not vit_weights.sources.BY_KIND[vit_weights.source_kind(weights)].arrays:
        return None
    return vit_weights.read_checkpoint(weights, model_name=model_name)


def _family_parts(arch: dict) -> list:
    """The family options (`keras_vit.vit.variant.Variant`) in which `arch` differs from the paper's model."""
    import dataclasses

    from keras_vit.vit.variant import Variant

    default = Variant()
    return [
        f.name
        for f in dataclasses.fields(Variant)
        if f.name not in ("activation", "position_interpolation")
        and f.name in arch
        and arch[f.name] != getattr(default, f.name)
    ]


def _model_fields(checkpoint, model_name: Optional[str]) -> dict:
    """`config.model` fields that rebuild the architecture of `checkpoint` (table name when it is a table row)."""
    from keras_vit.vit import table
    from recipes.trainer.common import TRANSFORMER_FIELDS

    arch = checkpoint.architecture()
    v = table.custom_config(**{f: arch[f] for f in table.SIZE_FIELDS if f in arch})
    if model_name and v.model_kwargs() != table.vit_config(model_name).model_kwargs():
        raise ValueError(
            f"{checkpoint.source!r} holds {v.name}, not {model_name!r}; leave --model out to take "
            "the file's architecture."
        )
    activation = arch.get("activation") or ("gelu" if arch.get("gelu_approximate") is False else "gelu_tanh")
    if _family_parts(arch) or activation == "quick_gelu" or arch.get("classifier") == "map":
        # DINOv2, CLIP, SigLIP, ...: the trainer builds the source's own architecture (recipes.trainer.family)
        return dict(name="", **{f: 0 for f in TRANSFORMER_FIELDS})
    in_table = v.name in table.MODELS
    fields = dict(
        name=v.name if in_table else "",
        classifier=arch.get("classifier", "token"),
        representation_size=arch.get("representation_size") or 0,
        gelu_approximate=activation == "gelu_tanh",
    )
    fields.update({f: 0 if in_table else getattr(v, f) for f in TRANSFORMER_FIELDS})
    if v.is_hybrid and not in_table:
        fields.update(resnet_layers=tuple(v.resnet_layers), resnet_width=float(v.resnet_width))
    return fields


def run_task(task: Task, args) -> dict:
    """Fine-tunes and evaluates one task (or returns its finished result)."""
    from recipes import data
    from recipes.trainer import family, train_and_evaluate

    out = os.path.join(args.workdir, task.name)
    result_path = os.path.join(out, "result.json")
    if os.path.exists(result_path):
        print(f"{task.name}: done already ({result_path})", flush=True)
        return read_result(result_path, task.name)
    config = task_config(task, args)
    data_dir = args.data_dir or None
    normalize = family.normalizer(config=config)  # the init source's mean and std

    def train_input(batch, size, training):
        src = data.load_source(task.tfds_name, task.train800val200, data_dir)
        return data.make_dataset(
            src,
            batch,
            size,
            True,
            seed=config.seed,
            crop_area=(1.0, 1.0),
            flip=False,
            label_fn=task.label,
            image_fn=task.image,
            shuffle_buffer=1000,
            normalize=normalize,
        )

    def eval_input(batch, size, training):
        src = data.load_source(task.tfds_name, task.test, data_dir)
        return data.make_dataset(
            src, min(batch, 256), size, False, label_fn=task.label, image_fn=task.image, normalize=normalize
        )

    print(f"{task.name}: fine-tuning {config.total_steps} steps at {config.dataset.image_size} px", flush=True)
    summary = train_and_evaluate(
        config, out, train_input=train_input, eval_input=eval_input, init_checkpoint=getattr(args, "checkpoint", None)
    )
    result = dict(
        task=task.name,
        group=task.group,
        accuracy=summary["eval_accuracy"],
        steps=summary["steps"],
        tfds=task.tfds_name,
        train_split=task.train800val200,
        test_split=task.test,
    )
    atomic.write_json(result_path, result)
    return result


def read_result(path: str, task: str) -> dict:
    """A finished task's `result.json`, checked: valid JSON, this task, an accuracy in [0, 1]."""
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} is not a readable result.json ({e}); delete it to re-run task {task!r}.") from e
    if not isinstance(result, dict) or result.get("task") != task:
        raise ValueError(f"{path} is not the result of task {task!r}; delete it to re-run the task.")
    accuracy = result.get("accuracy")
    if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) or not 0.0 <= accuracy <= 1.0:
        raise ValueError(
            f"{path}: accuracy must be a fraction in [0, 1], got {accuracy!r}; delete the file to re-run task {task!r}."
        )
    return result


def collect(workdir: str) -> Dict[str, dict]:
    results = {}
    for name in TASKS:
        path = os.path.join(workdir, name, "result.json")
        if os.path.exists(path):
            results[name] = read_result(path, name)
    return results


def write_report(results: Dict[str, dict], workdir: str, label: str = "model") -> dict:
    """Table 9 layout: one row, the 19 tasks grouped, then group means and the overall mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ordered = [t for g in GROUPS for t in TASKS.values() if t.group == g]
    acc = {n: 100 * r["accuracy"] for n, r in results.items()}
    means = {}
    for g in GROUPS:
        vals = [acc[t.name] for t in ordered if t.group == g and t.name in acc]
        means[g] = sum(vals) / len(vals) if vals else None
    means["Mean"] = sum(acc.values()) / len(acc) if acc else None
    fmt = lambda v: "–" if v is None else f"{v:.1f}"  # noqa: E731
    header = ["model"] + [t.name for t in ordered] + list(means)
    row = [label] + [fmt(acc.get(t.name)) for t in ordered] + [fmt(v) for v in means.values()]
    groups_line = ["", *[t.group for t in ordered], *(["means"] * len(means))]
    md = [
        "# VTAB-1k results (paper Table 9 layout)",
        "",
        f"{len(acc)} of {len(TASKS)} tasks finished; group means over finished tasks.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        "| " + " | ".join(groups_line) + " |",
        "| " + " | ".join(row) + " |",
        "",
    ]
    atomic.write_atomic(os.path.join(workdir, "vtab_report.md"), "\n".join(md))
    table = io.StringIO(newline="")
    csv.writer(table).writerows([header, groups_line, row])
    atomic.write_atomic(os.path.join(workdir, "vtab_report.csv"), table.getvalue())
    colours = dict(zip(GROUPS, ("tab:green", "tab:blue", "tab:orange")))
    fig, ax = plt.subplots(figsize=(10, 3.5))
    names = [t.name for t in ordered]
    ax.bar(range(len(names)), [acc.get(n, 0.0) for n in names], color=[colours[t.group] for t in ordered])
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("top-1 accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"VTAB-1k: mean {fmt(means['Mean'])} %")
    for g, c in colours.items():
        ax.bar([], [], color=c, label=f"{g} ({fmt(means[g])})")
    ax.legend(fontsize=8)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    atomic.write_atomic(os.path.join(workdir, "vtab_report.png"), png.getvalue())
    return means


def main(argv: Optional[list] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.vtab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--weights",
        default="",
        help="the source to fine-tune from: a release name, an official "
        ".npz, a .keras model, a timm .safetensors file or a transformers directory (each says what "
        "model it is), or a .weights.h5 file (with --model)",
    )
    p.add_argument("--model", default="", help="table name (default ViT-B/16 unless the file says otherwise)")
    p.add_argument("--tasks", default="all", help="all, or comma-separated names")
    p.add_argument("--workdir", required=True)
    p.add_argument("--data_dir", default="")
    p.add_argument("--steps", type=int, default=0, help="override the protocol's 2,500 steps")
    p.add_argument("--batch_size", type=int, default=0, help="override the protocol's 512")
    p.add_argument("--image_size", type=int, default=0, help="override the protocol's 384")
    p.add_argument("--learning_rate", type=float, default=0.0)
    p.add_argument("--warmup_steps", type=int, default=None)
    args = p.parse_args(argv)
    try:
        from keras_vit.utils import validate
        from keras_vit.utils.atomic import check_writable

        tasks = get_tasks(args.tasks)
        for flag in ("steps", "batch_size", "image_size"):
            validate.integer(f"--{flag}", getattr(args, flag), minimum=0)
        validate.number("--learning_rate", args.learning_rate, minimum=0.0)
        if args.warmup_steps is not None:
            validate.integer("--warmup_steps", args.warmup_steps, minimum=0)
        check_writable(args.workdir, "--workdir", directory=True)
        collect(args.workdir)  # a damaged result.json is reported before hours of fine-tuning
        args.checkpoint = read_source(args.weights, args.model or None)  # once per run, not once per task
        os.makedirs(args.workdir, exist_ok=True)
        for task in tasks:
            run_task(task, args)
        means = write_report(collect(args.workdir), args.workdir, args.model)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"VTAB report: {os.path.join(args.workdir, 'vtab_report.md')} (mean {means['Mean']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
