"""Contrastive image-text training in the recipes: LiT ("Locked-image Tuning", Zhai et al., CVPR 2022) and full
two-tower tuning, from image-caption pairs (`recipes.captions`) or from a labelled image dataset whose captions
are made from its class names.

The run's image model (pre-trained, from `config.init_weights`) becomes the image tower: its pre-logits features
are the image embedding, locked (`config.contrastive.lock_image`, LiT's recipe: the tower runs in inference mode
and nothing in it trains) or tuned with the rest. A new text tower (`keras_vit.TextTransformer`, CLIP's BPE
vocabulary shipped with keras_vit) projects into the image embedding's width, and the two are trained with CLIP's
softmax loss or SigLIP's sigmoid loss (`config.contrastive.loss`) and a learned temperature (and bias).

Captions of pairs: each image's own, its only positive in the batch (open_clip's targets); the evaluation is
retrieval over the eval split's pairs (recall@1/5/10 both ways, `keras_vit.analysis.retrieval`).

Captions of a labelled dataset: each class's word (`config.contrastive.class_words`, else the dataset's class names) in each of
`config.contrastive.templates`; an example's template is chosen by its position in the batch (batches are
shuffled, so the choice is independent of the image, and a resumed run sees the captions an uninterrupted one
would). Two examples of one class are both matches of each other's caption: a caption made from a class name
describes every image of that class (`keras_vit.contrastive_losses`' positives).

The evaluation is zero-shot: each class's text embedding averaged over the templates, every held-out image
classified by its nearest class (`keras_vit.ZeroShotClassifier`); no label is read at test time but to score.
The run saves the two-tower `keras_vit.ImageTextModel` as `model.keras` (the image tower a `VisionTransformer`
without its head, the tokenizer recorded), which `keras.models.load_model` reads back.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import keras
import numpy as np
from keras import ops

from keras_vit.analysis.retrieval import retrieval_metrics
from recipes import caption_ids

from keras_vit.vit.clip_tokenizer import VOCABULARY, ClipTokenizer
from keras_vit.vit.contrastive import contrastive_losses
from keras_vit.vit.image_text import ImageTextModel
from keras_vit.vit.model import VisionTransformer
from keras_vit.vit.text_model import TextTransformer
from keras_vit.vit.text_tower import TextTower
from keras_vit.vit.zero_shot import ZeroShotClassifier, prompt_templates

LOSS_KINDS = {"clip": "clip", "siglip": "sigmoid"}
TOKENIZER = {"kind": "clip", "clean": "lower"}  # CLIP's BPE as open_clip cleans it (shipped with keras_vit)
LARGEST_CONSTANT = (
    16 * 2**20
)  # bytes of caption ids kept in the input pipeline's graph; a larger table is read on the host


def class_words(cfg, class_names: Sequence[str], num_classes: int = 0) -> Tuple[str, ...]:
    """The word each class is captioned with: `cfg.class_words` (comma-separated, one per class) or the dataset's
    class names; refused when their count is not the dataset's (`num_classes`, or its class names')."""
    words = tuple(w.strip() for w in cfg.class_words.split(",")) if cfg.class_words else tuple(class_names)
    if not words or not all(words):
        raise ValueError(
            "config.contrastive needs a word per class: set --config.contrastive.class_words=word,word,... "
            "(the dataset names no classes)."
        )
    classes = num_classes or len(class_names)
    if classes and len(words) != classes:
        raise ValueError(
            f"config.contrastive.class_words has {len(words)} words, but the dataset has {classes} classes."
        )
    return words


def tokenizer(cfg) -> ClipTokenizer:
    """The text tower's tokenizer: CLIP's BPE, to the run's context length."""
    return ClipTokenizer(cfg.text.context_length, clean=TOKENIZER["clean"])


def tokenize(cfg, captions: Sequence[str], directory: Optional[str] = None) -> np.ndarray:
    """(len(captions), context length) int32 ids of each caption (a caption dataset's table, row i example i's);
    `directory`: the run's workdir, where they are kept for its later starts (`recipes.caption_ids`)."""
    settings = dict(TOKENIZER, context_length=int(cfg.text.context_length))
    return caption_ids.cached(lambda texts: tokenizer(cfg)(list(texts)), captions, settings, VOCABULARY, directory)


