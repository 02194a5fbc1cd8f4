"""The papers' tables, figures and claims, regenerated from MLflow runs (``python -m runners.reproduce``)."""
