"""Feature budgets in the harness: a method's budget K, the ``budget`` tag and param, hard budgets.

A method config names the estimator argument holding its hard feature budget in ``budget_param``:
``max_features`` for the gbfs methods (never more than K features), ``k`` for GBDT-topK (exactly
its top K); the other methods have none.  Every run whose budget is set is tagged ``budget=K`` and
logs the param ``budget``, so the MLflow UI filters and groups runs by K whatever the method.

``tune.budget_mode=hard`` with ``tune.feature_budget=K`` sets that argument to K for every trial
(:func:`with_hard_budget`): each trial is within the budget by construction, where ``penalty``
and ``constraint`` only judge the trials after they have chosen their features.
"""

from __future__ import annotations

from collections.abc import Mapping

from omegaconf import DictConfig, OmegaConf, open_dict

HARD = "hard"


def budget_of(method: DictConfig) -> int | None:
    """The hard feature budget K of ``method`` (``method.params[method.budget_param]``), or None
    (also for a mandatory value left unset, ``???``)."""
    name = method.get("budget_param")
    if not name or name not in method.params or OmegaConf.is_missing(method.params, name):
        return None
    value = method.params[name]
    return None if value is None else int(value)


def budget_tags(cfg: DictConfig) -> dict[str, str]:
    """``{"budget": "K"}`` when the method's budget is set, else ``{}`` (tags and params of a run)."""
    k = budget_of(cfg.method)
    return {} if k is None else {"budget": str(k)}


def is_hard(tune: DictConfig | Mapping) -> bool:
    """Whether ``tune.budget_mode`` is ``hard``: every trial gets ``max_features`` (or ``k``) = budget."""
    return tune.get("budget_mode") == HARD


def with_hard_budget(cfg: DictConfig) -> DictConfig:
    """``cfg`` with ``method.params[method.budget_param] = tune.feature_budget`` under
    ``tune.budget_mode=hard`` (``cfg`` itself otherwise).

    Raises
    ------
    ValueError
        Without ``tune.feature_budget``, on a method without a hard budget (``budget_param``), or
        when the method's params already hold another budget.
    """
    if not is_hard(cfg.tune):
        return cfg
    k, name = cfg.tune.get("feature_budget"), cfg.method.get("budget_param")
    if k is None or isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"tune.budget_mode=hard needs tune.feature_budget, a positive number of features; "
                         f"got {k!r}")
    if not name:
        raise ValueError(f"tune.budget_mode=hard: method {cfg.method.name!r} has no hard feature budget "
                         f"(method.budget_param); use tune.budget_mode=penalty or constraint")
    given = budget_of(cfg.method)
    if given is not None and given != int(k):
        raise ValueError(f"tune.budget_mode=hard: method.params.{name}={given} disagrees with "
                         f"tune.feature_budget={k}; set only one of them")
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.method.params[name] = int(k)
    return cfg
