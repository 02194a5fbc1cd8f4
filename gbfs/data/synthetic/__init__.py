"""Synthetic data generators, registered by name."""
