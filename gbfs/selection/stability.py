"""Selection stability: how much a feature selector's choice depends on the rows it was fitted on.

:func:`selection_stability` refits a selector on seeded subsamples of the rows and compares the
selections.  Half-size subsamples without replacement are the default, as in the stability selection
of Meinshausen & Bühlmann (2010, JRSS-B): two halves differ as much as two independent samples can
while each still holds enough rows to fit.  The agreement between two selections A and B of the d
features is measured by

* the Jaccard index ``|A ∩ B| / |A ∪ B|`` (1 for two empty sets);
* Kuncheva's consistency index (Kuncheva 2007, "A stability index for feature selection"), which
  corrects the overlap ``r = |A ∩ B|`` for the overlap expected by chance between random subsets of
  size ``k = |A| = |B|``: ``(r·d − k²) / (k·(d − k))``, in [−1, 1], 0 at chance level, 1 for
  identical sets.  When the sizes differ, the generalisation of Lustgarten et al. (2009, "Measuring
  stability of feature selection in biomedical datasets", AMIA) is used:
  ``(r − k_a·k_b/d) / (min(k_a, k_b) − max(0, k_a + k_b − d))``.  It is also 0 at chance level, but
  it divides by the range of r where Kuncheva divides by its maximum minus its expectation, so at
  equal sizes the two differ; Nogueira et al. (2018, "On the stability of feature selection
  algorithms", JMLR) review these properties.  Where the denominator is 0 (an empty selection, or
  one holding every feature) the index is undefined: NaN, left out of the means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit
from sklearn.utils import _safe_indexing, check_random_state
from tqdm.auto import tqdm

from .. import validation as V

__all__ = ["StabilityResult", "jaccard_index", "kuncheva_index", "selection_stability"]

_SEED_MAX = np.iinfo(np.int32).max


def _as_set(name: str, a, n_features: int | None = None) -> set[int]:
    arr = np.asarray(a).ravel()
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer feature indices, got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or (n_features is not None and arr.max() >= n_features)):
        raise ValueError(f"{name} must hold feature indices in [0, {n_features}), got {arr.tolist()}")
    return {int(i) for i in arr}


def jaccard_index(a, b) -> float:
    """Jaccard index ``|A ∩ B| / |A ∪ B|`` of two selections of feature indices; 1 if both are empty."""
    sa, sb = _as_set("a", a), _as_set("b", b)
    union = len(sa | sb)
    return 1.0 if union == 0 else len(sa & sb) / union


def kuncheva_index(a, b, n_features: int) -> float:
    """Kuncheva's (2007) consistency index of two selections out of ``n_features`` features.

    Lustgarten et al.'s (2009) generalisation when their sizes differ; NaN where the denominator is
    0 (an empty selection or one of every feature).  The formulas are in the module docstring.
    """
    d = V.check_int("n_features", n_features, 1)
    sa, sb = _as_set("a", a, d), _as_set("b", b, d)
    ka, kb, r = len(sa), len(sb), len(sa & sb)
    if ka == kb:
        num, den = r * d - ka * ka, ka * (d - ka)
    else:
        num, den = r - ka * kb / d, min(ka, kb) - max(0, ka + kb - d)
    return math.nan if den == 0 else num / den


def _mean_over_pairs(m: np.ndarray) -> float:
    vals = m[np.triu_indices(m.shape[0], k=1)]
    vals = vals[~np.isnan(vals)]
    return float(vals.mean()) if vals.size else math.nan


@dataclass
class StabilityResult:
    """Selections of a selector refitted on subsamples, and how much they agree.

    Attributes
    ----------
    selections : list of ndarray of int
        Each resample's selected features, in order of selection.
    n_features : int
        Number of features of the data (``d`` of Kuncheva's index).
    frequency : ndarray of shape (n_features,)
        Share of the resamples that selected each feature.
    jaccard : float
        Mean Jaccard index over all pairs of resamples (a pair of empty selections counts as 1).
    kuncheva : float
        Mean Kuncheva (equal sizes) or Lustgarten (different sizes) index over the pairs where it
        is defined; NaN if it is defined for none.
    feature_names : list of str or None
        Column names of a DataFrame ``X``.
    subsample, random_state
        The settings of :func:`selection_stability` (None when built by :meth:`from_selections`).
    """

    selections: list[np.ndarray]
    n_features: int
    frequency: np.ndarray
    jaccard: float
    kuncheva: float
    feature_names: list[str] | None = None
    subsample: float | None = None
    random_state: int | None = None

    @classmethod
    def from_selections(cls, selections, n_features: int, feature_names=None, subsample=None,
                        random_state=None) -> StabilityResult:
        """Summarise given selections (at least two) of features out of ``n_features``."""
        d = V.check_int("n_features", n_features, 1)
        sels = [np.asarray(s).ravel() for s in selections]
        if len(sels) < 2:
            raise ValueError(f"selections must hold at least 2 selections, got {len(sels)}")
        freq = np.zeros(d)
        for i, s in enumerate(sels):
            freq[sorted(_as_set(f"selections[{i}]", s, d))] += 1
        sels = [s.astype(np.int64) for s in sels]
        names = None if feature_names is None else [str(c) for c in feature_names]
        if names is not None and len(names) != d:
            raise ValueError(f"feature_names has {len(names)} entries but n_features is {d}")
        res = cls(sels, d, freq / len(sels), math.nan, math.nan, names, subsample, random_state)
        res.jaccard = _mean_over_pairs(res.pairwise("jaccard"))
        res.kuncheva = _mean_over_pairs(res.pairwise("kuncheva"))
        return res

    @property
    def n_resamples(self) -> int:
        return len(self.selections)

    def pairwise(self, index: str = "jaccard") -> np.ndarray:
        """Matrix of ``index`` (``"jaccard"`` or ``"kuncheva"``) between every two resamples."""
        V.check_choice("index", index, ("jaccard", "kuncheva"))
        n = self.n_resamples
        m = np.empty((n, n))
        for i in range(n):
            for j in range(i, n):
                a, b = self.selections[i], self.selections[j]
                v = jaccard_index(a, b) if index == "jaccard" else kuncheva_index(a, b, self.n_features)
                m[i, j] = m[j, i] = v
        return m

    def _name(self, f: int) -> str:
        return self.feature_names[f] if self.feature_names is not None else f"x{f}"

    def _ranked(self) -> np.ndarray:
        """Features ever selected, most frequent first (ties by index, so the order is deterministic)."""
        order = np.argsort(-self.frequency, kind="stable")
        return order[self.frequency[order] > 0]

    def to_dict(self) -> dict:
        """JSON-ready summary (lists, floats, None for NaN), e.g. for ``json.dumps(..., allow_nan=False)``."""
        def num(v: float) -> float | None:
            return None if math.isnan(v) else float(v)

        return {"n_resamples": self.n_resamples, "subsample": self.subsample,
                "random_state": self.random_state, "n_features": self.n_features,
                "jaccard": num(self.jaccard), "kuncheva": num(self.kuncheva),
                "frequency": [float(v) for v in self.frequency],
                "selections": [[int(f) for f in s] for s in self.selections],
                "most_frequent": [{"feature": int(f), "name": self._name(int(f)),
                                   "frequency": float(self.frequency[f])} for f in self._ranked()]}

    def plot(self, ax=None, top: int = 30):
        """Bar chart of the selection frequency of the ``top`` most frequently selected features;
        returns the matplotlib Axes."""
        import matplotlib.pyplot as plt

        top = V.check_int("top", top, 1)
        if ax is None:
            _, ax = plt.subplots(figsize=(max(4.0, 0.25 * top + 1.5), 3.5))
        feats = self._ranked()[:top]
        ax.bar(range(len(feats)), self.frequency[feats], color="tab:blue")
        ax.set_xticks(range(len(feats)), [self._name(int(f)) for f in feats], rotation=90, fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("selection frequency")
        ax.set_title(f"{self.n_resamples} resamples: Jaccard {self.jaccard:.2f}, "
                     f"Kuncheva {self.kuncheva:.2f}", fontsize=10)
        return ax


def selection_stability(estimator, X, y, *, n_resamples: int = 20, subsample: float = 0.5, eval_set=None,
                        random_state=None, stratify: bool | None = None,
                        verbose: bool = False) -> StabilityResult:
    """Refit a feature selector on subsamples of the rows and measure how stable its selection is.

    Parameters
    ----------
    estimator : estimator
        Unfitted or fitted; ``sklearn.base.clone`` of it is fitted on each subsample and must then
        expose ``selected_features_`` (GBFSClassifier, GBFSRegressor, LightGBMBaseline do).
    X : ndarray or DataFrame of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    n_resamples : int, default=20
        Number of subsamples (at least 2: the indices compare pairs).
    subsample : float in (0, 1], default=0.5
        Share of the rows in each subsample, drawn without replacement (``round(subsample * n)``
        rows).  Half, as in stability selection.  At 1 every fit sees all rows and only the
        estimator's own randomness varies.
    eval_set : tuple (X_val, y_val) or None
        Passed to ``fit(..., eval_set=eval_set)`` (e.g. for early stopping) when given; it is not
        resampled, so every fit stops on the same data.
    random_state : int, RandomState instance or None
        Seeds the subsamples and, if the estimator has a ``random_state`` parameter, replaces its
        value by a distinct seed for each fit: the same seed gives the same result, while the fits
        do not all share the same internal randomness.
    stratify : bool or None
        Keep the class proportions of ``y`` in every subsample (``StratifiedShuffleSplit``);
        None: yes for classifiers, no otherwise.
    verbose : bool, default=False
        A progress bar (tqdm, stderr) over the fits.

    Returns
    -------
    StabilityResult
        Selections, per-feature selection frequency, mean pairwise Jaccard and Kuncheva indices.
    """
    if not (hasattr(estimator, "fit") and hasattr(estimator, "get_params")):
        raise TypeError("estimator must be a scikit-learn estimator with fit and get_params, "
                        f"got {type(estimator).__name__}")
    n_resamples = V.check_int("n_resamples", n_resamples, 2)
    subsample = V.check_real("subsample", subsample, 0.0, 1.0, low_open=True)
    V.check_bool("verbose", verbose)
    if stratify is not None and not isinstance(stratify, (bool, np.bool_)):
        raise TypeError(f"stratify must be True, False or None, got {stratify!r}")
    if eval_set is not None and not (isinstance(eval_set, (tuple, list)) and len(eval_set) == 2):
        raise TypeError("eval_set must be a tuple (X_val, y_val) or None")
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    if len(X.shape) != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    n, d = int(X.shape[0]), int(X.shape[1])
    if np.ndim(y) != 1 or len(y) != n:
        raise ValueError(f"y must be 1-D with one entry per row of X ({n}), got shape {np.shape(y)}")
    size = round(subsample * n)
    if size < 1:
        raise ValueError(f"subsample={subsample} of {n} rows leaves no row")
    stratify = is_classifier(estimator) if stratify is None else bool(stratify)

    rng = check_random_state(random_state)
    # consecutive fit seeds from one draw: distinct by construction and within int32 (LightGBM's seed)
    split_seed, fit_seed = (int(s) for s in rng.randint(_SEED_MAX - n_resamples, size=2))
    if size == n:
        rows = [np.arange(n)] * n_resamples
    else:
        cls = StratifiedShuffleSplit if stratify else ShuffleSplit
        splitter = cls(n_splits=n_resamples, train_size=size, random_state=split_seed)
        try:
            # sorted: a subsample keeps the original row order, as a smaller data set would
            rows = [np.sort(tr) for tr, _ in splitter.split(np.zeros((n, 1)), y)]
        except ValueError as e:
            raise ValueError(f"cannot draw {size} of {n} rows with subsample={subsample}"
                             f"{' stratified by y' if stratify else ''}: {e}") from e

    has_seed = "random_state" in clone(estimator).get_params(deep=False)
    kwargs = {} if eval_set is None else {"eval_set": eval_set}
    selections = []
    for i, idx in enumerate(tqdm(rows, desc="selection stability", unit="fit", disable=not verbose)):
        est = clone(estimator)
        if has_seed:
            est.set_params(random_state=fit_seed + i)
        est.fit(_safe_indexing(X, idx), _safe_indexing(y, idx), **kwargs)
        if not hasattr(est, "selected_features_"):
            raise TypeError(f"estimator {type(est).__name__} has no selected_features_ after fit")
        selections.append(np.asarray(est.selected_features_, dtype=np.int64).copy())

    names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
    seed = int(random_state) if isinstance(random_state, (int, np.integer)) else None
    return StabilityResult.from_selections(selections, d, names, subsample, seed)
