"""The Koepke-Bilenko paper's experiments (ICML 2012, Section 5) on scikit-learn's bundled data.

**Figure 1** (Section 5.2's procedure): with ``k``-fold cross-validation, per fold a model on every
feature (loss ``L(f*)`` on the held-out fold) and, per feature ``i``, a model without it (loss
``L(f0^-i)``).  The *actual utility* of ``i`` is ``Delta L_i = L(f0^-i) - L(f*)`` averaged over the
folds, *significant* when a one-sided t-test over the folds puts it above 0 at p < 0.05.  The
*predicted utility* is Algorithm 1 (:func:`gbfs.feature_utility`) on the held-out fold's rows of the
model without ``i``, with column ``i`` as the candidate: its ``z`` per fold, combined over the folds
by Stouffer's sum ``sum z / sqrt(k)`` (the ``z`` are standardised against the bootstrap null), and
the predicted p-value from it.  Log-loss on a classification set (``breast_cancer``, the paper's
ADULT) and squared loss on a regression set (``diabetes``, its HOUSING).

**Figure 2**: label-based heuristics that need no model -- the chi-squared statistic (scikit-learn's
``chi2`` on min-max scaled columns), the information gain ratio (the mutual information of the label
and the column in ``bins`` quantile bins over the bins' entropy) and CFS (Hall 1999: how much the
merit ``k r_cf / sqrt(k + k (k - 1) r_ff)`` of all the features drops without feature ``i``,
``r`` absolute Pearson correlations) -- scored on the same data as the actual utilities.

The ranking experiment (NDCG with LambdaMART's lambda gradients) is not run: the utility test takes
classifiers and regressors only (see ``NOT_HERE`` in :mod:`runners.paper.utility_kb.report`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.feature_selection import chi2
from sklearn.metrics import log_loss, mean_squared_error
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.preprocessing import MinMaxScaler

from gbfs import GBFSClassifier, GBFSRegressor, feature_utility

log = logging.getLogger(__name__)

#: name -> (loader, task, the paper's data set it stands for)
DATASETS = {"breast_cancer": (load_breast_cancer, "classification", "ADULT"),
            "diabetes": (load_diabetes, "regression", "HOUSING")}


def _model(task: str, booster: Mapping, seed: int):
    """A plain gradient-boosted model (no feature price) with the loss of ``task``."""
    cls = GBFSClassifier if task == "classification" else GBFSRegressor
    return cls(method="agbm", mu=0.0, random_state=seed, **booster)


def _loss(task: str, model, X: np.ndarray, y: np.ndarray) -> float:
    if task == "classification":
        return float(log_loss(y, model.predict_proba(X), labels=model.classes_))
    return float(mean_squared_error(y, model.predict(X)))


def ablation(name: str, cfg: Mapping) -> pd.DataFrame:
    """Figure 1's table for data set ``name``: per fold and feature, the actual loss change and the
    test's ``z`` and p-value."""
    loader, task, _ = DATASETS[name]
    X, y = loader(return_X_y=True)
    seed, folds = int(cfg["seed"]), int(cfg["folds"])
    kind = StratifiedKFold if task == "classification" else KFold
    splitter = kind(folds, shuffle=True, random_state=seed)
    rows = []
    for f, (tr, va) in enumerate(splitter.split(X, y)):
        full = _model(task, cfg["booster"], seed).fit(X[tr], y[tr])
        base = _loss(task, full, X[va], y[va])
        for i in range(X.shape[1]):
            rest = np.delete(np.arange(X.shape[1]), i)
            m = _model(task, cfg["booster"], seed).fit(X[tr][:, rest], y[tr])
            u = feature_utility(m, X[va][:, rest], y[va], X[va][:, i], n_bootstrap=int(cfg["n_bootstrap"]),
                                random_state=seed + f)
            rows.append({"dataset": name, "task": task, "fold": f, "feature": i,
                         "delta_loss": _loss(task, m, X[va][:, rest], y[va]) - base,
                         "z": float(u.z[0]), "p_value": float(u.p_value[0])})
        log.info("utility test: %s fold %d of %d", name, f + 1, folds)
    return pd.DataFrame(rows)


