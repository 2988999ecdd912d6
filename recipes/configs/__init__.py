"""Experiment configs: each file's `get_config("<variant>")` returns an ml_collections ConfigDict."""
