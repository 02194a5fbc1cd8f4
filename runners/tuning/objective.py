"""The score a tuning trial maximises, and whether the feature budget is a constraint or a penalty.

``tune.objective`` is the method's validation score (``val_auc``, ``val_ndcg_at_10``) alone, or held
to ``tune.feature_budget`` (``..._budget``): in ``budget_mode: penalty`` the score loses
``budget_penalty`` per feature over the budget; in ``constraint`` the budget is a constraint of the
study (Optuna's ``set_constraint``, or ``constraints_func`` before Optuna 5); ``hard`` fits every
trial within the budget (:mod:`runners.core.budget`).
"""

from __future__ import annotations

from collections.abc import Mapping

import optuna
from omegaconf import DictConfig
from optuna.trial import FrozenTrial

from runners.core import budget

#: the suffix of the objective that holds the score to ``tune.feature_budget`` (``val_auc_budget``)
BUDGET = "_budget"
#: the objectives of the binary methods (a ranking method's: ``val_ndcg_at_10``, ``val_ndcg_at_10_budget``)
OBJECTIVES = ("val_auc", "val_auc" + BUDGET)
BUDGET_MODES = ("penalty", "constraint", budget.HARD)

def constrained(tune: DictConfig | Mapping) -> bool:
    """Whether the feature budget is a hard constraint (``objective: val_auc_budget``, or another
    score's ``*_budget``, with ``budget_mode: constraint``) rather than a penalty."""
    mode = tune.get("budget_mode") or "penalty"
    if mode not in BUDGET_MODES:
        raise ValueError(f"tune.budget_mode must be one of {BUDGET_MODES}, got {mode!r}")
    return str(tune["objective"]).endswith(BUDGET) and mode == "constraint"


def objective_value(score: float, n_features: float, tune: DictConfig | Mapping,
                    score_name: str = "val_auc") -> float:
    """The score a trial maximises.

    Parameters
    ----------
    score : float
        The validation score ``score_name`` of the trial's model.
    n_features : float
        Number of features the model uses.
    tune : mapping
        ``objective`` (``score_name`` or ``score_name + "_budget"``: "val_auc" or "val_auc_budget"
        for a binary method, "val_ndcg_at_10" or "val_ndcg_at_10_budget" for a ranking one),
        ``feature_budget``, ``budget_penalty``, ``budget_mode`` ("penalty", the default, or
        "constraint").
    score_name : str
        The method's validation score (:func:`runners.core.experiment.task_of`).

    Returns
    -------
    float
        ``score``, less ``budget_penalty`` per feature over ``feature_budget`` with the budget
        objective in ``budget_mode: penalty``; in ``budget_mode: constraint`` the budget is a
        constraint (:func:`budget_excess`), not part of the score.
    """
    objective = tune["objective"]
    if objective == score_name:
        return float(score)
    if objective == score_name + BUDGET:
        if tune.get("feature_budget") is None:
            raise ValueError(f"tune.objective={objective} needs tune.feature_budget (a number of features)")
        if constrained(tune):
            return float(score)
        return float(score) - float(tune["budget_penalty"]) * budget_excess(n_features, tune)
    raise ValueError(f"tune.objective must be one of {(score_name, score_name + BUDGET)} (the method's "
                     f"validation score, alone or held to tune.feature_budget), got {objective!r}")


def budget_excess(n_features: float, tune: DictConfig | Mapping) -> float:
    """Features over ``tune.feature_budget`` (0 within it)."""
    return max(0.0, float(n_features) - float(tune["feature_budget"]))


def feasible(trial: FrozenTrial, tune: DictConfig | Mapping) -> bool:
    """Whether ``trial`` may be the study's best: always, unless the budget is a constraint and the
    trial's model used more than ``tune.feature_budget`` features (judged with the current budget,
    so a resumed study with another budget picks its best by that one; so does a hard budget)."""
    if not (constrained(tune) or budget.is_hard(tune)):
        return True
    n = trial.user_attrs.get("n_selected_features")
    return n is not None and budget_excess(n, tune) == 0


def trials_set_constraints() -> bool:
    """Whether a trial sets its own constraint (Optuna >= 5; Optuna 4 only has ``constraints_func``)."""
    return hasattr(optuna.trial.Trial, "set_constraint")
