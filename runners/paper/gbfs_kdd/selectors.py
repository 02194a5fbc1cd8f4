"""The GBFS paper's feature selectors (Section 5.3, "Baselines"), each giving points of an error
against number-of-features curve on one train/test split.

* **L1-LR** (Lee et al. 2006): scikit-learn's L1-penalised ``LogisticRegression`` on standardised
  columns, one point per regularisation strength ``C``; its features are the non-zero weights.
* **RF-FS** (Hastie et al. 2009): scikit-learn's ``RandomForestClassifier`` ranks the features by
  impurity decrease; a forest retrained on the top ``k`` is scored, per ``k``.  The paper's forests
  have 2000 trees and "at most 20 elements per leaf node" (``min_samples_split=21``).
* **mRMR** (Peng et al. 2005): the ``mrmr_selection`` package's greedy order with mutual information
  (scikit-learn's ``mutual_info_classif``) as relevance and Pearson correlation as redundancy; an
  RBF-SVM is trained on the top ``k``, as in the paper.
* **HSIC Lasso** (Yamada et al. 2014): the ``pyHSICLasso`` package (its authors'); its first ``k``
  features, then an RBF-SVM.
* **GBFS**: :class:`gbfs.GBFSClassifier` with ``method="gbfs"`` (the paper's Algorithm 1), one point
  per trade-off ``mu`` of Eq. (7); the number of trees is chosen by early stopping on an 80/20
  split of the training rows, the paper's validation protocol.

The RBF-SVM (:func:`svm_error`) is tuned over ``C`` on random 80/20 splits of the training rows
and retrained on all of them (the paper's mRMR and HSIC protocol, and its Figure 5).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.feature_selection import mutual_info_classif
from sklearn.model_selection import GridSearchCV, ShuffleSplit, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from gbfs import GBFSClassifier
from runners.bench.selection.families import l1_logistic


@dataclass(frozen=True)
class Split:
    """One seeded train/test split of a data set."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    seed: int


def split(X: np.ndarray, y: np.ndarray, test_fraction: float, seed: int) -> Split:
    """A stratified train/test split drawn from ``seed``."""
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=test_fraction, random_state=seed, stratify=y)
    return Split(Xtr, ytr, Xte, yte, seed)


def validation(s: Split) -> Split:
    """The 80/20 fit/validation split of ``s``'s training rows (stratified, same seed): GBFS's early
    stopping and the choices of ``mu`` and ``C`` are made on it."""
    return split(s.X_train, s.y_train, 0.2, s.seed)


def error(model, s: Split, features: Sequence[int]) -> float:
    """Test error of ``model`` fitted on the training rows' ``features``."""
    cols = np.asarray(features, dtype=np.int64)
    model.fit(s.X_train[:, cols], s.y_train)
    return float(np.mean(model.predict(s.X_test[:, cols]) != s.y_test))


def point(method: str, param: float, features: Sequence[int], err: float) -> dict:
    """One point of a curve: the selector's setting, its features (in order) and the test error."""
    feats = [int(f) for f in features]
    return {"method": method, "param": float(param), "n_features": len(feats), "error": err,
            "features": " ".join(map(str, feats))}


def l1_points(s: Split, Cs: Sequence[float]) -> list[dict]:
    """L1-LR at each ``C``: its non-zero weights and its own test error (no refit, as in the paper)."""
    out = []
    for C in Cs:
        model = l1_logistic(C, s.seed).fit(s.X_train, s.y_train)
        coef = np.abs(model[-1].coef_).sum(axis=0)
        feats = np.flatnonzero(coef)[np.argsort(-coef[coef > 0], kind="stable")]
        err = float(np.mean(model.predict(s.X_test) != s.y_test))
        out.append(point("L1-LR", C, feats, err))
    return out


def forest(n_trees: int, seed: int, threads: int) -> RandomForestClassifier:
    """The paper's random forest: ``n_trees`` trees grown until a node holds at most 20 rows."""
    return RandomForestClassifier(n_estimators=n_trees, min_samples_split=21, random_state=seed,
                                  n_jobs=threads)


