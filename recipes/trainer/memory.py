"""Will the run fit? The training step's peak memory estimated from the config, before anything is built, and a
run that cannot fit refused naming the estimate, the memory there is and the flags that change it.

The estimate counts what a ViT training step holds at its peak:
- the runtime (the framework, XLA's compiled step, the input pipeline): `RUNTIME` bytes;
- per parameter, float32 weights and gradients, the optimizer's slots (SGD with momentum one, AdamW two and the
  `ADAM_TEMPORARIES` parameter-sized temporaries its compiled update keeps beside them, Polyak averaging one more)
  and the `PARAMETER_TEMPORARIES` the compiled step keeps whatever the optimizer; with LoRA only the adapters and
  the head have gradients, slots and temporaries;
- the activations kept for the backward pass, per image and encoder block: `PER_TOKEN_WIDTH` values per token and
  channel of the width D and `PER_TOKEN_MLP` per token and channel of the MLP width, plus
  `DROPOUT_PER_TOKEN_WIDTH` per token and channel of D where dropout is on. The attention probabilities are
  recomputed in the backward pass (keras_vit's attention keeps none), except their dropout mask where attention
  dropout is on (one value per head and token pair: not measured, counted as kept). `remat=True` keeps each
  block's input and one block's activations at a time;
- the input pipeline's batches of float32 images in flight (`BATCHES_IN_FLIGHT`).
The constants were fitted on peaks measured with bench/train_memory.py (resident memory, VmHWM, a fresh
`recipes.train` process per row, TensorFlow + XLA on 2 AMD EPYC cores with AVX-512, 2026-11-29, the recipes'
AdamW being `keras_vit.FusedAdamW` and the LayerNorms keeping their input only; docs/benchmarks-history.md "Will
the run fit", "FusedAdamW on TensorFlow" and "The LayerNorms keep their input only"): within -1.3 % to +1.3 % of
each measured row (the demo; ViT-S/16 with AdamW at batch 16 and 32, with and without dropout; ViT-B/16 with SGD
at 224 px batch 8 and 16 and at 384 px batch 4). On the AVX2 AMD machine
of the first fit the same steps peaked lower (ViT-B/16 with SGD at batch 16: 3.85 GB against 4.25–4.32 here with
the LayerNorms' outputs kept, as they were there), so the estimate is higher than its peaks there. Other CPU
backends were not measured.

On an accelerator (Keras' JAX backend, the batch split over every device) the estimate is one device's peak:
`ACCELERATOR`'s constants, fitted on the device allocator's high-water marks of the recipes' JAX step measured
with bench/accelerator_memory.py (one NVIDIA H200, XLA, 2026-11-28; docs/benchmarks-history.md "Will the run
fit on an accelerator"): within 9 % of each of the 11 rows fitted (the demo; ViT-S/16 with AdamW at batch 16, 128
and 256; ViT-B/16 with SGD at batch 16 and 128 and at 384 px, with AdamW at batch 256; ViT-L/16 at batch 64;
float32 and bfloat16), and within 12 % of 4 rows measured after the GPU compile option
(`keras_vit.utils.xla_options`), one of them outside the fit (ViT-B/16 at 384 px, batch 128, float32). The memory there is, XLA's allocator limit (`bytes_limit`), is read from the device. TensorFlow
states no device's size, so its accelerator runs are not checked; nor are model-parallel layouts, whose devices
each hold a part of the variables.
"""

from __future__ import annotations

import math
import os
from typing import Optional, Tuple

