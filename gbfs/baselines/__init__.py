"""Baselines in this package's interfaces: LightGBM (single-task and multitask)."""