def caption_table(cfg, words: Sequence[str]) -> np.ndarray:
    """(classes * templates, context length) int32: row `c * templates + t` is class c's caption in template t."""
    templates = prompt_templates(list(cfg.templates))
    return tokenizer(cfg)([t.format(w) for w in words for t in templates]).astype("int32")


def with_captions(dataset, table: np.ndarray, templates: int, first: int = 0):
    """A tf.data stream of (images, labels) batches -> ((images, caption ids), labels). `first`: the position of
    the batch's first row in the global batch (an input pipeline that reads a part of each global batch), so that
    an example's template is the one it gets on one device."""
    import tensorflow as tf

    table = np.ascontiguousarray(table, dtype="int32")
    if table.nbytes <= LARGEST_CONSTANT:
        constant = tf.constant(table)
        lookup = lambda rows: tf.gather(constant, rows)  # noqa: E731
    else:  # read on the host: a constant is stored in the dataset's graph (protocol buffers stop at 2 GB)
        lookup = lambda rows: tf.ensure_shape(  # noqa: E731
            tf.numpy_function(lambda r: table[r], [rows], tf.int32, stateful=False), [None, table.shape[1]]
        )

    def add(images, labels):
        position = (first + tf.range(tf.shape(labels)[0], dtype=tf.int32)) % templates
        return (images, lookup(tf.cast(labels, tf.int32) * templates + position)), labels

    return dataset.map(add, num_parallel_calls=tf.data.AUTOTUNE)


def build(model: keras.Model, cfg) -> Tuple[ImageTextModel, Callable]:
    """The two-tower network sharing `model`'s layers (its pre-logits the image embedding) and its loss
    `loss_fn(outputs, (images, ids), labels)` for either engine's train step (keras.ops only)."""
    if cfg.loss not in LOSS_KINDS:
        raise ValueError(f"config.contrastive.loss={cfg.loss!r}: one of {sorted(LOSS_KINDS)}.")
    features = model.feature_model(None)
    image = keras.Model(features.inputs[0], features.outputs[0], name="image_model")  # one tensor in, as called
    if cfg.lock_image:
        image.trainable = False
    t = cfg.text
    tower = TextTower(
        context_length=t.context_length,
        width=t.width,
        num_heads=t.num_heads,
        num_layers=t.num_layers,
        mlp_dim=t.mlp_dim,
        output_dim=int(image.output_shape[-1]),
        causal=t.causal,
        pooling="argmax",  # CLIP's end-of-text token holds the highest id of its vocabulary
    )
    sigmoid = LOSS_KINDS[cfg.loss] == "sigmoid"
    net = TrainedTowers(
        image,
        TextTransformer(tower, name="text_model"),
        logit_scale=cfg.logit_scale,
        logit_bias=cfg.logit_bias if sigmoid else None,
        tokenizer=dict(TOKENIZER),
        name=f"{model.name}_image_text",
    )

    def loss_fn(outputs, inputs, labels):
        del inputs
        images, texts = outputs
        all_images, all_texts, all_labels = across_replicas(images, texts, labels)
        logits = net.similarity(images, all_texts)  # this replica's images against every text
        # labels: a class (captions of one class match its every image) or a pair's row (its own caption only)
        positives = ops.equal(labels[:, None], all_labels[None, :])
        text_logits = None if all_images is images else net.similarity(all_images, texts)
        per_example = contrastive_losses(logits, LOSS_KINDS[cfg.loss], positives, text_logits)
        # "correct": the image's best-scoring caption in the batch is one of its matches
        best_match = ops.argmax(ops.where(positives, ops.cast(logits, "float32"), -1e30), axis=-1)
        return per_example, logits, best_match

    return net, loss_fn


