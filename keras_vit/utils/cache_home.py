"""Where keras_vit keeps what it fetches or compiles for later processes: `$KERAS_VIT_CACHE_DIR/keras_vit`, else
under the Keras cache (`$KERAS_HOME`, ~/.keras): XLA's compiled programs (`compilation_cache`), caption shards
fetched by URL (`recipes.shard_sources`)."""

from __future__ import annotations

import os


def cache_home() -> str:
    """The `keras_vit` folder of the cache root the environment names (not created here)."""
    root = os.environ.get("KERAS_VIT_CACHE_DIR") or os.environ.get("KERAS_HOME") or os.path.expanduser("~/.keras")
    return os.path.join(root, "keras_vit")
