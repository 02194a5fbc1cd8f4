"""The selection path as a method (``method.estimator: gbfs_path``): every feature budget in one run.

    python -m runners.run method=agbm_path
    python -m runners.run method=gtgbm_path 'method.budgets=[5,10,20]' method.path.n_probes=8

:func:`fit_path` runs :func:`gbfs.selection_path` on the train split: the template estimator is the
method's ``params`` (a ``GBFSClassifier``, with the row sampler), the validation split is the eval
set every choice is made on, and the test split is scored once per chosen model, after the choice.

MLflow: the active run of ``runners.run`` is the path's parent (``role=path``, tag ``budgets``),
with the metrics ``path_seconds``, ``mu_max``, ``n_probes`` and the artifacts ``path.csv`` (one row
per budget, :meth:`gbfs.selection.path.SelectionPath.to_frame`) and ``path.png`` (validation and test AUC
against the number of features, every candidate as a faint point).  Under it, one nested run per
budget (``role=budget``, tag and param ``budget``, params ``mu`` and ``source`` of the chosen
selection, tag ``note`` when the budget could not be filled) logged as a ``runners.run`` run is, by
:func:`runners.core.experiment.log_outcome`: ``val_auc``, ``test_auc``, ``test_rmse``, ``test_logloss``,
``n_selected_features``, ``fit_seconds`` (the chosen model's refit), ..., ``selected_features.json``,
``model.json``; with ``stability.enabled``, the stability of each budget's model too.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")              # runners draw figures to files, never to a screen
import matplotlib.pyplot as plt  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from gbfs import selection_path  # noqa: E402
from gbfs.data import Dataset  # noqa: E402
from gbfs.selection.path_results import BudgetResult, SelectionPath  # noqa: E402
from runners.core import experiment, stability
from runners.tracking import runs as tracking
from runners.tracking.run_log import RunLog

#: the role tags of the path's runs: the parent, and one nested run per budget
PARENT_ROLE, BUDGET_ROLE = "path", "budget"


def fit_path(cfg: DictConfig, ds: Dataset, tags: dict[str, str]) -> experiment.Logged:
    """Run the selection path of ``cfg.method`` and log it to the active run and its nested runs.

    Parameters
    ----------
    cfg : DictConfig
        The run's config; ``method.budgets`` (list of int) and ``method.path`` (keyword arguments
        of :func:`gbfs.selection_path`: ``patience``, ``n_probes``, ``refine``, ``ratio``).
    ds : Dataset
    tags : dict
        The run's tags, given to every nested run too (method, dataset, seed, sweep_dir, ...).

    Returns
    -------
    Logged
        The parent's metrics and one summary row per budget.
    """
    template = experiment.build_estimator(cfg.method, int(cfg.seed), cfg.n_threads,
                                          experiment.method_params(cfg.method), cfg.get("sampler"),
                                          ds.categorical, experiment.feature_bags_of(
                                              cfg.get("bags"), ds.X_train, ds.feature_names))
    budgets = [int(k) for k in cfg.method.budgets]
    search = OmegaConf.to_container(cfg.method.path, resolve=True) if cfg.method.get("path") else {}
    parent = RunLog.active()
    parent.tags({"role": PARENT_ROLE, "budgets": ",".join(map(str, budgets))})
    path = selection_path(template, ds.X_train, ds.y_train, eval_set=(ds.X_val, ds.y_val), budgets=budgets,
                          test_set=(ds.X_test, ds.y_test), **{"verbose": True, **search})
    metrics = {"path_seconds": path.seconds, "mu_max": path.mu_max, "n_probes": float(len(path.probes))}
    parent.metrics(metrics)
    log_path_artifacts(path, parent)
    rows = [_log_budget(cfg, ds, r, tags) for r in path.results]
    return experiment.Logged(metrics, rows)


def log_path_artifacts(path: SelectionPath, run_log: RunLog) -> None:
    """``path.csv`` (one row per budget) and ``path.png`` (score against number of features)."""
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "path.csv"
        path.to_frame().to_csv(csv, index=False)
        run_log.artifact(csv)
        ax = path.plot()
        png = Path(tmp) / "path.png"
        ax.figure.tight_layout()
        ax.figure.savefig(png, dpi=110)
        plt.close(ax.figure)
        run_log.artifact(png)


def _log_budget(cfg: DictConfig, ds: Dataset, result: BudgetResult, tags: dict[str, str]) -> dict:
    """One nested run for one budget's chosen model; return its summary row."""
    outcome = experiment.evaluate(result.model, ds, fit_seconds=result.seconds)
    nested = {**tags, "role": BUDGET_ROLE, "budget": str(result.budget),
              **({"note": result.note} if result.note else {})}
    name = f"{cfg.run_name}-budget{result.budget}"
    # ended KILLED on an interrupt, not FAILED as ``with mlflow.start_run()`` would
    with tracking.managed_run(nested=True, run_name=name, tags=nested) as run:
        run_log = RunLog(run.info.run_id)
        # method.params are the path's template; mu and source say which selection was chosen
        run_log.config(cfg, extra={"budget": result.budget, "mu": result.mu, "source": result.source})
        experiment.log_outcome(outcome, ds, run_log, cfg=cfg)
        choice = {k: v for k, v in (("cv_mean", result.cv_mean), ("cv_se", result.cv_se)) if v is not None}
        if choice:  # the cross-validated choice's record of this answer
            run_log.metrics(choice)
        metrics = {**outcome.metrics, **choice, **stability.log_stability(cfg, ds, result.model, run_log)}
    return {"budget": result.budget, **metrics}
