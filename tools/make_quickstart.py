"""Writes examples/quickstart.ipynb from the cells below (keeps the notebook reviewable as code).

.venv/bin/python tools/make_quickstart.py
"""

import os

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CELLS = [
    new_markdown_cell("""# keras-vit quickstart

Build a Vision Transformer, load weights in the official `.npz` layout, classify a photo, look inside
(attention rollout, attention distance, position embeddings, patch-embedding filters), and export a
TF Hub module. In Colab: `!pip install keras-vision-transformer` first. This notebook runs offline on a tiny checkpoint
produced by the original JAX/Flax code (`tests/fixtures/flax_reference/vit_tiny`); with internet use a
released checkpoint instead:

```python
model = keras_vit.ViT_B16(weights="imagenet21k+imagenet2012", input_shape=(384, 384, 3),
                          classifier_activation=None)
```"""),
    new_code_cell("""import json, os, tempfile
import numpy as np
import keras, keras_vit
from keras_vit.analysis import inspect
from IPython.display import Image, display

root = "." if os.path.exists("tests/fixtures") else ".."   # repo root or examples/
fixture = os.path.join(root, "tests", "fixtures", "flax_reference", "vit_tiny")
cfg = json.load(open(os.path.join(fixture, "config.json")))
print({k: cfg[k] for k in ("patches", "hidden_size", "mlp_dim", "num_heads", "num_layers", "image_size")})"""),
    new_markdown_cell("## Build the model and load the official-layout checkpoint"),
    new_code_cell("""# the architecture (patch 8, D=32, 2 blocks, 4 heads, 5 classes, 32 px) is read from the file itself
model = keras_vit.load_model(os.path.join(fixture, "weights.npz"), classifier_activation=None)
print(model.vit_config.name, model.image_size, model.grid_size, model.classes)
x = np.load(os.path.join(fixture, "input.npy"))
flax_logits = np.load(os.path.join(fixture, "logits.npy"))
ours = model.predict(x, verbose=0)
print("max |keras_vit - original Flax| =", np.abs(ours - flax_logits).max())
assert np.abs(ours - flax_logits).max() < 1e-5"""),
    new_markdown_cell("""## Classify photos with the checkpoint's own preprocessing

`model.preprocessor()` is a Keras layer that prepares images of any size as the checkpoint was evaluated
(`model.data_config`: here the original code's square resize to [-1, 1]; timm files crop and use their own
mean/std). Offline, the tiny checkpoint's head has 5 unnamed classes, so a stand-in list names them. With a
released ImageNet checkpoint `model.decode(scores)` gives the ImageNet names:

```python
model = keras_vit.ViT_B16(weights="augreg_in21k_ft_in1k")
print(model.decode(model.predict(model.preprocessor()(photo))))
```"""),
    new_code_cell("""import skimage.data
photos = {name: getattr(skimage.data, name)() for name in ("chelsea", "coffee", "astronaut")}  # uint8, 3 sizes
print(model.data_config)
preprocess = model.preprocessor()
images = np.concatenate([keras.ops.convert_to_numpy(preprocess(p)) for p in photos.values()])
scores = model.predict(images, verbose=0)
stand_in_names = [f"toy class {i}" for i in range(model.classes)]   # the tiny head's classes have no names
for name, top in zip(photos, keras_vit.decode_predictions(scores, top=2, labels=stand_in_names)):
    print(f"{name:10s} {photos[name].shape} ->", top)"""),
    new_markdown_cell("## Look inside: the paper's Figure 6 and 7"),
    new_code_cell("""out = tempfile.mkdtemp()
paths = inspect.write_figures(model, images[0], out)
for name, path in paths.items():
    print(name)
    display(Image(filename=path))
print("mean attention distance [layers, heads] (pixels):\\n", inspect.mean_attention_distance(model, images))"""),
    new_markdown_cell("## Export a TF Hub module and load it back as TF Hub users do"),
    new_code_cell("""import tensorflow as tf
import hub_export
module = hub_export.export(model, os.path.join(out, "vit_tiny_fv"), variant="feature_vector")
reloaded = tf.saved_model.load(module)
features = reloaded((images + 1) / 2, training=False).numpy()      # modules take [0, 1] images
keras_features = model.feature_model().predict(images, verbose=0)
print(module, features.shape, "max |diff| =", np.abs(features - keras_features).max())
print(open(os.path.join(module, "README.md")).read()[:400])"""),
]


def main() -> None:
    nb = new_notebook(
        cells=CELLS, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "quickstart.ipynb")
    from keras_vit.utils import atomic

    atomic.write_file(path, nbformat.writes(nb))
    print(f"wrote {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
