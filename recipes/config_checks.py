"""Every field the trainer reads, checked for type and range before the run touches the workdir.

A config that would train nothing (`total_steps=-5`), divide by zero (`log_every=0`) or
silently round (`batch_size=63.5`) is refused here with the field's full name.
"""

from __future__ import annotations

from keras_vit import validate


def _int(name: str, value, minimum: int = 1) -> None:
    validate.integer(f"config.{name}", value, minimum=minimum)


def _num(name: str, value, **kw) -> None:
    validate.number(f"config.{name}", value, **kw)


def check(config) -> None:
    """Raises ValueError naming the first field of `config` out of type or range."""
    for name in ("batch_size", "log_every", "checkpoint_every", "keep_checkpoints", "grad_accum_steps",
                 "dataset.image_size"):
        _int(name, config[name] if "." not in name else config.dataset.image_size)
    for name in ("total_steps", "seed", "init_image_size", "init_classes", "dataset.num_classes",
                 "dataset.train_examples", "fewshot.every"):
        group, _, field = name.rpartition(".")
        _int(name, (config[group] if group else config)[field], minimum=0)
    _num("num_epochs", config.num_epochs, minimum=0.0)
    if not config.total_steps and not config.num_epochs:
        raise ValueError("config.total_steps and config.num_epochs are both 0: set one of them.")
    opt = config.optimizer
    _num("optimizer.learning_rate", opt.learning_rate, positive=True)
    for field in ("weight_decay", "clip_norm", "end_learning_rate"):
        _num(f"optimizer.{field}", opt[field], minimum=0.0)
    for field in ("b1", "b2", "momentum"):
        _num(f"optimizer.{field}", opt[field], minimum=0.0, below=1.0)
    _int("optimizer.warmup_steps", opt.warmup_steps, minimum=0)
    _num("label_smoothing", config.label_smoothing, minimum=0.0, below=1.0)
    _num("ema_decay", config.ema_decay, minimum=0.0, below=1.0)
    _num("dataset.crop_area_min", config.dataset.crop_area_min, positive=True)
    if config.dataset.crop_area_min > 1:
        raise ValueError(f"config.dataset.crop_area_min must be in (0, 1], got {config.dataset.crop_area_min}.")
    for name in ("deterministic", "jit_compile", "dataset.cache", "dataset.download", "dataset.flip",
                 "mpp.enabled", "optimizer.nesterov", "model.gelu_approximate"):
        group, _, field = name.rpartition(".")
        validate.boolean(f"config.{name}", (config[group] if group else config)[field])
    m = config.model
    for field in ("patch_size", "hidden_size", "mlp_dim", "num_heads", "num_layers", "representation_size"):
        _int(f"model.{field}", m[field], minimum=0)  # 0: the named row's value / no representation layer
    for field in ("dropout_rate", "attention_dropout_rate", "drop_path_rate"):
        validate.rate(f"config.model.{field}", m[field])
    f = config.fewshot
    if f.every:
        validate.integers("config.fewshot.shots", list(f.shots))
        _int("fewshot.seeds", f.seeds)
