"""A baseline library brought in as one class and one method yaml (``_target_: toy_baseline.L1Logistic``):
scikit-learn's L1-penalised logistic regression, selecting the features of nonzero weight."""

from __future__ import annotations

import time

import numpy as np
import sklearn
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.fixes import parse_version

# scikit-learn 1.8 deprecated ``penalty``; before it ``l1_ratio`` alone would mean L2
L1 = {"l1_ratio": 1.0} if parse_version(sklearn.__version__) >= parse_version("1.8") else {"penalty": "l1"}


class L1Logistic:
    """What the harness needs of an estimator: ``fit`` with an eval set, ``predict_proba``,
    ``selected_features_``, ``history_`` and ``timings_``."""

    def __init__(self, C: float = 1.0, random_state: int = 0, n_threads: int | None = None):
        self.C, self.random_state, self.n_threads = C, random_state, n_threads

    def fit(self, X, y, eval_set=None):
        t0 = time.perf_counter()
        self.model_ = make_pipeline(StandardScaler(), LogisticRegression(
            C=self.C, solver="saga", max_iter=2000, random_state=self.random_state, **L1)).fit(X, y)
        self.selected_features_ = np.flatnonzero(self.model_[-1].coef_[0])
        self.history_ = []
        self.timings_ = {"fit_seconds": time.perf_counter() - t0}
        return self

    def predict_proba(self, X):
        return self.model_.predict_proba(X)
