"""Two towers against open_clip: text-tower encoding and zero-shot classification of a folder of photos, the same
model and weights, on the same machine, a fresh process per row.

    .venv/bin/python bench/image_text.py --model ViT-B-32 --texts 1024 --batch 256 --images 64 --classes 10

The weights are open_clip's random initialisation of `--model` (seed 0), written as open_clip's hub layout by
open_clip itself (its `save_config_for_hf`, the state dict in safetensors); keras_vit reads that folder.

- Text encoding: `--texts` prompts (OpenAI's ImageNet templates filled with ImageNet class names), tokenized once
  by open_clip's tokenizer so every row encodes the same ids, encoded in batches of `--batch` (open_clip:
  `encode_text` under `torch.inference_mode`; keras_vit: the text model's `predict`, compiled as Keras compiles
  it); texts/s of the best of `--iters` passes after a warm-up pass.
- Zero-shot of a folder: the whole command as a user waits for it, start-up included: the model loaded, each of
  `--classes` classes' weights from the 80 templates, `--images` camera-sized JPEGs decoded, prepared and classified.
  keras_vit's row is its CLI (`python -m keras_vit.zero_shot photos/ --weights=... --classes=...`) on each backend;
  open_clip's a script doing the same steps with open_clip's `build_zero_shot_classifier`, the photos prepared
  with PIL as open_clip's transform does (bicubic resize of the shorter side, centre crop, its mean and std;
  torchvision, which its transform calls, has no CPU build here). Images/s over the command's time; the top-1
  agreement with open_clip's classes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUB = os.path.join(ROOT, "tools", "torchvision_stub")
sys.path.insert(0, ROOT)

_WRITE = r"""
import json, sys, torch, open_clip
from pathlib import Path
from open_clip.push_to_hf_hub import save_config_for_hf
from safetensors.torch import save_file
torch.manual_seed(0)
name, folder = sys.argv[1], sys.argv[2]
model = open_clip.create_model(name, pretrained=None)
save_file({k: v.contiguous() for k, v in model.state_dict().items()}, f"{folder}/open_clip_model.safetensors")
save_config_for_hf(model, Path(folder) / "open_clip_config.json", model_config=open_clip.get_model_config(name))
"""

_OPEN_CLIP_TEXT = r"""
import json, sys, time, numpy as np, torch, open_clip
name, folder, ids_path, batch, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
model = open_clip.create_model(name, pretrained=f"{folder}/open_clip_model.safetensors").eval()
ids = torch.from_numpy(np.load(ids_path).astype("int64"))
best = 0.0
with torch.inference_mode():
    for i in range(iters + 1):
        t = time.perf_counter()
        for s in range(0, len(ids), batch):
            model.encode_text(ids[s : s + batch])
        rate = len(ids) / (time.perf_counter() - t)
        best = max(best, rate) if i else 0.0
print(json.dumps({"texts_per_s": best}))
"""

_KERAS_TEXT = r"""
import json, sys, time, numpy as np, keras_vit
folder, ids_path, batch, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
model = keras_vit.load_image_text(folder)
ids = np.load(ids_path)
best = 0.0
for i in range(iters + 1):
    t = time.perf_counter()
    model.text_model.predict(ids, batch_size=batch, verbose=0)
    rate = len(ids) / (time.perf_counter() - t)
    best = max(best, rate) if i else 0.0
print(json.dumps({"texts_per_s": best}))
"""

_OPEN_CLIP_ZERO_SHOT = r"""
import json, os, sys, numpy as np, torch, open_clip
from PIL import Image
from open_clip.zero_shot_classifier import build_zero_shot_classifier
from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES
name, folder, photos, classes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
model = open_clip.create_model(name, pretrained=f"{folder}/open_clip_model.safetensors").eval()
tokenizer = open_clip.get_tokenizer(name)
size = model.visual.image_size[0] if isinstance(model.visual.image_size, tuple) else model.visual.image_size
mean, std = np.array(model.visual.image_mean, "float32"), np.array(model.visual.image_std, "float32")

def prepare(path):  # open_clip's eval transform: shorter side to `size` (bicubic), centre crop, mean / std
    image = Image.open(path).convert("RGB")
    scale = size / min(image.size)
    image = image.resize((round(image.width * scale), round(image.height * scale)), Image.BICUBIC)
    left, top = (image.width - size) // 2, (image.height - size) // 2
    pixels = np.asarray(image.crop((left, top, left + size, top + size)), "float32") / 255.0
    return ((pixels - mean) / std).transpose(2, 0, 1)

