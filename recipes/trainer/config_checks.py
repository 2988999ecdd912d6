"""Every field the trainer reads, checked for type and range before the run touches the workdir.

A config that would train nothing (`total_steps=-5`), divide by zero (`log_every=0`) or
silently round (`batch_size=63.5`) is refused here with the field's full name.
"""

from __future__ import annotations

from keras_vit.utils import validate


def _get(config, name: str):
    """The value of dotted field `name` ("optimizer.b1") of `config`."""
    for part in name.split("."):
        config = config[part]
    return config


def _ints(config, names, minimum: int = 1) -> None:
    for name in names:
        validate.integer(f"config.{name}", _get(config, name), minimum=minimum)


def _nums(config, names, **kw) -> None:
    for name in names:
        validate.number(f"config.{name}", _get(config, name), **kw)


def check(config) -> None:
    """Raises ValueError naming the first field of `config` out of type or range."""
    _ints(
        config,
        (
            "batch_size",
            "log_every",
            "checkpoint_every",
            "keep_checkpoints",
            "grad_accum_steps",
            "model_parallel",
            "dataset.image_size",
        ),
    )
    _ints(
        config,
        (
            "total_steps",
            "seed",
            "init_image_size",
            "init_classes",
            "dataset.num_classes",
            "dataset.train_examples",
            "fewshot.every",
            "optimizer.warmup_steps",
        ),
        minimum=0,
    )
    _nums(config, ("num_epochs",), minimum=0.0)
    if not config.total_steps and not config.num_epochs:
        raise ValueError("config.total_steps and config.num_epochs are both 0: set one of them.")
    _nums(config, ("optimizer.learning_rate", "dataset.crop_area_min"), positive=True)
    _nums(config, ("optimizer.weight_decay", "optimizer.clip_norm", "optimizer.end_learning_rate"), minimum=0.0)
    _nums(
        config,
        ("optimizer.b1", "optimizer.b2", "optimizer.momentum", "label_smoothing", "ema_decay"),
        minimum=0.0,
        below=1.0,
    )
    if config.dataset.crop_area_min > 1:
        raise ValueError(f"config.dataset.crop_area_min must be in (0, 1], got {config.dataset.crop_area_min}.")
    for name in (
        "restart",
        "auto_batch",
        "deterministic",
        "dataset.cache",
        "dataset.download",
        "dataset.flip",
        "mpp.enabled",
        "optimizer.nesterov",
        "model.gelu_approximate",
    ):
        validate.boolean(f"config.{name}", _get(config, name))
    validate.boolean("config.jit_compile", config.jit_compile, allow_none=True)  # None: recipes/trainer/xla_choice.py
    if not isinstance(config.model.remat, bool) and config.model.remat != "attention":
        raise ValueError(f'config.model.remat must be True, False or "attention", got {config.model.remat!r}.')
    # 0: the named row's value / no representation layer
    _ints(
        config,
        [
            f"model.{f}"
            for f in ("patch_size", "hidden_size", "mlp_dim", "num_heads", "num_layers", "representation_size")
        ],
        minimum=0,
    )
    for field in ("dropout_rate", "attention_dropout_rate", "drop_path_rate"):
        validate.rate(f"config.model.{field}", config.model[field])
    _ints(config, ("lora.rank",), minimum=0)
    _nums(config, ("lora.alpha",), minimum=0.0)
    _nums(config, ("optimizer.layer_decay",), positive=True)
    if config.optimizer.layer_decay > 1:
        raise ValueError(f"config.optimizer.layer_decay must be in (0, 1], got {config.optimizer.layer_decay}.")
    if config.fewshot.every:
        validate.integers("config.fewshot.shots", list(config.fewshot.shots))
        _ints(config, ("fewshot.seeds",))
    _check_contrastive(config)


def _check_contrastive(config) -> None:
    c = config.contrastive
    for name in ("enabled", "lock_image", "chunked", "text.causal"):
        validate.boolean(f"config.contrastive.{name}", _get(c, name))
    if not c.enabled:
        return
    if c.loss not in ("clip", "siglip"):
        raise ValueError(f'config.contrastive.loss must be "clip" or "siglip", got {c.loss!r}.')
    _ints(config, [f"contrastive.text.{f}" for f in ("context_length", "width", "num_heads", "num_layers", "mlp_dim")])
    _nums(config, ("contrastive.logit_scale", "contrastive.logit_bias"))
    if c.chunked and c.loss != "siglip":
        raise ValueError(
            "config.contrastive.chunked is SigLIP's chunked sigmoid loss: CLIP's softmax normalises each image over "
            "every text, so it takes no chunks. Set --config.contrastive.loss=siglip, or chunked=False."
        )
    if config.mpp.enabled or config.lora.rank:
        raise ValueError("config.contrastive trains a two-tower model: it takes neither config.mpp nor config.lora.")
    if c.lock_image and not config.init_weights:
        raise ValueError(
            "config.contrastive.lock_image locks a pre-trained image tower: set --config.init_weights (a .keras "
            "model, or a checkpoint name or file keras_vit.load_model reads), or train both towers with "
            "--config.contrastive.lock_image=False."
        )
