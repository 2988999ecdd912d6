"""Zero-shot classification with an image-text model: each class's text embedding, averaged over prompt
templates ("a photo of a {}."), is the class's weight vector; an image is classified by its similarity to them.

The classifier weights are built as open_clip's `build_zero_shot_classifier` builds them: every template filled
with the class name, the texts encoded and L2-normalised, their mean over the templates normalised again. Template
sets shipped (`keras_vit/data/prompt_templates.json`, written from open_clip by tools/make_prompt_templates.py):
"openai_imagenet" (OpenAI's 80 ImageNet templates) and "simple_imagenet" (7).
"""

from __future__ import annotations

import functools
import json
import os
from typing import Callable, List, Sequence, Union

import numpy as np
from keras import ops

TEMPLATE_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "prompt_templates.json")


@functools.lru_cache(maxsize=1)
def template_sets() -> dict:
    """{name: [template, ...]} of the shipped prompt-template sets."""
    with open(TEMPLATE_FILE) as f:
        return json.load(f)


def prompt_templates(templates: Union[str, Sequence[str]] = "openai_imagenet") -> List[str]:
    """A shipped set by name, or the user's templates (each a `str.format` pattern with one "{}")."""
    if isinstance(templates, str) and "{}" not in templates:
        sets = template_sets()
        if templates not in sets:
            raise ValueError(f"unknown template set {templates!r}; shipped: {sorted(sets)}, or give templates.")
        return list(sets[templates])
    out = [templates] if isinstance(templates, str) else list(templates)
    bad = [t for t in out if not isinstance(t, str) or t.count("{}") != 1]
    if not out or bad:
        raise ValueError(f"each template must hold '{{}}' once, where the class name goes; got {bad[:2] or out}.")
    return out


def zero_shot_weights(
    model,
    tokenizer: Callable,
    class_names: Sequence[str],
    templates: Union[str, Sequence[str]] = "openai_imagenet",
    classes_per_batch: int = 10,
) -> np.ndarray:
    """(embed_dim, classes) float32: each class's mean normalised text embedding over the templates, normalised.

    `model`: an `ImageTextModel`; `tokenizer`: texts -> token ids (a `keras_vit.ClipTokenizer` or the model's own).
    """
    names = list(class_names)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise ValueError(f"class_names must be non-empty strings, got {names[:3]}.")
    patterns = prompt_templates(templates)
    columns = []
    for start in range(0, len(names), max(1, int(classes_per_batch))):
        batch = names[start : start + classes_per_batch]
        ids = tokenizer([p.format(name) for name in batch for p in patterns])
        embedded = ops.convert_to_numpy(model.encode_text(ids, normalize=True)).astype("float32")
        mean = embedded.reshape(len(batch), len(patterns), -1).mean(axis=1)
        columns.append(mean / np.linalg.norm(mean, axis=1, keepdims=True))
    return np.concatenate(columns).T


class ZeroShotClassifier:
    """Images -> class scores from class names alone.

    `classifier(images)` gives the (images, classes) logits `exp(logit_scale) * cos(image, class)` (+ the model's
    logit bias): softmax over classes gives CLIP's probabilities, a sigmoid SigLIP's. `predict(images, top=5)`
    names the best classes.
    """

    def __init__(self, model, tokenizer: Callable, class_names: Sequence[str], templates="openai_imagenet"):
        self.model, self.class_names = model, list(class_names)
        self.weights = zero_shot_weights(model, tokenizer, self.class_names, templates)

    def __call__(self, images) -> np.ndarray:
        embedded = self.model.encode_image(images, normalize=True)
        return ops.convert_to_numpy(self.model.similarity(embedded, ops.transpose(self.weights)))

    def predict(self, images, top: int = 5) -> List[List[tuple]]:
        """[(class name, softmax probability), ...] best first, per image."""
        logits = self(images)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        order = np.argsort(-p, axis=1)[:, :top]
        return [[(self.class_names[j], float(p[i, j])) for j in row] for i, row in enumerate(order)]
