"""Plots of a fitted model, as LightGBM's ``plot_importance`` and ``plot_metric`` (matplotlib is
imported when a plot is drawn: ``pip install matplotlib``, part of the ``bench`` extra)."""

from __future__ import annotations

import numpy as np


def _axes(ax, figsize):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_importance(model, *, importance_type: str = "gain", max_num_features: int | None = 20,
                    ax=None, figsize=(6.0, 4.0), title: str = "Feature importance",
                    feature_names=None):
    """A horizontal bar per used feature of a fitted gbfs model, largest on top.

    Parameters
    ----------
    model : fitted GBFSClassifier, GBFSRegressor or GBFSRanker
    importance_type : {"gain", "split"}
        Total split gain, or number of splits (the model's ``feature_importance``).
    max_num_features : int or None
        At most this many bars (None: every feature with a non-zero importance).
    ax : matplotlib Axes, optional
        Drawn into; a new figure otherwise.
    feature_names : sequence of str, optional
        A name per feature of the model's ``X``; default: the model's ``feature_names_in_`` (fitted
        on a DataFrame), else ``x0, x1, ...``.

    Returns
    -------
    matplotlib Axes
    """
    if max_num_features is not None and (not isinstance(max_num_features, int) or max_num_features < 1):
        raise ValueError(f"max_num_features must be a positive int or None, got {max_num_features!r}")
    values = np.asarray(model.feature_importance(importance_type), dtype=np.float64)
    names = getattr(model, "feature_names_in_", None) if feature_names is None else feature_names
    names = [str(n) for n in names] if names is not None else [f"x{i}" for i in range(len(values))]
    if len(names) != len(values):
        raise ValueError(f"feature_names has {len(names)} names for the model's {len(values)} features")
    order = [int(i) for i in np.argsort(-values, kind="stable") if values[i] > 0][:max_num_features]
    ax = _axes(ax, figsize)
    ax.barh(range(len(order))[::-1], values[order], color="tab:blue")
    ax.set_yticks(range(len(order))[::-1], [names[i] for i in order])
    ax.set(title=title, xlabel=f"importance ({importance_type})")
    return ax


def plot_metric(model, metric: str | None = None, *, ax=None, figsize=(6.0, 4.0)):
    """One curve per data set of ``model.evals_result_`` for ``metric`` against the iteration.

    Parameters
    ----------
    model : fitted gbfs estimator (or its ``evals_result_`` dict)
    metric : str, optional
        A metric of ``evals_result_`` (``"loss"``, ``"auc"``, ...); the first one recorded when None.

    Returns
    -------
    matplotlib Axes
    """
    results = model if isinstance(model, dict) else model.evals_result_
    metrics = list(dict.fromkeys(m for per in results.values() for m in per))
    if not metrics:
        raise ValueError("the model recorded no metric (fit it with an eval_set, or train_metrics)")
    metric = metrics[0] if metric is None else metric
    if metric not in metrics:
        raise ValueError(f"metric {metric!r} was not recorded; recorded: {metrics}")
    ax = _axes(ax, figsize)
    for name, per in results.items():
        if metric in per:
            ax.plot(range(len(per[metric])), per[metric], label=name)
    ax.set(xlabel="iteration", ylabel=metric, title=f"{metric} by iteration")
    ax.legend()
    return ax
