"""The trainer's JAX engine: one jitted step from Keras' stateless API, laid out by `keras.distribution`.

The step is a pure function of (trainable, non-trainable, optimizer variables) and a batch:
`model.stateless_call` for the forward pass, `jax.value_and_grad`, clipping on the global gradient
norm, `optimizer.stateless_apply` (with its EMA and gradient accumulation) for the update. Under
`DataParallel` the batch is split over all devices; under `ModelParallel` the encoder blocks are also
split over the mesh's "model" axis by `keras_vit.layout_map`. XLA's partitioner inserts the collectives,
so every layout computes the one-device update on the same global batch.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import keras
import numpy as np

import keras_vit
from keras_vit.utils import heap
from keras_vit.utils.xla_options import tuned_jit
from recipes.trainer import losses
from recipes.trainer.checkpoints import keyed_by_path

DISTRIBUTIONS = ("auto", "none", "data", "model")


def make_distribution(name: str, sizes: "keras_vit.ViTConfig", model_parallel: int = 2):
    """The `keras.distribution` of `--distribution`: none (one device), data (`DataParallel` over every
    device), model (`ModelParallel` on a (devices / model_parallel) x model_parallel mesh with the ViT's
    layout map), auto (data when there is more than one device)."""
    if name not in DISTRIBUTIONS:
        raise ValueError(f"--distribution={name!r}; expected one of {', '.join(DISTRIBUTIONS)}.")
    devices = keras.distribution.list_devices()
    if name == "auto":
        name = "data" if len(devices) > 1 else "none"
    if name == "none":
        return None
    if name == "data":
        return keras.distribution.DataParallel(devices=devices)
    if model_parallel < 1 or len(devices) % model_parallel:
        raise ValueError(f"config.model_parallel={model_parallel} does not divide the {len(devices)} devices.")
    mesh = keras.distribution.DeviceMesh(
        (len(devices) // model_parallel, model_parallel), ("batch", "model"), devices=devices
    )
    return keras.distribution.ModelParallel(layout_map=keras_vit.layout_map(sizes, mesh), batch_dim_name="batch")


def data_ways(distribution) -> int:
    """How many ways the batch is split (1 without a distribution)."""
    if distribution is None:
        return 1
    mesh = distribution.device_mesh
    return mesh.shape[list(mesh.axis_names).index(distribution.batch_dim_name)]


def jax_mesh(distribution) -> Optional[jax.sharding.Mesh]:
    """The jax Mesh of a `keras.distribution` (None without one)."""
    if distribution is None:
        return None
    mesh = distribution.device_mesh
    by_name = {f"{d.platform}:{d.id}": d for d in jax.devices()}  # keras names devices "cpu:0", "tpu:3", ...
    devices = np.vectorize(lambda d: by_name[str(d).lower()] if not isinstance(d, jax.Device) else d, otypes=[object])(
        np.asarray(mesh.devices)
    )
    return jax.sharding.Mesh(devices, tuple(mesh.axis_names))


def host(x) -> np.ndarray:
    """A (replicated) jax value as numpy, in one process or many."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return np.asarray(x.addressable_shards[0].data)
    return np.asarray(x)


