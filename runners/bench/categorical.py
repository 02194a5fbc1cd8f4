"""Categorical splits against LightGBM's, on the Flight stand-in before one-hot encoding
(``python -m runners.bench categorical``).

The data is :func:`gbfs.data.synthetic.flight.flight_frames`: 100 000 + 100 000 flights (times
``--row-scale``) with six categorical columns -- Month (12 levels), DayofMonth (31), DayOfWeek (7),
UniqueCarrier (22), Origin and Dest (280 airports each, more than one byte of bins: the 255 most
frequent get a bin, the rest count as missing) -- and two numeric ones (DepTime, Distance).

Rows, each fitted on the same training rows and scored on the same test rows:

* ``ours_categorical`` / ``lightgbm_categorical``: the core benchmark's matched settings
  (:func:`runners.bench.matched.matched_params` / :func:`runners.bench.matched.lgb_params`: Newton gain and
  leaves, depth 5 / 32 leaves, 255 bins, mu = 0) with the six columns as pandas ``category``,
  both with LightGBM's categorical defaults (cat_smooth 10, cat_l2 10, max_cat_threshold 32,
  min_data_per_group 100, max_cat_to_onehot 4);
* ``ours_onehot`` / ``lightgbm_onehot``: the same rows one-hot encoded
  (:func:`gbfs.data.formats.encode_flight`, ~634 columns), the papers' representation;
* ``agbm_categorical`` / ``agbm_onehot``: A-GBM with a first-use penalty (``--mu``), where a
  categorical column is one feature to pay for and a one-hot column one level;
* ``ours_categorical_ovr`` / ``agbm_categorical_ovr``: categorical splits one-vs-rest for every
  column (``max_cat_to_onehot=256``): the stand-in's signal sits on a few levels (3 carriers,
  3 origins, one month, one weekday), which single-category splits isolate without the
  many-vs-many splits' overfitting of 280 airports.

Per row: test AUC, fit seconds, per-tree milliseconds, features used.  Target: the categorical
AUC within :data:`TARGETS` ``auc_gap_pt`` points of LightGBM's (MET / NOT MET).  Results go to
``results/bench/categorical.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before any OpenMP runtime loads

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from gbfs import GBFSClassifier
from gbfs.booster.losses.metrics import roc_auc
from gbfs.data.formats import FLIGHT_LABEL, encode_flight
from gbfs.data.synthetic.flight import flight_frames
from runners.bench import provenance

CATEGORICAL = ("Month", "DayofMonth", "DayOfWeek", "UniqueCarrier", "Origin", "Dest")
TARGETS = {"auc_gap_pt": 0.5}


def frames(row_scale: float, seed: int = 0):
    """(X_train, y_train, X_test, y_test) with the categorical columns as pandas ``category`` over
    the levels of train and test together (as ``encode_flight`` keeps them)."""
    train, test = flight_frames(row_scale, seed)
    out = []
    for df in (train, test):
        X = df.drop(columns=[FLIGHT_LABEL]).copy()
        for c in CATEGORICAL:
            levels = sorted(set(train[c]) | set(test[c]))
            X[c] = pd.Categorical(X[c], categories=levels)
        out += [X, (df[FLIGHT_LABEL] == "Y").to_numpy(np.float64)]
    return tuple(out)


def _ours(X, y, Xt, yt, params, n_trees) -> dict:
    t0 = time.perf_counter()
    m = GBFSClassifier(**params).fit(X, y)
    seconds = time.perf_counter() - t0
    return {"auc": float(roc_auc(yt, m.predict_proba(Xt)[:, 1])), "fit_s": seconds,
            "per_tree_ms": 1000 * m.timings_["boosting_seconds"] / max(m.n_iter_, 1),
            "n_features": int(m.n_features_selected_)}


def _lightgbm(X, y, Xt, yt, params, n_trees) -> dict:
    import lightgbm as lgb

    t0 = time.perf_counter()
    ds = lgb.Dataset(X, y, params={"max_bin": params["max_bin"], "verbose": -1}).construct()
    t1 = time.perf_counter()
    booster = lgb.train(params, ds, n_trees)
    t2 = time.perf_counter()
    used = np.flatnonzero(booster.feature_importance("split") > 0)
    return {"auc": float(roc_auc(yt, booster.predict(Xt))), "fit_s": t2 - t0,
            "per_tree_ms": 1000 * (t2 - t1) / n_trees, "n_features": int(used.size)}


def run(args: argparse.Namespace) -> int:
    from runners.bench.matched import lgb_params, matched_params, warm_up

    warm_up(args.threads)
    X, y, Xt, yt = frames(args.row_scale)
    raw_tr, raw_te = flight_frames(args.row_scale, 0)
    H, yh, Ht, yht = encode_flight(raw_tr, raw_te)[:4]
    matched = matched_params(args.trees, args.threads)
    agbm = {**matched, "method": "agbm", "mu": args.mu}
    # compile (or load) every kernel outside the timings: two trees of each setting on the timed
    # data itself (a small slice leaves the large data's kernels to the first timed fit)
    for params, (A, b, At) in ((matched, (X, y, Xt)), (agbm, (X, y, Xt)), (matched, (H, yh, Ht)),
                               ({**matched, "max_cat_to_onehot": 256}, (X, y, Xt))):
        GBFSClassifier(**{**params, "n_estimators": 2}).fit(A, b).predict_proba(At)
    lgb = {**lgb_params(args.threads), "objective": "binary"}
    rows = {
        "ours_categorical": _ours(X, y, Xt, yt, matched, args.trees),
        "lightgbm_categorical": _lightgbm(X, y, Xt, yt, lgb, args.trees),
        "ours_onehot": _ours(H, yh, Ht, yht, matched, args.trees),
        "lightgbm_onehot": _lightgbm(H, yh, Ht, yht, lgb, args.trees),
        "agbm_categorical": _ours(X, y, Xt, yt, agbm, args.trees),
        "agbm_onehot": _ours(H, yh, Ht, yht, agbm, args.trees),
        "ours_categorical_ovr": _ours(X, y, Xt, yt, {**matched, "max_cat_to_onehot": 256}, args.trees),
        "agbm_categorical_ovr": _ours(X, y, Xt, yt, {**agbm, "max_cat_to_onehot": 256}, args.trees),
    }
    gap = 100 * (rows["lightgbm_categorical"]["auc"] - rows["ours_categorical"]["auc"])
    ratio = rows["ours_categorical"]["per_tree_ms"] / rows["lightgbm_categorical"]["per_tree_ms"]
    verdict = {"auc_gap_pt": round(gap, 3), "target": TARGETS["auc_gap_pt"],
               "met": bool(gap <= TARGETS["auc_gap_pt"]), "per_tree_ratio": ratio}
    print(f"{'row':22s} {'AUC %':>7s} {'fit s':>7s} {'ms/tree':>8s} {'features':>8s}")
    for name, r in rows.items():
        print(f"{name:22s} {100 * r['auc']:7.2f} {r['fit_s']:7.2f} {r['per_tree_ms']:8.2f} "
              f"{r['n_features']:8d}")
    print(f"\ncategorical AUC gap vs LightGBM: {gap:.2f} pt (target <= {TARGETS['auc_gap_pt']}): "
          f"{'MET' if verdict['met'] else 'NOT MET'}; per-tree time ratio {verdict['per_tree_ratio']:.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "verdict": verdict, "row_scale": args.row_scale,
                                    "trees": args.trees, "mu": args.mu, **provenance()}, indent=2))
    print(f"wrote {args.out}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("categorical",
                       help="categorical splits vs LightGBM's on the Flight stand-in's raw columns")
    p.add_argument("--row-scale", type=float, default=1.0, help="multiply the 100 000 + 100 000 rows")
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mu", type=float, default=0.002, help="A-GBM's penalty in the agbm_* rows")
    p.add_argument("--out", type=Path, default=Path("results/bench/categorical.json"))
    p.set_defaults(handler=run)
