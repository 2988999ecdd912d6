"""Full-size parity: ViT-B/16 at 224 from a timm-exported random checkpoint vs keras_vit.

    .venv/bin/python bench/timm_parity.py [--out DIR]

Prints the max abs logit difference on the last line. Needs torch + timm (the torchvision
stub in tools/ stands in for torchvision).
"""

import argparse
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default="/tmp/timm_full")
    args = p.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tools", "torchvision_stub"))
    subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "make_timm_fixture.py"), "--full-b16", "--full-out", args.out],
        check=True,
        env=env,
    )
    import keras_vit

    d = os.path.join(args.out, "vit_b16_224")
    model = keras_vit.ViT_B16(classifier_activation=None, weights=os.path.join(d, "weights.npz"))
    x, ref = np.load(os.path.join(d, "input.npy")), np.load(os.path.join(d, "logits.npy"))
    diff = float(np.abs(model.predict(x, verbose=0) - ref).max())
    print(
        f"ViT-B/16@224 keras_vit vs timm (same .npz), logits range {ref.min():.2f}..{ref.max():.2f}, "
        f"max abs diff {diff:.3e}"
    )


if __name__ == "__main__":
    main()
