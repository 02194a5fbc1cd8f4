"""Entry points of the experiment harness (``python -m runners.<name>``)."""