def per_feature(table: pd.DataFrame) -> pd.DataFrame:
    """Fold rows summarised per feature: the actual utility (mean loss change) and its one-sided
    p-value over the folds; the predicted utility (Stouffer's combined ``z``) and its p-value."""
    out = []
    for (name, feat), g in table.groupby(["dataset", "feature"]):
        d = g.delta_loss.to_numpy()
        p_actual = float(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue) if np.ptp(d) > 0 else (
            0.0 if d[0] > 0 else 1.0)
        z = float(g.z.sum() / math.sqrt(len(g)))
        out.append({"dataset": name, "feature": int(feat), "actual": float(d.mean()), "p_actual": p_actual,
                    "predicted_z": z, "p_predicted": float(stats.norm.sf(z))})
    return pd.DataFrame(out)


def info_gain_ratio(x: np.ndarray, y: np.ndarray, bins: int) -> float:
    """Information gain of label ``y`` from ``x`` in ``bins`` quantile bins, over the bins' entropy."""
    edges = np.unique(np.quantile(x, np.linspace(0, 1, bins + 1)[1:-1]))
    b = np.searchsorted(edges, x, side="right")
    joint = pd.crosstab(b, y).to_numpy().astype(np.float64) / len(y)
    pb, py = joint.sum(axis=1), joint.sum(axis=0)
    nz = joint > 0
    mi = float(np.sum(joint[nz] * np.log(joint[nz] / np.outer(pb, py)[nz])))
    split = float(-np.sum(pb[pb > 0] * np.log(pb[pb > 0])))
    return mi / split if split > 0 else 0.0


def cfs_drop(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per feature, CFS's merit of every feature minus the merit without that feature (Hall 1999)."""
    r = np.abs(np.corrcoef(np.column_stack([X, y]), rowvar=False))
    r = np.nan_to_num(r)
    rcf, rff = r[:-1, -1], r[:-1, :-1]

    def merit(idx: np.ndarray) -> float:
        k = len(idx)
        off = (rff[np.ix_(idx, idx)].sum() - k) / (k * (k - 1)) if k > 1 else 0.0
        return k * rcf[idx].mean() / math.sqrt(k + k * (k - 1) * off)

    every = np.arange(X.shape[1])
    whole = merit(every)
    return np.array([whole - merit(np.delete(every, i)) for i in every])


def heuristics(name: str, bins: int) -> pd.DataFrame:
    """Figure 2's scores of every feature of a classification set."""
    loader, _, _ = DATASETS[name]
    X, y = loader(return_X_y=True)
    chi, _ = chi2(MinMaxScaler().fit_transform(X), y)
    return pd.DataFrame({"dataset": name, "feature": np.arange(X.shape[1]), "chi2": chi,
                         "info_gain_ratio": [info_gain_ratio(X[:, j], y, bins) for j in range(X.shape[1])],
                         "cfs": cfs_drop(X, y)})


def compute(cfg: Mapping, data_dir: Path | None = None) -> tuple[dict[str, pd.DataFrame], dict]:
    """Every experiment of the part: ``({"folds", "heuristics"}: tables, meta)``; ``cfg`` is
    ``reproduce.scales.<scale>.utility``.  ``data_dir`` is unused (the data are bundled)."""
    folds = pd.concat([ablation(n, cfg) for n in cfg["datasets"]], ignore_index=True)
    classification = [n for n in cfg["datasets"] if DATASETS[n][1] == "classification"]
    heur = pd.concat([pd.DataFrame(columns=["dataset", "feature", "chi2", "info_gain_ratio", "cfs"]),
                      *[heuristics(n, int(cfg["bins"])) for n in classification]], ignore_index=True)
    meta = {"datasets": {n: [*DATASETS[n][0](return_X_y=True)[0].shape, DATASETS[n][1], DATASETS[n][2]]
                         for n in cfg["datasets"]}}
    return {"folds": folds, "heuristics": heur}, meta
