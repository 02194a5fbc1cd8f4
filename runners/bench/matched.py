"""Matched settings: our booster and LightGBM set up alike, in each library's own names.

Every benchmark against LightGBM builds both learners from one :class:`Matched`: the same number
of trees, learning rate, depth, leaves, rows and hessian per leaf, L2 and bins; Newton gain and
leaves on our side (LightGBM's), no penalty (``mu = 0``) unless a caller asks for one.

:func:`matched_params` and :func:`lgb_params` give both learners depth 5 / 32 leaves, 255 bins,
learning rate 0.1, 20 rows per leaf, Newton gain and leaves and no penalty; :func:`warm_up`
compiles (or loads from numba's cache) every kernel, so that timings exclude JIT.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import scipy.sparse as sp

from gbfs import GBFSClassifier


@dataclass(frozen=True)
class TreeSettings:
    """Tree settings shared by both learners (``max_depth=-1``: no depth limit, LightGBM's -1)."""

    n_estimators: int = 100
    learning_rate: float = 0.1
    max_depth: int = 5
    max_leaves: int = 32
    min_samples_leaf: int = 20
    min_child_weight: float = 1e-3
    reg_lambda: float = 0.0
    max_bins: int = 255
    threads: int | None = 2

    def seeded(self, seed: int) -> Matched:
        """These settings and ``seed``: both learners' arguments."""
        return Matched(**{f.name: getattr(self, f.name) for f in fields(TreeSettings)}, seed=seed)


@dataclass(frozen=True)
class Matched(TreeSettings):
    """Tree settings shared by both learners and their seed (``max_depth=-1``: no depth limit,
    LightGBM's -1)."""

    seed: int = 0

    def ours(self, **extra) -> dict:
        """``GBFSClassifier`` / ``GBFSRegressor`` keyword arguments (``extra`` wins)."""
        return {"method": "gbfs", "mu": 0.0, "criterion": "newton", "leaf_estimate": "newton",
                "max_depth": self.max_depth, "max_leaves": self.max_leaves,
                "min_samples_leaf": self.min_samples_leaf, "min_child_weight": self.min_child_weight,
                "reg_lambda": self.reg_lambda, "learning_rate": self.learning_rate,
                "n_estimators": self.n_estimators, "max_bins": self.max_bins, "n_threads": self.threads,
                "random_state": self.seed, **extra}

    def lightgbm(self, objective: str = "binary", **extra) -> dict:
        """``lightgbm.train`` parameters (the number of rounds is ``n_estimators``, given apart)."""
        return {"objective": objective, "num_leaves": self.max_leaves, "max_depth": self.max_depth,
                "min_data_in_leaf": self.min_samples_leaf, "min_sum_hessian_in_leaf": self.min_child_weight,
                "lambda_l2": self.reg_lambda, "learning_rate": self.learning_rate, "max_bin": self.max_bins,
                "num_threads": self.threads, "verbose": -1, "deterministic": True, "seed": self.seed,
                **extra}

    def baseline(self, kind: str = "full", **extra) -> dict:
        """:class:`gbfs.baselines.lightgbm_baseline.LightGBMBaseline` keyword arguments."""
        return {"kind": kind, "n_estimators": self.n_estimators, "learning_rate": self.learning_rate,
                "max_depth": self.max_depth, "num_leaves": self.max_leaves,
                "min_child_samples": self.min_samples_leaf, "random_state": self.seed,
                "n_threads": self.threads, **extra}


def matched_params(n_trees: int, threads: int) -> dict:
    """Our estimator's parameters that match :func:`lgb_params` (:class:`Matched`)."""
    return Matched(n_estimators=n_trees, threads=threads).ours()


def lgb_params(threads: int) -> dict:
    """LightGBM's parameters that match :func:`matched_params`, all rows and columns in every tree."""
    return Matched(threads=threads).lightgbm(force_col_wise=False, bagging_fraction=1.0,
                                             feature_fraction=1.0)


def warm_up(threads: int, sparse: bool = False) -> None:
    """Compile (or load from numba's cache) every kernel so timings and memory exclude JIT.

    Dense data with and without mostly-zero columns; with ``sparse``, also ``scipy.sparse`` CSR.
    """
    rng = np.random.default_rng(0)
    X = rng.random((3000, 6))
    X[::9, 2] = np.nan
    y = (X[:, 0] + X[:, 1] > 1).astype(int)
    Xs = sp.csr_matrix(np.where(rng.random(X.shape) < 0.2, np.round(5 * X), 0.0))
    # 6000 rows of 255-bin columns: the histogram budget holds one histogram, as at the Gisette
    # shape, so the fit takes the one-buffer subtraction's kernels (40 columns: the parallel ones)
    X1 = rng.random((6000, 40))
    y1 = (X1[:, 0] + X1[:, 1] > 1).astype(int)
    for method, crit in (("gbfs", "newton"), ("agbm", "sse")):
        for data, labels in [(X, y), (Xs.toarray(), y), (X1, y1)] + ([(Xs, y)] if sparse else []):
            GBFSClassifier(method=method, criterion=crit, n_estimators=2, n_threads=threads,
                           max_depth=5).fit(data, labels).predict(data)
