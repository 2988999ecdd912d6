"""Linear few-shot evaluation (paper §4.1; big_vision's closed-form least-squares protocol).

A representation is scored by how well a ridge regression on `shots` examples per
class predicts the labels of a test set: per seed, each class's training indices are
permuted with `numpy.random.default_rng(seed)` and the first `shots` kept; features
are whitened with the selected examples' mean and std (+1e-5), a constant 100.0
feature is appended (a nearly unregularised bias), targets are 2·onehot − 1, and
W = (XᵀX + λI)⁻¹XᵀY (or Xᵀ(XXᵀ + λI)⁻¹Y when there are fewer rows than columns),
solved in float64 with λ = 2¹⁰. Pure numpy + keras: no TensorFlow needed.
"""

from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from keras_vit.utils import validate

BIAS_FEATURE = 100.0
WHITEN_EPSILON = 1e-5
DEFAULT_L2_REG = 2.0**10


def _check_pair(features, labels, what: str) -> Tuple[np.ndarray, np.ndarray]:
    features = np.asarray(features)
    labels = np.asarray(labels)
    if features.ndim != 2 or features.shape[0] == 0 or features.shape[1] == 0:
        raise ValueError(f"{what}_features must be a non-empty (examples, dims) array, got shape {features.shape}.")
    if labels.ndim != 1 or labels.shape[0] != features.shape[0]:
        raise ValueError(
            f"{what}_labels must be a vector with one label per row of {what}_features: "
            f"got {labels.shape} labels for {features.shape[0]} examples."
        )
    if not np.all(np.isfinite(features)):
        bad = int(np.sum(~np.isfinite(features).all(axis=1)))
        raise ValueError(f"{what}_features contain NaN or inf values ({bad} rows affected).")
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.all(np.equal(np.mod(labels, 1), 0)):
            raise ValueError(f"{what}_labels must be integer class ids, got dtype {labels.dtype}.")
        labels = labels.astype(np.int64)
    return features, labels


def select_shots(labels: np.ndarray, shots: int, seed: int, num_classes: int) -> np.ndarray:
    """Indices of the first `shots` examples of each class after a per-class permutation."""
    rng = np.random.default_rng(seed)
    picked = []
    for c in range(num_classes):
        members = np.flatnonzero(labels == c)
        if members.size < shots:
            raise ValueError(f"Class {c} has only {members.size} training example(s), fewer than shots={shots}.")
        picked.append(rng.permutation(members)[:shots])
    return np.concatenate(picked)


def fit_linear_probe(features: np.ndarray, labels: np.ndarray, num_classes: int, l2_reg: float = DEFAULT_L2_REG):
    """Closed-form ridge fit on whitened features + bias; returns (W, mean, std)."""
    x = np.asarray(features, dtype=np.float64)
    mean, std = x.mean(axis=0), x.std(axis=0) + WHITEN_EPSILON
    x = _augment((x - mean) / std)
    y = 2.0 * np.eye(num_classes)[labels] - 1.0
    n, d = x.shape
    if n >= d:  # primal: (XᵀX + λI) W = XᵀY
        w = np.linalg.solve(x.T @ x + l2_reg * np.eye(d), x.T @ y)
    else:  # dual: W = Xᵀ (XXᵀ + λI)⁻¹ Y
        w = x.T @ np.linalg.solve(x @ x.T + l2_reg * np.eye(n), y)
    return w, mean, std


def _augment(x: np.ndarray) -> np.ndarray:
    return np.concatenate([x, np.full((x.shape[0], 1), BIAS_FEATURE)], axis=1)


