"""Consumers of the model's feature API: linear few-shot (`fewshot`), inspection (`inspect`, `plots`),
FLOPs and parameter counts (`summary`), and image reading (`images`)."""
