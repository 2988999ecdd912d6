"""Writes keras_vit/data/open_clip_pretrained.json: open_clip's pretrained models by name and tag
(`open_clip.list_pretrained()`), the hub repository each tag is published in (`get_pretrained_cfg(...)["hf_hub"]`)
and whether its weights were trained with QuickGELU (`...["quick_gelu"]`), and each named model's config (`open_clip.get_model_config`), from which keras_vit says which it builds.

    PYTHONPATH=tools/torchvision_stub python tools/make_open_clip_names.py   (open-clip-torch installed: make bench-setup)
"""

import json
import os

import open_clip

OUT = os.path.join(os.path.dirname(__file__), "..", "keras_vit", "data", "open_clip_pretrained.json")


def main() -> None:
    pretrained, models = [], {}
    for name, tag in open_clip.list_pretrained():
        repo = (open_clip.get_pretrained_cfg(name, tag).get("hf_hub") or "").strip("/")
        if not repo:
            continue  # published as a URL only: not a hub repository
        # the weights were trained with QuickGELU though the model's config may not say so (open_clip then warns)
        quick_gelu = bool(open_clip.get_pretrained_cfg(name, tag).get("quick_gelu", False))
        pretrained.append([name, tag, repo, quick_gelu])
        models.setdefault(name, open_clip.get_model_config(name))
    with open(OUT, "w") as f:
        json.dump({"open_clip": open_clip.__version__, "models": models, "pretrained": pretrained}, f, indent=None)
        f.write("\n")
    print(len(pretrained), "pretrained tags of", len(models), "models")


if __name__ == "__main__":
    main()
