"""The papers' selection criteria: Omega and its first-use penalty, the methods (GBFS, A-GBM,
GT-GBM, GBDT-topK), GT-GBM's group tests, multitask Omega and boosting, and the relaxed refit.
"""
