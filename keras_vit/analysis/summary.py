"""Model-table facts: parameters and forward FLOPs, and `python -m keras_vit.analysis.summary`.

FLOPs are counted analytically (2 per multiply-add) from the built layers, so the
bench scripts can turn images/s into achieved GFLOP/s.
"""

from __future__ import annotations

import argparse
from typing import Optional

import keras

from keras_vit.vit import table
from keras_vit.applications import create_model
from keras_vit.nn.resnet import StdConv2D


def _conv_flops(conv: StdConv2D, input_shape) -> tuple:
    out = conv.compute_output_shape(input_shape)
    kh, kw = conv.kernel_size
    return 2 * out[1] * out[2] * kh * kw * input_shape[-1] * out[-1], out


def forward_flops(model: keras.Model) -> int:
    """Forward-pass FLOPs for one image (2 x multiply-adds of convs, matmuls, attention)."""
    shape = (None, *model.image_size, model.channels)
    total = 0
    stem = model.stem
    if stem is not None and hasattr(stem, "stem_layers"):  # a convolutional stem (MobileCLIP)
        for conv in stem.convs:
            f, shape = _conv_flops(conv, shape)
            total += f
    elif stem is not None:
        f, shape = _conv_flops(stem.conv_root, shape)
        total += f
        shape = stem.pool.compute_output_shape(shape)
        for unit in stem.units:
            if unit.conv_proj is not None:
                total += _conv_flops(unit.conv_proj, shape)[0]
            s = shape
            for conv in (unit.conv1, unit.conv2, unit.conv3):
                f, s = _conv_flops(conv, s)
                total += f
            shape = s
    c = model.vit_config
    p, d = model.patch_embedding.patch_size, c.hidden_size  # the embedding's kernel (after any stem)
    total += 2 * model.grid_size[0] * model.grid_size[1] * p * p * shape[-1] * d
    tokens = model.num_tokens
    per_block = 2 * tokens * d * 3 * d + 4 * tokens * tokens * d + 2 * tokens * d * d
    per_block += 4 * tokens * d * c.mlp_dim
    total += c.num_layers * per_block
    for dense in (model.pre_logits, model.head):
        if dense is not None:
            total += 2 * dense.kernel.shape[0] * dense.kernel.shape[1]
    return int(total)


def model_table(image_size: int = 224, names: Optional[list] = None) -> list:
    """Rows (name, parameters, GFLOPs, output shape) for the models of the table."""
    rows = []
    for name in names or table.list_models():
        model = create_model(name, input_shape=(image_size, image_size, 3))
        rows.append((name, model.count_params(), forward_flops(model) / 1e9, tuple(model.output_shape)))
        del model
        keras.backend.clear_session()
    return rows


def format_table(rows: list, image_size: int = 224) -> str:
    lines = [f"{'model':<14} {'parameters':>13} {f'GFLOPs@{image_size}':>11}  output", "-" * 50]
    for name, params, gflops, shape in rows:
        lines.append(f"{name:<14} {params:>13,} {gflops:>11.1f}  {shape}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Parameters and FLOPs of the keras_vit model table.")
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n] or None
    print(format_table(model_table(args.image_size, names), args.image_size))


if __name__ == "__main__":
    main()
