"""Figures laid out like the paper's (Fig. 6/7/10/11), written as PNGs with matplotlib's Agg backend."""

from __future__ import annotations

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str) -> str:
    from keras_vit.utils import atomic

    try:
        return atomic.write_file(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight"))
    finally:
        _pyplot().close(fig)


def plot_attention_rollout(image01: np.ndarray, rollout: np.ndarray, path: str) -> str:
    """Input | attention map | image weighted by the map (Fig. 6)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(9, 3.2))
    axes[0].imshow(np.clip(image01, 0, 1))
    axes[0].set_title("input")
    axes[1].imshow(rollout, cmap="inferno", vmin=0, vmax=1)
    axes[1].set_title("attention rollout")
    axes[2].imshow(np.clip(image01 * rollout[..., None], 0, 1))
    axes[2].set_title("attended")
    for ax in axes:
        ax.axis("off")
    return _save(fig, path)


def plot_attention_distance(distance: np.ndarray, path: str) -> str:
    """Mean attention distance of every head against network depth (Fig. 7 right)."""
    plt = _pyplot()
    layers, heads = distance.shape
    fig, ax = plt.subplots(figsize=(5, 4))
    for h in range(heads):
        ax.scatter(np.arange(layers) + 1, distance[:, h], s=14, label=f"head {h + 1}")
    ax.set_xlabel("network depth (layer)")
    ax.set_ylabel("mean attention distance (pixels)")
    ax.set_xlim(0.5, layers + 0.5)
    ax.set_ylim(bottom=0)
    if heads <= 16:
        ax.legend(fontsize=6, ncol=2, loc="lower right")
    return _save(fig, path)


def plot_position_similarity(similarity: np.ndarray, path: str) -> str:
    """For every patch, the cosine similarity of its position embedding with all others (Fig. 7 centre)."""
    plt = _pyplot()
    gh, gw = similarity.shape[:2]
    fig, axes = plt.subplots(gh, gw, figsize=(gw * 0.7 + 0.8, gh * 0.7), squeeze=False)
    for r in range(gh):
        for c in range(gw):
            im = axes[r, c].imshow(similarity[r, c], cmap="viridis", vmin=-1, vmax=1)
            axes[r, c].set_xticks([])
            axes[r, c].set_yticks([])
    fig.supxlabel("input patch column")
    fig.supylabel("input patch row")
    fig.colorbar(im, ax=axes, shrink=0.6, label="cosine similarity")
    return _save(fig, path)


def plot_filter_components(components: np.ndarray, path: str, columns: int = 7) -> str:
    """The principal components of the RGB embedding filters, each rescaled to [0, 1] (Fig. 7 left)."""
    plt = _pyplot()
    n = components.shape[0]
    rows = int(np.ceil(n / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(columns * 0.9, rows * 0.9), squeeze=False)
    for i, ax in enumerate(axes.ravel()):
        ax.axis("off")
        if i < n:
            c = components[i]
            ax.imshow((c - c.min()) / max(c.max() - c.min(), 1e-12), interpolation="nearest")
    fig.suptitle("RGB embedding filters (first principal components)")
    return _save(fig, path)
