"""The papers' tables, figures and claims, regenerated from MLflow runs (``python -m runners.reproduce``),
and the experiments behind their commands: Figure 1, the multitask comparison, row sampling, the
new-feature utility test.
"""