class JaxEngine:
    """Holds a run's state as jax arrays and advances it one compiled step per batch.

    `engine(batch)` takes a host batch (images, labels) of the global batch size and returns the same
    metrics as the TF engine's step; `state()` / `set_state()` give the state keyed by variable path (what
    Orbax saves); `sync()` writes it back into the Keras variables (for evaluation, EMA and saving).
    """

    def __init__(
        self,
        net: keras.Model,
        optimizer: keras.optimizers.Optimizer,
        distribution,
        *,
        num_classes: int,
        global_batch_size: int,
        label_smoothing: float = 0.0,
        clip_norm: float = 0.0,
        loss_fn: Optional[Callable] = None,
    ):
        self.net, self.optimizer, self.distribution = net, optimizer, distribution
        self.global_batch = global_batch_size
        self.groups = {
            "model": net.trainable_variables + net.non_trainable_variables,
            "optimizer": list(optimizer.variables),
        }
        self.keys = {g: list(named) for g, named in keyed_by_path(self.groups).items()}  # same order as groups
        self._n_trainable = len(net.trainable_variables)
        self.reload()
        mesh = jax_mesh(distribution)
        self._batch_sharding = (
            None
            if mesh is None
            else jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(distribution.batch_dim_name))
        )
        classify = lambda outputs, images, labels: (  # noqa: E731
            losses.cross_entropy(labels, outputs, num_classes, label_smoothing),
            outputs,
            labels,
        )
        self._loss_fn = loss_fn or classify
        self._clip_norm = float(clip_norm or 0.0)
        shardings = jax.tree.map(lambda a: a.sharding, self._values)
        # the first call compiles with the platform's options (keras_vit.utils.xla_options: on CPU without YNNPACK's
        # fusions, 1.09x faster; on GPU without Triton's matrix products, 1.07x); what XLA frees meanwhile goes back
        # to the OS before the step's buffers are taken
        self._step = heap.first_call_returning_freed_memory(
            tuned_jit(self._train_step, donate_argnums=(0,), out_shardings=(shardings, None))
        )
        self._predict = jax.jit(self._eval_step)

    @classmethod
    def for_config(cls, config, net, optimizer, distribution, num_classes: int, loss_fn=None) -> "JaxEngine":
        """The engine `recipes.train` runs for `config` (its batch, label smoothing and gradient clipping)."""
        return cls(
            net,
            optimizer,
            distribution,
            num_classes=num_classes,
            global_batch_size=config.batch_size,
            label_smoothing=config.label_smoothing,
            clip_norm=config.optimizer.clip_norm,
            loss_fn=loss_fn,
        )

    # ------------------------------------------------------------------ state
    def _read_variables(self) -> List[List[jax.Array]]:
        return [
            [jnp.asarray(v.value) for v in self.groups["model"]],
            [jnp.asarray(v.value) for v in self.groups["optimizer"]],
        ]

    def reload(self) -> None:
        """The engine takes the Keras variables' values (after loading weights into them, or EMA)."""
        values = self._read_variables()
        shardings = jax.tree.map(lambda a: a.sharding, values)
        # own copies: the step donates its input buffers, which must not be the Keras variables' own
        self._values = jax.jit(lambda t: jax.tree.map(jnp.copy, t), out_shardings=shardings)(values)

    def state(self) -> Dict[str, Dict[str, jax.Array]]:
        """{group: {variable key: array}} (`recipes.trainer.checkpoints.keyed_by_path`), sharded as the variables."""
        return {g: dict(zip(self.keys[g], values)) for g, values in zip(("model", "optimizer"), self._values)}

    def set_state(self, state: Dict[str, Dict[str, jax.Array]]) -> None:
        self._values = [[state[g][k] for k in self.keys[g]] for g in ("model", "optimizer")]
        self.sync()

    def release_variables(self) -> None:
        """Drops the Keras variables' own arrays while the engine trains, as Keras' JAX trainer does: they are
        a second copy of the weights and optimizer slots (ViT-B/16: 1 GB) that nothing reads until `sync()`
        gives the variables the engine's values again. Scalars (the step counter, a constant learning rate)
        are kept: the loop's log reads the rate."""
        for v in self.groups["model"] + self.groups["optimizer"]:
            if len(v.shape):
                v._value = None

    def step(self) -> int:
        """The optimizer's step counter, as the engine holds it."""
        return int(host(self.state()["optimizer"]["iteration"]))

    def sync(self) -> None:
        """The Keras variables take the engine's values (the optimizer's step counter included). The arrays are
        the engine's own: readable until its next step, which donates them (sync again after it)."""
        for group, values in zip(("model", "optimizer"), self._values):
            for v, a in zip(self.groups[group], values):
                # arrays are shared (the next step donates them); scalars are copied, so that the step counter
                # and a constant learning rate stay readable after it
                v.assign(a if a.ndim else jnp.copy(a))

    # ------------------------------------------------------------------ steps
    def _train_step(self, values, images, labels):
        model_values, opt_values = values
        trainable, non_trainable = model_values[: self._n_trainable], model_values[self._n_trainable :]

        def loss_of(trainable_values):
            outputs, new_non_trainable = self.net.stateless_call(trainable_values, non_trainable, images, training=True)
            # the loss may read the net's own weights (the two towers' temperature and bias): under the step's values,
            # so that their gradients are these, not zero
            mapping = list(zip(self.net.trainable_variables, trainable_values))
            mapping += list(zip(self.net.non_trainable_variables, non_trainable))
            with keras.StatelessScope(state_mapping=mapping):
                per_example, logits, targets = self._loss_fn(outputs, images, labels)
            loss = jnp.sum(per_example.astype(jnp.float32)) / self.global_batch
            return loss, (new_non_trainable, per_example, logits, targets)

        (_, (non_trainable, per_example, logits, targets)), grads = jax.value_and_grad(loss_of, has_aux=True)(trainable)
        norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(jnp.float32))) for g in grads))
        if self._clip_norm:  # tf.clip_by_global_norm's rule: scale by clip / max(norm, clip)
            scale = self._clip_norm / jnp.maximum(norm, self._clip_norm)
            grads = [g * scale.astype(g.dtype) for g in grads]
        trainable, opt_values = self.optimizer.stateless_apply(opt_values, grads, trainable)
        predictions = jnp.argmax(logits.astype(jnp.float32), axis=-1).astype(targets.dtype)
        loss_sum = jnp.sum(per_example.astype(jnp.float32))
        finite = jnp.isfinite(loss_sum) & jnp.isfinite(norm)
        metrics = {
            "loss": loss_sum,
            "correct": jnp.sum((predictions == targets).astype(jnp.float32)),
            "count": jnp.float32(targets.size),
            "grad_norm": norm,
            "nonfinite": 1.0 - finite.astype(jnp.float32),
        }
        return [list(trainable) + list(non_trainable), list(opt_values)], metrics

    def _eval_step(self, model_values, images, labels, valid):
        trainable, non_trainable = model_values[: self._n_trainable], model_values[self._n_trainable :]
        logits, _ = self.net.stateless_call(trainable, non_trainable, images, training=False)
        logits = logits[0] if isinstance(logits, (list, tuple)) else logits
        hits = (jnp.argmax(logits.astype(jnp.float32), axis=-1) == labels) & valid
        return jnp.sum(hits.astype(jnp.float32))

    def global_batch_arrays(self, *arrays: np.ndarray, local: bool = False) -> List[jax.Array]:
        """Host arrays of the whole global batch -> arrays split over the data axis. Every process holds the
        same global batch (the input stream is a function of the seed and step) and contributes its rows;
        `local`: the arrays hold this process's rows only (a stream made with `rows`), the others' are
        theirs."""
        if self._batch_sharding is None:
            return [jnp.asarray(a) for a in arrays]
        processes, index = jax.process_count(), jax.process_index()
        out = []
        for a in arrays:
            if local:
                shape = (a.shape[0] * processes, *a.shape[1:])
                out.append(jax.make_array_from_process_local_data(self._batch_sharding, a, shape))
                continue
            rows = a.shape[0] // processes
            out.append(
                jax.make_array_from_process_local_data(
                    self._batch_sharding, a[index * rows : (index + 1) * rows], a.shape
                )
            )
        return out

    def stream_rows(self) -> Optional[Tuple[int, int]]:
        """(process index, process count) when each process should read only its rows of a global batch (a
        multi-process run), else None."""
        if self._batch_sharding is None or jax.process_count() == 1:
            return None
        return jax.process_index(), jax.process_count()

    def __call__(self, batch) -> Dict[str, jax.Array]:
        inputs, labels = batch  # inputs: images, or a tuple of arrays (images and caption ids)
        leaves = [np.asarray(t) for t in (inputs if isinstance(inputs, (tuple, list)) else (inputs,))]
        *leaves, labels = self.global_batch_arrays(
            *leaves, np.asarray(labels).astype(np.int32), local=self.stream_rows() is not None
        )
        inputs = tuple(leaves) if isinstance(inputs, (tuple, list)) else leaves[0]
        self._values, metrics = self._step(self._values, inputs, labels)
        return metrics

    def evaluate(self, dataset) -> float:
        """Top-1 accuracy over a finite dataset of (images, labels); the last batch is padded to split evenly."""
        split = max(data_ways(self.distribution), jax.process_count())
        correct = count = 0.0
        for images, labels in dataset:
            images, labels = np.asarray(images), np.asarray(labels).astype(np.int32)
            n = len(labels)
            pad = (-n) % split
            valid = np.arange(n + pad) < n
            if pad:
                images = np.concatenate([images, np.zeros((pad, *images.shape[1:]), images.dtype)])
                labels = np.concatenate([labels, np.zeros((pad,), labels.dtype)])
            images, labels, valid = self.global_batch_arrays(images, labels, valid)
            correct += float(host(self._predict(self._values[0], images, labels, valid)))
            count += n
        if not count:
            raise ValueError("The evaluation dataset is empty.")
        return correct / count
