"""What the selection path returns: one :class:`BudgetResult` per budget in a :class:`SelectionPath`,
with its table and plot (:func:`gbfs.selection_path` finds them)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class BudgetResult:
    """The chosen model of one budget.

    Attributes
    ----------
    budget : int
    mu : float or None
        Penalty of the chosen selection (None for GBDT-topK).
    source : str
        ``"penalised"`` (a probe's first K features), ``"unpenalised"`` (the unpenalised fit's
        first K), ``"topk-gain"``/``"topk-split"`` (its top K by gain or by split count) or
        ``"shrunk"`` (the next larger budget's model's top K by gain: backward elimination) or
        ``"rfe"`` (recursive feature elimination from the unpenalised fit's features, ``rfe_step``).
    features : ndarray of int
        The selected features, in order of selection.
    val_score : float or None
        Validation AUC (binary classifier), macro one-vs-rest AUC of the class probabilities (more
        than two classes: the ``val_auc`` such a fit records) or minus the validation RMSE
        (regressor) of the refitted model; None without an eval set.
    test_score : float or None
        The same on ``test_set`` (computed after the choice, never used for it).
    seconds : float
        Refit time of the chosen model.
    model : fitted estimator
    note : str
        Why the budget was not hit exactly, if it was not.
    cv_mean, cv_se : float or None
        With ``cv``: the mean score over the folds and its standard error.
    regret : float or None
        With ``test_set``: the best test score among the candidates this budget could have
        answered with, minus this answer's.
    size : float
        The answer in the budgets' unit: features (bags), or total cost with
        ``budget_unit="cost"``.
    """

    budget: float  # an int, unless the budgets are in cost units
    mu: float | None
    source: str
    features: np.ndarray
    val_score: float
    test_score: float | None
    seconds: float
    model: object
    note: str = ""
    cv_mean: float | None = None
    cv_se: float | None = None
    regret: float | None = None
    size: float | None = None

    @property
    def n_features(self) -> int:
        return int(self.features.shape[0])


@dataclass
class SelectionPath:
    """What :func:`selection_path` found: one :class:`BudgetResult` per budget, the probes and timings."""

    results: list[BudgetResult]
    probes: list[dict]  # mu, n_features, order, seconds, trees
    # budget, mu, source, also (other sources of the same set), n_features, val_score, cv_mean, cv_se,
    # test_score (with a test set)
    candidates: list[dict]
    mu_max: float
    seconds: float
    timings: dict = field(default_factory=dict)

    def __getitem__(self, budget: int) -> BudgetResult:
        for r in self.results:
            if r.budget == budget:
                return r
        raise KeyError(f"no budget {budget}; budgets: {[r.budget for r in self.results]}")

    def to_frame(self):
        """One row per budget (pandas DataFrame)."""
        import pandas as pd

        return pd.DataFrame([{"budget": r.budget, "n_features": r.n_features, "mu": r.mu, "source": r.source,
                              "val_score": r.val_score, "test_score": r.test_score, "seconds": r.seconds,
                              "features": r.features.tolist(), "note": r.note, "cv_mean": r.cv_mean,
                              "cv_se": r.cv_se, "regret": r.regret, "size": r.size} for r in self.results])

    def plot(self, ax=None):
        """The score the choice compared (validation, or the cross-validated mean with ``cv``) and the
        test score, if computed, against the number of features, with every candidate of every
        budget as a faint point; returns the matplotlib Axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 4))
        cv = any(r.cv_mean is not None for r in self.results)
        what, key = ("cross-validated", "cv_mean") if cv else ("validation", "val_score")
        ax.scatter([c["n_features"] for c in self.candidates], [c[key] for c in self.candidates],
                   s=12, alpha=0.35, color="grey", label=f"candidates ({what})")
        ks = [r.n_features for r in self.results]
        ax.plot(ks, [getattr(r, key) for r in self.results], "o-", label=f"chosen ({what})")
        if all(r.test_score is not None for r in self.results):
            ax.plot(ks, [r.test_score for r in self.results], "s--", label="chosen (test)")
        ax.set_xscale("log")
        ax.set_xlabel("number of features")
        ax.set_ylabel({"auc": "AUC", "macro_auc": "macro AUC"}.get(self.timings.get("metric"), "-RMSE"))
        ax.set_title(f"Selection path ({len(self.probes)} probes, {self.seconds:.1f} s)")
        ax.legend(fontsize=8)
        return ax