def rf_order(s: Split, n_trees: int, threads: int) -> np.ndarray:
    """RF-FS's ranking: every feature by the forest's mean impurity decrease, largest first."""
    imp = forest(n_trees, s.seed, threads).fit(s.X_train, s.y_train).feature_importances_
    return np.argsort(-imp, kind="stable")


def mrmr_order(s: Split, k: int, threads: int) -> np.ndarray:
    """mRMR's first ``k`` features (``mrmr_selection``; mutual-information relevance).  Features whose
    estimated mutual information is 0 are never picked, so fewer than ``k`` may come back."""
    from mrmr import mrmr_classif

    def relevance(X: pd.DataFrame, y: pd.Series) -> pd.Series:
        mi = mutual_info_classif(X.to_numpy(), y.to_numpy(), random_state=s.seed)
        return pd.Series(mi, index=X.columns)

    X = pd.DataFrame(s.X_train)
    chosen = mrmr_classif(X=X, y=pd.Series(s.y_train), K=int(k), relevance=relevance,
                          n_jobs=threads, show_progress=False)
    return np.asarray(chosen, dtype=np.int64)


def hsic_order(s: Split, k: int) -> np.ndarray:
    """HSIC Lasso's first ``k`` features (``pyHSICLasso``: block HSIC Lasso, its default blocks of
    20 rows and 3 permutations; the rows beyond a multiple of 20 are left out of the kernels, as the
    package does and warns).

    The package prints its settings and seeds NumPy's global generator with fixed numbers; both are
    contained here (its output and that warning swallowed, the global state restored), so it is
    deterministic and leaves no trace."""
    from pyHSICLasso import HSICLasso

    state = np.random.get_state()
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="B .* must be an exact divisor")
            h = HSICLasso()
            h.input(s.X_train, s.y_train)
            h.classification(int(k), B=20, M=3, n_jobs=1)
        return np.asarray(h.get_index(), dtype=np.int64)
    finally:
        np.random.set_state(state)


def svm(seed: int, n_splits: int) -> GridSearchCV:
    """An RBF-SVM on standardised columns, ``C`` tuned on ``n_splits`` random 80/20 splits of the
    training rows and refitted on all of them."""
    model = make_pipeline(StandardScaler(), SVC(kernel="rbf", gamma="scale"))
    cv = ShuffleSplit(n_splits=n_splits, test_size=0.2, random_state=seed)
    return GridSearchCV(model, {"svc__C": [1.0, 10.0, 100.0]}, cv=cv)


def svm_error(s: Split, features: Sequence[int], n_splits: int) -> float:
    """Test error of the tuned RBF-SVM (:func:`svm`) on ``features`` (NaN without features)."""
    if len(features) == 0:
        return float("nan")
    return error(svm(s.seed, n_splits), s, features)


def ranking_points(method: str, s: Split, order: np.ndarray, ks: Sequence[int], model_of) -> list[dict]:
    """A ranking's curve: ``model_of()`` fitted on its top ``k`` features, for each ``k`` it reaches."""
    return [point(method, k, order[:k], error(model_of(), s, order[:k]))
            for k in ks if k <= len(order)]


def gbfs_model(mu: float, booster: dict, seed: int, bags: np.ndarray | None = None) -> GBFSClassifier:
    """GBFS (Algorithm 1) at trade-off ``mu`` with the booster settings ``booster``."""
    return GBFSClassifier(method="gbfs", mu=float(mu), feature_bags=bags, random_state=seed, **booster)


def gbfs_fit(s: Split, mu: float, booster: dict, bags: np.ndarray | None = None) -> GBFSClassifier:
    """GBFS fitted on 80 % of the training rows, its trees stopped early on the other 20 %."""
    v = validation(s)
    return gbfs_model(mu, booster, s.seed, bags).fit(v.X_train, v.y_train, eval_set=[(v.X_test, v.y_test)])


def gbfs_points(s: Split, mus: Sequence[float], booster: dict, bags: np.ndarray | None = None,
                method: str = "GBFS") -> list[dict]:
    """GBFS's curve: one point per ``mu``, its features in order of first use."""
    out = []
    for mu in mus:
        est = gbfs_fit(s, mu, booster, bags)
        err = float(np.mean(est.predict(s.X_test) != s.y_test))
        out.append(point(method, mu, est.selected_features_, err))
    return out
