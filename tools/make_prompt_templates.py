"""Writes keras_vit/data/prompt_templates.json: the zero-shot prompt templates open_clip ships
(`open_clip.zero_shot_metadata`: OpenAI's 80 ImageNet templates from the CLIP paper's notebook, and the 7 "simple"
ones CLIP's authors also published), each as a `str.format` pattern with "{}" for the class name.

    python tools/make_prompt_templates.py   (with open_clip installed: pip install --no-deps open-clip-torch ftfy)
"""

import json
import os

from open_clip import zero_shot_metadata as meta

OUT = os.path.join(os.path.dirname(__file__), "..", "keras_vit", "data", "prompt_templates.json")


def main() -> None:
    marker = "\x00"
    sets = {
        "openai_imagenet": [t(marker).replace(marker, "{}") for t in meta.OPENAI_IMAGENET_TEMPLATES],
        "simple_imagenet": [t(marker).replace(marker, "{}") for t in meta.SIMPLE_IMAGENET_TEMPLATES],
    }
    with open(OUT, "w") as f:
        json.dump(sets, f, indent=1)
    print({k: len(v) for k, v in sets.items()})


if __name__ == "__main__":
    main()
