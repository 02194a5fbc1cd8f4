"""A fixed grid of fits whose model files must not change when the booster is restructured.

``python tests/reference_models.py`` writes ``tests/data/reference_models.json``: for every fit of
:func:`grid` (methods x samplers x group-test scopes x budgets x losses) the sha256 of its model
file's canonical JSON without the ``params`` key (a renamed default is not a different model).
``test_reference_models.py`` refits the grid and compares the digests byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np

from gbfs import GBFSClassifier, GBFSRanker, GBFSRegressor
from gbfs.booster.kernels.portable import matvec
from gbfs.data import GENERATORS
from gbfs.estimators.model_io import model_to_dict

PATH = Path(__file__).parent / "data" / "reference_models.json"

CONTENT = ("n_features_in", "feature_names_in", "init_score", "best_iteration", "bin_edges", "trees",
           "classes", "selected_features")
METHODS = [
    {"method": "gbfs", "mu": 1.0},
    {"method": "agbm", "mu": 0.003},
    {"method": "gtgbm", "mu": 0.003, "n_target_features": 2, "group_test_scope": "node"},
    {"method": "gtgbm", "mu": 0.003, "n_target_features": 2, "group_test_scope": "tree"},
    {"method": "gtgbm", "mu": 0.003, "n_target_features": 2, "group_test_rows": 60,
     "group_test_scope": "node"},
    {"method": "topk", "max_features": 5},
]
SAMPLERS = [
    {},
    {"sampler": "sgb", "subsample": 0.4},
    {"sampler": "goss", "top_rate": 0.2, "other_rate": 0.2},
    {"sampler": "goss", "goss_style": "lightgbm"},
    {"sampler": "mvs", "subsample": 0.3, "mvs_lambda": 0.1},
    {"sampler": "mvs_adaptive", "subsample": 0.6},
]
VARIANTS = [
    {},
    {"max_features": 4},
    {"max_features": 4, "refit": True},
    {"criterion": "newton", "leaf_estimate": "newton", "reg_lambda": 1.0},
    {"feature_bags": "pairs", "feature_costs": "ramp"},
]


ESTIMATORS = {"clf": GBFSClassifier, "reg": GBFSRegressor, "multi": GBFSClassifier, "rank": GBFSRanker}


def data(n: int = 900, d: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows with a few informative features among noise, some NaN; binary and real targets."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    X[rng.random((n, d)) < 0.02] = np.nan
    x = np.nan_to_num(X, nan=0.5)
    # every feature carries some signal, decaying with its index: penalties and budgets bind
    # gbfs.booster.kernels.portable's matvec and the C library's sin and pow: BLAS and numpy's SIMD power and
    # sin round by CPU, and these rows must be the same on every machine
    sin = np.array([math.sin(v) for v in 5 * x[:, 7]])
    weights = np.array([2.0 * 0.85 ** k for k in range(d)])
    signal = matvec(x - 0.5, weights) + sin + x[:, 11] * x[:, 12]
    y_reg = signal + 0.3 * rng.standard_normal(n)
    return X, (y_reg > np.median(y_reg)).astype(int), y_reg


def grid() -> list[tuple[str, dict]]:
    """``(name, params)`` of every fit: all methods x samplers (plain), and every method with
    each variant (no sampler), for the classifier; smaller grids for the regressor, the multiclass
    classifier and the ranker, and fits that stop early on a validation split."""
    out = []
    for m in METHODS:
        for s in SAMPLERS:
            out.append(("clf", {**m, **s}))
        for v in VARIANTS[1:]:
            if m["method"] == "topk" and ("feature_bags" in v or "max_features" in v):
                continue
            out.append(("clf", {**m, **v}))
    for m in METHODS[:3]:
        for extra in ({}, SAMPLERS[4], VARIANTS[2]):
            out.append(("reg", {**m, **extra}))
    # softmax, LambdaRank and early stopping (a validation loss decides the kept iteration)
    for m in METHODS[:2]:
        for extra in ({}, SAMPLERS[4]):
            out.append(("multi", {**m, **extra}))
            out.append(("rank", {**m, **extra}))
    for kind in ("clf", "reg", "multi"):
        out.append((kind, {**METHODS[1], "early_stopping_rounds": 3}))
    return out


def fit(kind: str, params: dict, X: np.ndarray, y_clf: np.ndarray, y_reg: np.ndarray):
    d = X.shape[1]
    p = dict(params)
    if p.get("feature_bags") == "pairs":
        p["feature_bags"] = np.arange(d) // 2
    if p.get("feature_costs") == "ramp":
        p["feature_costs"] = 1.0 + np.arange(d) / d
    # three classes and four relevance grades from the quantiles of the real target; queries of 10 rows
    y = {"clf": y_clf, "reg": y_reg, "multi": np.searchsorted(np.quantile(y_reg, [1 / 3, 2 / 3]), y_reg),
         "rank": np.searchsorted(np.quantile(y_reg, [0.5, 0.75, 0.9]), y_reg)}[kind]
    est = ESTIMATORS[kind](n_estimators=12, max_leaves=8, min_samples_leaf=10, random_state=3, n_threads=1,
                           **p)
    fit_args = {"group": np.full(X.shape[0] // 10, 10)} if kind == "rank" else {}
    if "early_stopping_rounds" in p:
        est.set_params(n_estimators=60, learning_rate=1.0)
        return est.fit(X[:700], y[:700], eval_set=(X[700:], y[700:]))
    return est.fit(X, y, **fit_args)


def digest(est) -> str:
    body = model_to_dict(est)
    # the model, not its envelope (format keys, checksum) nor its parameters
    body = {k: body.get(k) for k in CONTENT}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def name_of(kind: str, params: dict) -> str:
    return kind + ":" + ",".join(f"{k}={v}" for k, v in sorted(params.items()))


def data_digests(scale: float = 0.05) -> dict[str, str]:
    """sha256 of every synthetic stand-in's arrays (small scale): the same seed, the same data."""
    out = {}
    for name in sorted(GENERATORS):
        d = GENERATORS[name](scale=scale, random_state=0)
        h = hashlib.sha256()
        for a in (d.X_train, d.y_train, d.X_test, d.y_test):
            h.update(np.ascontiguousarray(a.toarray() if hasattr(a, "toarray") else a).tobytes())
        out["data:" + name] = h.hexdigest()
    return out


def compute() -> dict[str, str]:
    X, y_clf, y_reg = data()
    return {**{name_of(k, p): digest(fit(k, p, X, y_clf, y_reg)) for k, p in grid()}, **data_digests()}


if __name__ == "__main__":
    # python tests/reference_models.py [OUT]: writes the digests to OUT (default: the reference)
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else PATH
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(compute(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")
