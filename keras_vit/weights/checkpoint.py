"""`Checkpoint`: a weight source read once, with what it states and what had to be assumed. `keras_vit.weights.load`
reads every kind of source into one (`read_checkpoint`) and builds or loads from it."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Dict, Optional

import numpy as np

from keras_vit.vit.data_config import DataConfig
from keras_vit.vit.model import VisionTransformer
from keras_vit.vit.variant import Variant
from keras_vit.weights import official, releases


@dataclasses.dataclass
class Checkpoint:
    """A weight source read once: what it is, its arrays under the official keys, what it states and what had
    to be assumed.

    Attributes:
      source: the path or name as given; `path`: the local file or directory read (a release's download).
      kind: "release", "npz", "keras", "weights_h5", "safetensors", "timm_dir" or "transformers".
      params: {official key: float array}.
      implied: `VisionTransformer` keywords the source states beyond its shapes (a timm repository's
        architecture and `model_args`, a transformers config's heads, activation, epsilon and image size; a
        `.keras` file's whole config). Only these are checked against a model the weights go into.
      assumed: keywords the source does not state, taken from its framework's own defaults (a bare timm state
        dict: timm's `VisionTransformer` defaults); `load_model` says them once in a warning naming the
        keyword that overrides each.
      old_grid: the position grid the arrays were trained at, where the source states it (a `.keras` file, a
        config's image size); None where the file does not say.
      model: the model a `.keras` or `.weights.h5` source was read through (None for the others).
      release: the release a release name resolved to.
      data_config: the evaluation preprocessing the source states (`keras_vit.weights.load.data_config`), set
        by `read_source`; None where it says nothing beyond the original code's.
    """

    source: str
    kind: str
    path: str
    params: Dict[str, np.ndarray]
    implied: dict = dataclasses.field(default_factory=dict)
    assumed: dict = dataclasses.field(default_factory=dict)
    old_grid: Optional[tuple] = None
    model: Optional[VisionTransformer] = None
    release: Optional[releases.Release] = None
    data_config: Optional[DataConfig] = None

    def architecture(self, overrides: Optional[dict] = None) -> dict:
        """`VisionTransformer` keywords that rebuild the source's model (read off the arrays' shapes where the
        source keeps no config); `overrides` are the caller's keywords, which also settle what was assumed."""
        if self.model is not None:
            return {k: v for k, v in self.model.get_config().items() if k not in ("weights", "name")}
        facts = {**self.assumed, **self.implied, **(overrides or {})}
        if self.implied.get("position_resampling") is not None or self.implied.get("convolutional_stem"):
            # NaFlex, MobileCLIP's stem: its repository states the whole model
            arch = {}
        else:
            arch = official.architecture_from_npz(
                self.params,
                self.path,
                prefix_position_embedding=facts.get("prefix_position_embedding", True),
                grid=self.old_grid,  # a grid the source states sets its size
            )
        arch.update(self.assumed)
        arch.update(self.implied)
        if any("/MlpBlock_3/Dense_packed/" in k for k in self.params) and not {**arch, **(overrides or {})}.get(
            "swiglu"
        ):
            raise ValueError(
                f"{self.source!r} holds a packed gated MLP (timm's GluMlp) whose activation the file does "
                "not state: build it by its timm architecture's name (create_model('<timm name>', "
                "weights=...)) or pass swiglu=True if it is a SwiGLU. Nothing was loaded."
            )
        return arch

    def posemb_included(self, model: Optional[VisionTransformer] = None) -> bool:
        """Whether the position table holds the prefix tokens' rows: the source's statement, else the model's
        own layout where the caller named the architecture (a bare timm file into a timm-named model), else the
        layout's default (the original code's and timm's: it does)."""
        if self.model is not None:
            return bool(self.model.variant.prefix_position_embedding)
        if "prefix_position_embedding" in self.implied:
            return bool(self.implied["prefix_position_embedding"])
        if model is not None and self.kind == "safetensors":
            return bool(model.variant.prefix_position_embedding)
        return True

    def settled_by(self, overrides: dict) -> tuple:
        """The assumed facts that `overrides` settle: each one it names, and with `variant=` (a record, its dict or
        an architecture's name: a whole family statement) every family field."""
        fields = set(Variant.fields()) if overrides.get("variant") is not None else set()
        return tuple(k for k in self.assumed if k in overrides or k in fields)

    def warn_assumptions(self, overrides: dict) -> None:
        """One warning naming each fact taken from the framework's defaults that `overrides` did not settle."""
        settled = self.settled_by(overrides)
        told = {k: v for k, v in self.assumed.items() if k not in settled}
        if told:
            values = ", ".join(f"{k}={v!r}" for k, v in told.items())
            warnings.warn(
                f"{self.source!r} does not state {', '.join(told)}: keras_vit takes timm's defaults "
                f"({values}). Pass those keywords to load_model, or build by timm name "
                "(keras_vit.create_model('<timm name>', weights=...)), if the file was trained otherwise.",
                stacklevel=3,
            )
