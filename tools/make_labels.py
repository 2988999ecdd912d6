"""Writes the ImageNet label sets that ship inside keras_vit (`keras_vit/data/imagenet1k.tsv`, `imagenet21k.tsv`).

Source: the class lists timm distributes in `timm/data/_info/` (timm 1.0.31, Apache-2.0):
- `imagenet_synsets.txt`: the 1,000 ILSVRC-2012 WordNet ids in the class order every ImageNet-1k head uses;
- `imagenet21k_goog_synsets.txt`: the 21,843 ids of ImageNet-21k ("fall11") in Google's order, the order of the
  original ViT ImageNet-21k heads;
- `imagenet_synset_to_lemma.txt`: WordNet's lemmas of each id ("n01440764<TAB>tench, Tinca tinca").

Each output line is "<wordnet id><TAB><lemmas>"; the first lemma is the class's display name. Run:

    pip download --no-deps timm==1.0.31 && unzip timm-1.0.31-*.whl 'timm/data/_info/*'
    python tools/make_labels.py timm/data/_info
"""

from __future__ import annotations

import argparse
import os

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "keras_vit", "data")
SETS = {"imagenet1k.tsv": ("imagenet_synsets.txt", 1000), "imagenet21k.tsv": ("imagenet21k_goog_synsets.txt", 21843)}


def _lines(path: str) -> list:
    with open(path) as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("info_dir", help="timm's data/_info directory")
    args = p.parse_args(argv)
    lemmas = dict(line.split("\t", 1) for line in _lines(os.path.join(args.info_dir, "imagenet_synset_to_lemma.txt")))
    os.makedirs(OUT, exist_ok=True)
    for out, (source, count) in SETS.items():
        ids = _lines(os.path.join(args.info_dir, source))
        if len(ids) != count or len(set(ids)) != count:
            raise SystemExit(f"{source}: {len(ids)} ids ({len(set(ids))} distinct), expected {count}")
        missing = [i for i in ids if i not in lemmas]
        if missing:
            raise SystemExit(f"{source}: no lemmas for {missing[:3]}")
        with open(os.path.join(OUT, out), "w") as f:
            f.writelines(f"{i}\t{lemmas[i]}\n" for i in ids)
        print(f"wrote {out}: {count} classes")


if __name__ == "__main__":
    main()
