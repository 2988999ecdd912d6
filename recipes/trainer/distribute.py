"""Strategy selection: one flag picks TPU, multi-GPU, multi-worker or the default strategy."""

from __future__ import annotations

import json
import os
from typing import Optional

import tensorflow as tf

STRATEGIES = ("cpu", "gpu", "multiworker", "tpu")


def get_strategy(name: str = "cpu", tpu: Optional[str] = None) -> tf.distribute.Strategy:
    """Builds the tf.distribute strategy named by `--strategy`.

    cpu: the default strategy (one device); gpu: MirroredStrategy over the local
    GPUs (or logical CPUs in tests); multiworker: MultiWorkerMirroredStrategy with
    the cluster from $TF_CONFIG; tpu: TPUStrategy on the TPU at `tpu` ("local" on a
    TPU VM, a name or grpc:// address otherwise).
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown --strategy {name!r}; expected one of {', '.join(STRATEGIES)}.")
    if name == "cpu":
        return tf.distribute.get_strategy()
    if name == "gpu":
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("--strategy=multiworker needs $TF_CONFIG with the cluster and this worker's task.")
        try:
            json.loads(os.environ["TF_CONFIG"])
        except json.JSONDecodeError as e:
            raise ValueError(f"$TF_CONFIG is not valid JSON: {e}") from e
        return tf.distribute.MultiWorkerMirroredStrategy()
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        raise ValueError(f"No TPU reachable at --tpu={tpu!r}: {e}") from e
    return tf.distribute.TPUStrategy(resolver)


def per_replica_batch(global_batch: int, strategy: tf.distribute.Strategy) -> int:
    """The batch each replica sees; the global batch must split evenly."""
    replicas = strategy.num_replicas_in_sync
    if global_batch % replicas:
        raise ValueError(f"config.batch_size={global_batch} is not divisible by the {replicas} replicas in sync.")
    return global_batch // replicas
