"""timm's layouts, one concern per module: `reader` (timm state dicts -> the official keys), `writer` (back),
`state_dict` (`.safetensors` files), `model_args` (timm's `model_args` and registered architectures) and
`repository` (timm's hub repositories, `config.json` + `model.safetensors`). The table of timm's architecture names
is `keras_vit.vit.timm_table`, where `list_models` and the model read it.
"""
