"""Consumers of the model's feature API: linear few-shot (`fewshot`), inspection (`inspect`, `plots`),
FLOPs and parameter counts (`summary`), image reading (`images`), prediction and batch inference (`predict`,
`inference`, `image_sources`, `shards`), zero-shot classification (`zero_shot`), and search and retrieval scores
over embeddings (`retrieval`)."""