paths = sorted(os.path.join(photos, f) for f in os.listdir(photos) if f.endswith(".jpg"))
with torch.inference_mode():
    weights = build_zero_shot_classifier(model, tokenizer, classes, OPENAI_IMAGENET_TEMPLATES, num_classes_per_batch=10)
    images = torch.from_numpy(np.stack([prepare(p) for p in paths]))
    features = torch.nn.functional.normalize(model.encode_image(images), dim=-1)
    top = (features @ weights).argmax(dim=-1).tolist()
print(json.dumps({"top1": {path: classes[i] for path, i in zip(paths, top)}}))
"""


def _run(args, env, timeout=1800) -> tuple:
    """(the JSON the command printed last, its wall time in seconds)."""
    t = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    seconds = time.perf_counter() - t
    if done.returncode:
        raise RuntimeError(f"{args[:4]} failed:\n{done.stderr[-3000:]}")
    out = done.stdout.strip()
    if not out:
        return None, seconds
    return json.loads(out if out.startswith("[") else out.splitlines()[-1]), seconds


def _env(backend=None) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=ROOT)
    if backend:
        env["KERAS_BACKEND"] = backend
    else:
        env["PYTHONPATH"] = os.pathsep.join([STUB, ROOT])
    return env


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="ViT-B-32")
    p.add_argument("--texts", type=int, default=1024)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--images", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--backends", default="tensorflow,jax")
    p.add_argument("--workdir", default="")
    args = p.parse_args(argv)
    from bench.machine import header

    print(header(), flush=True)
    import numpy as np

    from bench.batch_inference import make_photos
    from keras_vit.vit.clip_tokenizer import ClipTokenizer
    from keras_vit.vit.labels import label_set
    from keras_vit.vit.zero_shot import prompt_templates

    work = args.workdir or tempfile.mkdtemp(prefix="bench_image_text_")
    folder = os.path.join(work, args.model)
    os.makedirs(folder, exist_ok=True)
    if not os.path.exists(os.path.join(folder, "open_clip_config.json")):
        _run([sys.executable, "-c", _WRITE, args.model, folder], _env())
    names = [c.name for c in label_set("imagenet1k")]
    texts = [t.format(n) for n in names for t in prompt_templates("openai_imagenet")][: args.texts]
    ids_path = os.path.join(work, "ids.npy")
    np.save(ids_path, ClipTokenizer(77)(texts))  # open_clip's tokenizer's ids (tests/test_clip_tokenizer.py)
    make_photos(work, args.images, "camera")
    photos = os.path.join(work, "photos")
    classes = ",".join(names[: args.classes])
    print(
        f"# {args.model}; {args.texts} texts in batches of {args.batch}, "
        f"{args.images} photos x {args.classes} classes x 80 templates"
    )
    text = {
        "open_clip": _run(
            [sys.executable, "-c", _OPEN_CLIP_TEXT, args.model, folder, ids_path, str(args.batch), str(args.iters)],
            _env(),
        )[0]["texts_per_s"]
    }
    for backend in args.backends.split(","):
        text[backend] = _run(
            [sys.executable, "-c", _KERAS_TEXT, folder, ids_path, str(args.batch), str(args.iters)], _env(backend)
        )[0]["texts_per_s"]
    theirs, seconds = _run([sys.executable, "-c", _OPEN_CLIP_ZERO_SHOT, args.model, folder, photos, classes], _env())
    zero = {"open_clip": (args.images / seconds, 1.0)}
    for backend in args.backends.split(","):
        ours, seconds = _run(
            [
                sys.executable,
                "-m",
                "keras_vit.zero_shot",
                photos,
                f"--weights={folder}",
                f"--classes={classes}",
                "--json",
                "--top=1",
            ],
            _env(backend),
        )
        agree = float(np.mean([r["top"][0]["name"] == theirs["top1"][r["image"]] for r in ours]))
        zero[backend] = (args.images / seconds, agree)
    print(
        f"{'row':<12} {'texts/s':>9} {'vs open_clip':>12} {'zero-shot img/s':>16} {'vs open_clip':>12} {'top-1 agree':>11}"
    )
    for row in ["open_clip"] + args.backends.split(","):
        print(
            f"{row:<12} {text[row]:>9.1f} {text[row] / text['open_clip']:>11.2f}x {zero[row][0]:>16.2f} "
            f"{zero[row][0] / zero['open_clip'][0]:>11.2f}x {zero[row][1]:>11.2f}"
        )


if __name__ == "__main__":
    main()