def predict_linear_probe(w: np.ndarray, mean: np.ndarray, std: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Class predictions of a probe from `fit_linear_probe`."""
    x = _augment((np.asarray(features, dtype=np.float64) - mean) / std)
    return np.argmax(x @ w, axis=1)


def linear_fewshot_accuracy(
    train_features,
    train_labels,
    test_features,
    test_labels,
    shots: int,
    seed: int,
    l2_reg: float = DEFAULT_L2_REG,
    num_classes: Optional[int] = None,
) -> float:
    """Accuracy of a `shots`-per-class linear probe (the paper's few-shot protocol).

    Args:
      train_features, train_labels: the pool the few-shot examples are drawn from.
      test_features, test_labels: the evaluation set.
      shots: examples per class. seed: selects the examples (numpy default_rng).
      l2_reg: ridge penalty (2**10 as in the paper's code).
      num_classes: K; labels must lie in [0, K). Default: 1 + the largest training label.
    """
    x, y = _check_pair(train_features, train_labels, "train")
    xt, yt = _check_pair(test_features, test_labels, "test")
    if x.shape[1] != xt.shape[1]:
        raise ValueError(f"train_features have {x.shape[1]} dims but test_features have {xt.shape[1]}.")
    shots = validate.integer("shots", shots)
    validate.integer("seed", seed, minimum=0)
    l2_reg = validate.number("l2_reg", l2_reg, positive=True)
    k = validate.integer("num_classes", num_classes) if num_classes is not None else int(y.max()) + 1
    for what, labels in (("train", y), ("test", yt)):
        if labels.min() < 0 or labels.max() >= k:
            raise ValueError(f"{what}_labels must lie in [0, {k}); found values from {labels.min()} to {labels.max()}.")
    idx = select_shots(y, shots, seed, k)
    w, mean, std = fit_linear_probe(x[idx], y[idx], k, l2_reg)
    return float(np.mean(predict_linear_probe(w, mean, std, xt) == yt))


def feature_extractor(model_or_fn) -> Callable[[np.ndarray], np.ndarray]:
    """A function images -> pre-logits features, from a keras_vit model or any callable."""
    import keras

    if not isinstance(model_or_fn, keras.Model):
        if not callable(model_or_fn):
            raise ValueError("model_or_feature_fn must be a keras.Model or a callable images -> features.")
        return lambda images: np.asarray(keras.ops.convert_to_numpy(model_or_fn(images)))
    from keras_vit.vit.model import ensure_vit

    model = ensure_vit(model_or_fn, "pass a feature function images -> features instead")
    if model.pooling == "sequence" and not model.include_top:
        raise ValueError(
            f"Model {model.name!r} outputs token sequences (pooling='sequence'); a linear probe "
            "needs one vector per image."
        )
    # the pre-logits, as the paper's probe uses; a backbone built with pooling="avg"/"max"/"token" gives that
    features = model.feature_model(model.pooling if not model.include_top else None)
    return lambda images: features.predict(images, verbose=0, batch_size=64)


class FewShotEvaluator:
    """Linear few-shot accuracy of a model on several datasets, mean ± std over seeds.

    Args:
      model_or_feature_fn: a keras_vit model (cut at its pre-logits) or a callable images -> features.
      datasets: name -> (train_images, train_labels, test_images, test_labels).
      shots: the shot counts to report. seeds: how many seeds (0..seeds-1) to average.
    """

    def __init__(
        self,
        model_or_feature_fn,
        datasets: Mapping[str, Sequence],
        shots: Sequence[int] = (1, 5, 10, 25),
        seeds: int = 3,
        l2_reg: float = DEFAULT_L2_REG,
    ):
        if not datasets:
            raise ValueError("datasets must name at least one dataset.")
        for name, parts in datasets.items():
            if len(parts) != 4:
                raise ValueError(f"datasets[{name!r}] must be (train_images, train_labels, test_images, test_labels).")
        self.shots = validate.integers("shots", list(shots) if not isinstance(shots, (str, bytes)) else shots)
        self.seeds = validate.integer("seeds", seeds)
        self.l2_reg = validate.number("l2_reg", l2_reg, positive=True)
        self.feature_fn = feature_extractor(model_or_feature_fn)
        self.datasets = dict(datasets)

    def set_feature_fn(self, model_or_feature_fn) -> None:
        self.feature_fn = feature_extractor(model_or_feature_fn)

    def features(self, name: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Extracts the dataset's features once per call (the model may have changed since)."""
        train_x, train_y, test_x, test_y = self.datasets[name]
        return (
            self.feature_fn(np.asarray(train_x)),
            np.asarray(train_y),
            self.feature_fn(np.asarray(test_x)),
            np.asarray(test_y),
        )

    def evaluate(self) -> Dict[str, Tuple[float, float]]:
        """{"<dataset>_<shots>shot": (mean accuracy, std over seeds)}."""
        results = {}
        for name in self.datasets:
            x, y, xt, yt = self.features(name)
            for shots in self.shots:
                accs = [linear_fewshot_accuracy(x, y, xt, yt, shots, seed, self.l2_reg) for seed in range(self.seeds)]
                results[f"{name}_{shots}shot"] = (float(np.mean(accs)), float(np.std(accs)))
        return results

    @staticmethod
    def format(results: Mapping[str, Tuple[float, float]]) -> str:
        return "\n".join(f"{k:<28} {100 * m:6.2f} ± {100 * s:4.2f} %" for k, (m, s) in results.items())
