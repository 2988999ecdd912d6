"""Every config field the trainer reads, with its default. Experiment files override these."""

from __future__ import annotations

import ml_collections
from ml_collections import config_dict


def base_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    # model: a table name ("ViT-B/16"), whose sizes any non-zero field below overrides; or, with name "",
    # a custom plain ViT of the sizes below
    c.model = ml_collections.ConfigDict(
        dict(
            name="ViT-B/16",
            patch_size=0,
            hidden_size=0,
            mlp_dim=0,
            num_heads=0,
            num_layers=0,
            resnet_layers=(),
            resnet_width=1.0,  # hybrid stem of a custom model (table hybrids have their own)
            classifier="token",
            representation_size=0,
            dropout_rate=0.0,
            attention_dropout_rate=0.0,
            drop_path_rate=0.0,
            gelu_approximate=True,  # False: exact GELU, as timm / transformers weights need
            # True: recompute each encoder block in the backward pass (less memory, more compute); "attention":
            # only the attention probabilities (--config.model.remat=attention)
            remat=ml_collections.FieldReference(False, field_type=object),
        )
    )
    c.init_weights = ""  # fine-tuning: any weight source keras_vit.load_model takes (.weights.h5: see below)
    c.init_image_size = 0  # resolution a .weights.h5 init file was trained at (0: same as now)
    c.init_classes = 0  # classes of that file's head (0: same as now)
    c.dataset = ml_collections.ConfigDict(
        dict(
            name="imagenet2012",
            data_dir="",
            train_split="train",
            eval_split="validation",
            num_classes=0,
            train_examples=0,
            image_size=224,
            cache=False,
            download=False,
            crop_area_min=0.05,
            flip=True,
        )
    )
    c.batch_size = 4096  # images per update
    # True (`--config.batch_size=auto`): split batch_size into as few per-step batches as fit this machine's
    # memory, with gradient accumulation (recipes.trainer.memory.choose_batch; CPU runs, and accelerators on JAX)
    c.auto_batch = False
    c.total_steps = 0  # 0: from num_epochs * train_examples / batch_size
    c.num_epochs = 0.0
    c.optimizer = ml_collections.ConfigDict(
        dict(
            name="adamw",
            learning_rate=1e-3,
            b1=0.9,
            b2=0.999,
            momentum=0.9,
            nesterov=False,
            weight_decay=0.0,
            wd_exclude="bias,gamma,beta,pos_embedding,cls",
            clip_norm=0.0,
            warmup_steps=10_000,
            decay="linear",
            end_learning_rate=0.0,
            layer_decay=1.0,
        )
    )  # < 1: layer-wise learning-rate decay (BEiT / MAE fine-tuning), rate * decay^(depth)
    # LoRA fine-tuning: rank > 0 trains adapters on `targets` of every block (and the head) only
    c.lora = ml_collections.ConfigDict(dict(rank=0, alpha=0.0, targets="query,value"))
    c.label_smoothing = 0.0
    c.grad_accum_steps = 1
    c.ema_decay = 0.0  # Polyak averaging of the weights (0.9999 in the paper's fine-tuning)
    c.seed = 0
    c.deterministic = False  # tf.config.experimental.enable_op_determinism
    # the TF engine's step through XLA: True, False, or None (recipes/trainer/xla_choice.py: XLA, except bf16 on
    # a CPU with native bf16 products)
    c.jit_compile = config_dict.placeholder(bool)
    c.precision = "float32"  # or "bfloat16" (mixed: bf16 compute, float32 variables; TPU, GPU, CPUs with native bf16)
    c.log_every = 100
    c.checkpoint_every = 1000
    c.keep_checkpoints = 3
    c.restart = False  # True: rename the workdir's old run aside and start over (see trainer/run_record.py)
    c.model_parallel = 2  # JAX --distribution=model: devices on the mesh's "model" axis
    c.fewshot = ml_collections.ConfigDict(
        dict(every=0, dataset="", train_split="", test_split="", shots=[1, 5, 10, 25], seeds=3)
    )
    c.mpp = ml_collections.ConfigDict(dict(enabled=False, corrupt_rate=0.5, mask_rate=0.8, random_rate=0.1, bits=3))
    # image-text training (recipes/contrastive.py): the run's image model becomes the image tower of a two-tower
    # model, a new text tower learns captions made from the class names; lock_image: LiT (the image tower frozen)
    c.contrastive = ml_collections.ConfigDict(
        dict(
            enabled=False,
            loss="clip",  # or "siglip" (sigmoid, with a learned bias)
            lock_image=True,
            templates=("a photo of a {}.",),  # captions: each class word in each template
            class_words="",  # comma-separated, one per class ("": the dataset's class names)
            logit_scale=2.302585,  # log 10, LiT's and SigLIP's initial temperature
            logit_bias=-10.0,  # SigLIP's initial bias (the sigmoid loss only)
            # SigLIP on JAX over several devices: texts passed around the devices' ring, one block of logits at a
            # time (recipes/trainer/jax_chunked_sigmoid.py), rather than every text gathered on every device
            chunked=False,
            text=ml_collections.ConfigDict(
                dict(context_length=16, width=256, num_heads=4, num_layers=4, mlp_dim=1024, causal=True)
            ),
        )
    )
    return c


def pick(variants: dict, arg: str, file: str):
    """The variant named `arg`, or a ValueError listing the known ones."""
    if arg not in variants:
        raise ValueError(f"Unknown variant {arg!r} for {file}; known variants: {', '.join(sorted(variants))}.")
    return variants[arg]
