"""timm's `ParallelThingsBlock` (`vit_*_18x2_*`, keras_vit's `parallel_branches`): branch j's attention
(`attns.<j>.norm`, `.attn`, `.ls`) and MLP (`ffns.<j>.norm`, `.mlp`, `.ls`) are a plain block's parts under other
names (`THINGS_NAMES`); ours are an `EncoderBlock` each under `branch_<j>/`. Read and written as plain blocks
(`keras_vit.weights.timm.block`) and renamed.
"""

from __future__ import annotations

from keras_vit.weights.keys import Params, _Reader
from keras_vit.weights.timm.block import TimmLayout, read_block, write_block


def in_timm(sd: Params, t: str) -> bool:
    """Whether timm's block under `t` (`blocks.<i>.`) is a ParallelThingsBlock."""
    return t + "attns.0.norm.weight" in sd


def in_official(params: Params, o: str) -> bool:
    """Whether our block under `o` (`Transformer/encoderblock_<i>/`) is written as a ParallelThingsBlock."""
    return o + "branch_0/LayerNorm_0/scale" in params


# timm's ParallelThingsBlock: branch j's parts (`attns.<j>.*`, `ffns.<j>.*`) and a plain block's names for them
THINGS_NAMES = (
    ("attns.{j}.norm.", "norm1."),
    ("attns.{j}.attn.", "attn."),
    ("attns.{j}.ls.", "ls1."),
    ("ffns.{j}.norm.", "norm2."),
    ("ffns.{j}.mlp.", "mlp."),
    ("ffns.{j}.ls.", "ls2."),
)


class _Renamed:
    """A block's tensors under other names (`names`: ours -> theirs), read through the state dict's reader `g`
    so that what is taken is still counted."""

    def __init__(self, g: _Reader, names: dict):
        self.g, self.names, self.source = g, names, g.source
        self.sd = {ours: g.sd[theirs] for ours, theirs in names.items()}

    def __call__(self, key: str):
        return self.g(self.names[key]) if key in self.names else self.g(key)


def read(g: _Reader, i: int, num_heads: int) -> Params:
    """timm's ParallelThingsBlock: each branch j read as a plain block (`THINGS_NAMES`), under `branch_<j>/`."""
    t, o = f"blocks.{i}.", f"Transformer/encoderblock_{i}/"
    branches = sorted({int(k[len(t) + len("attns.") :].split(".")[0]) for k in g.sd if k.startswith(t + "attns.")})
    p: Params = {}
    for j in branches:
        names = {}
        for theirs, ours in THINGS_NAMES:
            theirs = t + theirs.format(j=j)
            names.update({t + ours + k[len(theirs) :]: k for k in g.sd if k.startswith(theirs)})
        p.update({f"{o}branch_{j}/{k[len(o) :]}": v for k, v in read_block(_Renamed(g, names), i, num_heads).items()})
    return p


def write(params: Params, sd: Params, i: int, layout: TimmLayout) -> None:
    """timm's ParallelThingsBlock: each `branch_<j>/` written as a plain block, then renamed to `attns.<j>.*` /
    `ffns.<j>.*` (the reader's `THINGS_NAMES`)."""
    t, o = f"blocks.{i}.", f"Transformer/encoderblock_{i}/"
    j = 0
    while f"{o}branch_{j}/LayerNorm_0/scale" in params:
        branch = f"{o}branch_{j}/"
        plain: Params = {}
        write_block({o + k[len(branch) :]: v for k, v in params.items() if k.startswith(branch)}, plain, i, layout)
        for key, value in plain.items():
            theirs = next(
                (t + b.format(j=j) + key[len(t + a) :] for b, a in THINGS_NAMES if key.startswith(t + a)), None
            )
            if theirs is None:
                raise ValueError(
                    f"parallel branch {j} of block {i} has {key!r}, which timm's ParallelThingsBlock lacks."
                )
            sd[theirs] = value
        j += 1