class TrainedTowers(ImageTextModel):
    """The two towers as the trainer runs them: `call` gives the (normalised) image and text embeddings rather than
    their logits, so that the loss can compare each replica's images with every replica's texts; the rest is
    `ImageTextModel`'s (`standalone` saves a plain one)."""

    def call(self, inputs, training=None):
        images, token_ids = inputs
        return self.encode_image(images, training=training), self.encode_text(token_ids, training=training)


def across_replicas(images, texts, labels) -> tuple:
    """The embeddings and labels of every replica's examples, in replica order, under a tf.distribute strategy of
    several replicas (`all_gather`, whose gradient sums every replica's and keeps this one's rows): each
    replica's loss then sees the global batch's negatives, as one device does. Elsewhere (one device; JAX, whose
    step sees the global batch) the batch's own, the very tensors given."""
    if keras.backend.backend() != "tensorflow":
        return images, texts, labels
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return images, texts, labels
    all_images, all_texts = context.all_gather([images, texts], axis=0)
    return all_images, all_texts, context.all_gather(labels, axis=0)  # apart: integers carry no gradient


def standalone(net: ImageTextModel, model: keras.Model) -> ImageTextModel:
    """The trained two towers as a model of their own to save: the image tower a `VisionTransformer` of `model`'s
    architecture without its head (pre-logits out), its weights copied by path; the text tower, temperature and
    bias the trained ones."""
    config = {**model.get_config(), "include_top": False, "pooling": None, "name": "image_model"}
    image = VisionTransformer.from_config(config)
    trained = {v.path: v for v in model.weights}
    missing = [v.path for v in image.weights if v.path not in trained]
    if missing:
        raise ValueError(f"the image tower's weights {missing[:3]} are not the trained model's.")
    for v in image.weights:
        v.assign(trained[v.path])
    return ImageTextModel(
        image,
        net.text_model,
        logit_scale=float(ops.convert_to_numpy(net.logit_scale)),
        logit_bias=None if net.logit_bias is None else float(ops.convert_to_numpy(net.logit_bias)),
        tokenizer=dict(TOKENIZER),
        name="image_text_model",
    )


def zero_shot_evaluator(net: ImageTextModel, cfg, words: Sequence[str]) -> Callable:
    """`evaluate(dataset) -> accuracy`: zero-shot classification of (images, labels) batches from the class words
    and the run's templates (labels only score)."""

    def evaluate(dataset) -> float:
        classifier = ZeroShotClassifier(net, tokenizer(cfg), words, list(cfg.templates))
        correct = count = 0
        for images, labels in dataset:
            scores = classifier(np.asarray(images))
            correct += int(np.sum(scores.argmax(-1) == np.asarray(labels)))
            count += len(labels)
        if not count:
            raise ValueError("The evaluation dataset is empty.")
        return correct / count

    return evaluate


def retrieval_evaluator(
    net: ImageTextModel, cfg, captions: Sequence[str], metrics: dict, directory: Optional[str] = None
) -> Callable:
    """`evaluate(dataset) -> image-to-text recall@1` over (images, labels) batches of a caption dataset's eval
    split, label i the image of `captions[i]`; every metric of `retrieval_metrics` is put in `metrics`.
    `directory`: where the captions' ids are kept (`tokenize`)."""

    def evaluate(dataset) -> float:
        if not len(captions):
            raise ValueError("A caption dataset is evaluated on its eval split (config.dataset.eval_split).")
        images, labels = [], []
        for batch, batch_labels in dataset:
            images.append(ops.convert_to_numpy(net.encode_image(np.asarray(batch))))
            labels.append(np.asarray(batch_labels))
        ids = tokenize(cfg, captions, directory)
        texts = [ops.convert_to_numpy(net.encode_text(ids[i : i + 256])) for i in range(0, len(ids), 256)]
        image_of_text = np.empty(len(captions), dtype=np.int64)
        image_of_text[np.concatenate(labels)] = np.arange(sum(len(x) for x in labels))
        metrics.update(retrieval_metrics(np.concatenate(images), np.concatenate(texts), image_of_text))
        return metrics["image_to_text_R@1"]

    return evaluate
