"""The refit of a tuning study's best parameters (:mod:`runners.tune`): a nested ``refit`` run, the
study's latest refit being the only one that counts for GBDT-topK's K.

The refit fits the best parameters on train (validation as eval set) and evaluates once on test,
logged like a ``runners.run`` run (:func:`runners.core.experiment.log_outcome`): the config as
params, the curves, then the final metrics, the artifacts, the data and the model; with
``stability.enabled`` its selection stability too.  A resumed study refits again; its earlier refits
are then tagged ``counts_for_topk=false`` and ``superseded_by`` the latest.
"""

from __future__ import annotations

from collections.abc import Mapping

import mlflow
from mlflow.entities import RunInfo
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, open_dict

from gbfs.data import Dataset
from runners.core import budget, experiment, stability
from runners.tracking.run_log import RunLog


def refit(cfg: DictConfig, ds: Dataset, best_params: Mapping, tags: dict[str, str]) -> dict[str, float]:
    """Fit ``best_params`` on train (validation as eval set), evaluate once on test; log a nested
    ``refit`` run under the active run like a ``runners.run`` run (final metrics after the curves,
    by :func:`runners.core.experiment.log_outcome`); return its metrics."""
    best_cfg = cfg.copy()
    with open_dict(best_cfg):
        best_cfg.method.params.update(dict(best_params))
    parent = mlflow.active_run()
    with mlflow.start_run(nested=True, run_name="refit", tags=tags) as active:
        run_log = RunLog(active.info.run_id)
        run_log.config(best_cfg, extra=budget.budget_tags(best_cfg))
        out = experiment.fit_evaluate(best_cfg, ds, experiment.method_params(best_cfg.method))
        experiment.log_outcome(out, ds, run_log, cfg=best_cfg)
        metrics = {**out.metrics, **stability.log_stability(best_cfg, ds, out.model, run_log)}
    if parent is not None:
        supersede_refits(active.info, parent.info.run_id)
    return metrics


def supersede_refits(latest: RunInfo, parent_id: str) -> None:
    """Earlier refits under ``parent_id`` (a resumed study's) stop counting for GBDT-topK's K: only
    its ``latest`` refit (of the best trial so far) does."""
    client = MlflowClient()
    older = client.search_runs([latest.experiment_id], max_results=1000, filter_string=(
        f"tags.mlflow.parentRunId = '{parent_id}' and tags.role = 'refit' and tags.counts_for_topk = 'true'"))
    for r in older:
        if r.info.run_id != latest.run_id:
            RunLog(r.info.run_id, client).tags({"counts_for_topk": "false", "superseded_by": latest.run_id})