GB = 1e9
RUNTIME = 1.25 * GB
PARAMETER_TEMPORARIES = 0.75  # parameter-sized float32 buffers the compiled CPU step keeps, whatever the optimizer
ADAM_TEMPORARIES = 1  # parameter-sized float32 buffers AdamW's compiled update keeps beside its two slots
PER_TOKEN_WIDTH = 9  # float32 values kept per token and channel of D, per block and image
PER_TOKEN_MLP = 1  # float32 values kept per token and channel of the MLP width, per block and image
DROPOUT_PER_TOKEN_WIDTH = 10.5  # more per token and channel of D where dropout is on
BATCHES_IN_FLIGHT = 3
# The host's peak in a CPU step (measured in float32 only, so counted in float32 whatever the precision): the
# attention probabilities are recomputed, their dropout mask is kept.
CPU = dict(
    runtime=RUNTIME,
    parameter_temporaries=PARAMETER_TEMPORARIES,
    adam_temporaries=ADAM_TEMPORARIES,
    per_token_width=PER_TOKEN_WIDTH,
    per_token_mlp=PER_TOKEN_MLP,
    dropout_per_token_width=DROPOUT_PER_TOKEN_WIDTH,
    per_head_token_pair=0,
    attention_dropout_per_head_token_pair=1,
    batches_in_flight=BATCHES_IN_FLIGHT,
)
# One accelerator's peak under XLA (the device allocator's high-water mark): no host runtime or input pipeline,
# one batch of float32 images on the device, activations in the compute precision's bytes (float32 4, bfloat16
# 2), AdamW's update fused into the step (no temporaries beside its slots), and `per_head_token_pair` values per
# head and token pair (the einsum attention, bfloat16's default path, keeps its probabilities; the fused one,
# float32's, keeps less: one constant fits both). Fitted on bench/accelerator_memory.py's rows, before each block's
# LayerNorms kept only their input (keras_vit.nn.norm_core, -2 per token width on the CPU fit): not measured on a
# device since, so the estimate there may be high by up to 2 of its 11 values per token width (on the safe side).
ACCELERATOR = dict(
    runtime=0.15 * GB,
    parameter_temporaries=0,
    adam_temporaries=0,
    per_token_width=11,
    per_token_mlp=0.5,
    dropout_per_token_width=3,
    per_head_token_pair=1.5,
    attention_dropout_per_head_token_pair=0,
    batches_in_flight=1,
)
SAFETY = 0.9  # of the memory there is: the rest for the system and the estimate's error


class DoesNotFit(ValueError):
    """A run whose estimated peak exceeds the memory there is (a ValueError: the trainer's refusals are)."""


def sizes(config) -> Optional[dict]:
    """The run's transformer sizes (hidden_size, mlp_dim, num_heads, num_layers, patch) from the config's table
    name and overrides; None where the config does not state them (an init file's own architecture)."""
    import keras_vit
    from keras_vit.vit import timm_table

    m = config.model
    fields = ("hidden_size", "mlp_dim", "num_heads", "num_layers", "patch_size")
    if m.name and not timm_table.is_timm_name(m.name):
        row = keras_vit.vit_config(m.name)
        found = dict(row.model_kwargs(), patch_size=row.effective_patch_size)  # pixels per token, hybrids too
    else:
        found = {}
    found.update({f: int(m[f]) for f in fields if m[f]})
    return found if all(f in found for f in fields) else None


def estimate(config, num_classes: int, replicas: int = 1, accelerator: bool = False) -> Optional[Tuple[float, dict]]:
    """(bytes, the parts) of the host's peak in a CPU training step of `config` whose batch is split over
    `replicas` CPU devices (each holding its copy of the variables; `CPU`'s constants), or None where the config
    does not state the sizes. `accelerator`: the peak of one of `replicas` accelerators instead, each holding the
    variables and its share of the batch (`ACCELERATOR`'s constants)."""
    s, m = sizes(config), config.model
    if s is None:
        return None
    k = ACCELERATOR if accelerator else CPU
    d, mlp, heads, layers, patch = (s[f] for f in ("hidden_size", "mlp_dim", "num_heads", "num_layers", "patch_size"))
    image = config.dataset.image_size
    tokens = (image // patch) ** 2 + 1
    block = 4 * d * d + 4 * d + 2 * d * mlp + d + mlp + 4 * d
    params = layers * block + patch * patch * 3 * d + d + tokens * d + d + 2 * d + d * num_classes + num_classes
    trained = params if not config.lora.rank else d * num_classes + layers * 4 * d * config.lora.rank
    adam = config.optimizer.name in ("adam", "adamw")
    slots = (2 + k["adam_temporaries"] if adam else 1 if config.optimizer.momentum else 0) + bool(config.ema_decay)
    slots += k["parameter_temporaries"]
    batch = -(-config.batch_size // replicas) if accelerator else config.batch_size  # what one memory holds
    copies = 1 if accelerator else replicas  # of the variables, in that memory
    value = 2.0 if accelerator and config.precision == "bfloat16" else 4.0  # bytes per activation
    pair = k["per_head_token_pair"] + k["attention_dropout_per_head_token_pair"] * (m.attention_dropout_rate > 0)
    block_bytes = value * (
        (k["per_token_width"] + k["dropout_per_token_width"] * (m.dropout_rate > 0)) * tokens * d
        + k["per_token_mlp"] * tokens * mlp
        + pair * heads * tokens * tokens
    )
    kept = value * layers * tokens * d + block_bytes if m.remat is True else layers * block_bytes
    parts = dict(
        runtime=k["runtime"],
        variables=4.0 * copies * (params + trained * (1 + slots)),
        activations=batch * kept,
        input=4.0 * k["batches_in_flight"] * batch * image * image * 3,
    )
    return sum(parts.values()), parts


def accelerator_memory(replicas: int) -> Optional[Tuple[float, str]]:
    """(bytes XLA's allocator may take on each accelerator, where that figure comes from) on Keras' JAX backend
    when the batch is split `replicas` ways over every device (the estimate's layout); None elsewhere: on
    TensorFlow (which states no device's size), and where a model-parallel layout splits the variables."""
    import keras

    if keras.backend.backend() != "jax":
        return None
    import jax

    if replicas != jax.device_count():
        return None
    device = jax.local_devices()[0]
    limit = (device.memory_stats() or {}).get("bytes_limit")
    if not limit:
        return None
    return float(limit), f"the memory XLA may take on {device.device_kind} ({device.platform} 0)"


def available() -> Tuple[float, str]:
    """(bytes this process may use, where that figure comes from): the cgroup's limit where one is set (a
    container's), else the machine's memory."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # cgroup v1 writes a huge number for "no limit"
            return float(text), f"the cgroup limit ({path})"
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")), "this machine's memory"


def memory_there(replicas: int, accelerator: bool) -> Optional[Tuple[float, str]]:
    """The memory the estimate is compared with: each accelerator's (`accelerator_memory`, None where unknown),
    else the host's (`available`)."""
    return accelerator_memory(replicas) if accelerator else available()


def fitting_batch(
    config,
    num_classes: int,
    replicas: int = 1,
    memory: Optional[Tuple[float, str]] = None,
    accelerator: bool = False,
) -> int:
    """The largest per-step batch that fits (`replicas` times a power of two, at most `config.batch_size`, by the
    same estimate as `check_fits`), or 0 where none does."""
    found = estimate(config, num_classes, replicas, accelerator)
    if found is None:
        return config.batch_size
    need, parts = found
    there = memory or memory_there(replicas, accelerator)
    if there is None:
        return config.batch_size
    have = there[0]
    if need <= SAFETY * have:
        return config.batch_size
    per_image = (parts["activations"] + parts["input"]) / config.batch_size
    room = SAFETY * have - parts["runtime"] - parts["variables"]
    fits = int(room // per_image) // replicas * replicas if per_image and room > 0 else 0
    return replicas * 2 ** int(math.log2(fits // replicas)) if fits >= replicas else 0


def check_fits(
    config,
    num_classes: int,
    replicas: int = 1,
    memory: Optional[Tuple[float, str]] = None,
    accelerator: bool = False,
) -> None:
    """Refuses a run whose estimated peak exceeds the memory there is (unless given: `available()` on a CPU,
    `accelerator_memory()` on each accelerator; not checked where that is unknown), naming the estimate, the
    memory and the flags that bring it down; called before anything is built or written."""
    found = estimate(config, num_classes, replicas, accelerator)
    there = memory or memory_there(replicas, accelerator)
    if found is None or there is None:
        return
    need, parts = found
    have, where = there
    if need <= SAFETY * have:
        return
    batch = fitting_batch(config, num_classes, replicas, (have, where), accelerator)
    k = max(1, config.batch_size // batch) if batch else 1
    hint = (
        f"--config.batch_size=auto (here: --config.batch_size={batch} with --config.grad_accum_steps={k} to keep "
        f"{config.batch_size} images per update; steps count batches, so --config.total_steps and "
        f"--config.optimizer.warmup_steps multiplied by {k} keep the schedule)"
        if batch
        else "a smaller model"
    )
    bf16 = "--config.precision=bfloat16, " if accelerator and config.precision != "bfloat16" else ""
    raise DoesNotFit(
        f"This run needs about {need / GB:.1f} GB (batch {config.batch_size}, "
        f"{config.dataset.image_size} px: activations {parts['activations'] / GB:.1f} GB, weights and optimizer "
        f"{parts['variables'] / GB:.1f} GB, input {parts['input'] / GB:.1f} GB, runtime {parts['runtime'] / GB:.1f} GB)"
        f"{' on each accelerator' if accelerator else ''} and {where} is {have / GB:.1f} GB: use {hint}, "
        f"{bf16}a smaller --config.dataset.image_size, or --config.model.remat=True. Nothing was started."
    )


STEP_FIELDS = ("total_steps", "optimizer.warmup_steps", "log_every", "checkpoint_every")  # counted in batches


def choose_batch(
    config,
    num_classes: int,
    replicas: int = 1,
    memory: Optional[Tuple[float, str]] = None,
    accelerator: bool = False,
) -> str:
    """`config.auto_batch` (`--config.batch_size=auto`): keeps `config.batch_size` images per update and splits
    them into as few per-step batches as fit the memory (`fitting_batch`): sets `batch_size` to the per-step
    batch, multiplies `grad_accum_steps` by the split K and the fields counted in batches (`STEP_FIELDS`) by K,
    so the schedule, the logs and the checkpoints keep their places in images seen. Clears `auto_batch` (the
    chosen values are what the run records) and returns a line saying what it chose. Refused where no batch fits,
    where the split does not divide the batch, and where the memory there is is unknown (`check_fits`)."""
    if not config.auto_batch:
        return ""
    memory = memory or memory_there(replicas, accelerator)
    if memory is None:
        raise DoesNotFit(
            "--config.batch_size=auto needs the memory there is: a CPU machine's, or each accelerator's on Keras' "
            "JAX backend with the batch split over every device; here give --config.batch_size (per step) and "
            "--config.grad_accum_steps."
        )
    update = int(config.batch_size)
    batch = fitting_batch(config, num_classes, replicas, memory, accelerator)
    if not batch or update % batch:
        raise DoesNotFit(
            f"--config.batch_size=auto: no per-step batch that divides {update} fits "
            f"({'none fits' if not batch else f'{batch} would'}); give --config.batch_size and "
            "--config.grad_accum_steps yourself, a smaller --config.dataset.image_size, or --config.model.remat=True."
        )
    k = update // batch
    config.batch_size, config.grad_accum_steps = batch, int(config.grad_accum_steps) * k
    for field in STEP_FIELDS:
        owner, name = (config.optimizer, field.split(".")[1]) if "." in field else (config, field)
        owner[name] = int(owner[name]) * k
    config.auto_batch = False
    return (
        f"batch_size=auto: {update} images per update as {k} step(s) of {batch} "
        f"(grad_accum_steps={config.grad_accum_steps}; {', '.join(STEP_FIELDS)} multiplied by {k})"
    )
