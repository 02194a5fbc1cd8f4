"""MLflow plumbing of the harness: the store, the experiment, flattened params, batched curves.

The library never imports MLflow; everything MLflow lives here.  Metric names are the same
for every method so runs compare side by side in the MLflow UI.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import mlflow
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

#: per-iteration curves logged by step (GT-GBM paper, Figure 2)
CURVES = ("val_auc", "val_rmse", "root_variance", "elapsed_seconds")
# MLflow's batch limits: 1000 metrics, 100 params per call; 6000 characters per param value
_MAX_METRICS, _MAX_PARAMS, _MAX_VALUE = 1000, 100, 6000


def artifact_uri(location: str | None) -> str | None:
    """An absolute file URI for a local folder (MLflow stores it verbatim), else the value as is."""
    if not location or "://" in location:
        return location
    return Path(location).expanduser().resolve().as_uri()


def init_store(uri: str, experiment: str, artifact_location: str | None = None) -> str:
    """Create (or migrate) the tracking store and the experiment; return the experiment id.

    A fresh SQLite store creates its schema on first use, and parallel first users race for it
    ("table _alembic_tmp_runs already exists"); so do two jobs creating the same experiment.
    Calling this once before parallel jobs start (the multirun callback does) avoids both.
    """
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).expanduser().parent.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(experiment, artifact_location=artifact_uri(artifact_location))
    except mlflow.exceptions.MlflowException:
        found = client.get_experiment_by_name(experiment)   # created meanwhile by another process
        if found is None:
            raise
        return found.experiment_id


def configure(tracking: DictConfig | Mapping) -> str:
    """Point MLflow at ``tracking.uri`` and select ``tracking.experiment``; return its id."""
    mlflow.set_tracking_uri(tracking["uri"])
    exp_id = init_store(tracking["uri"], tracking["experiment"], tracking.get("artifact_location"))
    mlflow.set_experiment(experiment_id=exp_id)
    return exp_id


def flatten(cfg: Mapping, prefix: str = "") -> dict[str, str]:
    """Dotted keys of a nested config: ``{"method.params.mu": "0.01", ...}`` (lists kept whole)."""
    out: dict[str, str] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = str(value)
    return out


def log_config(cfg: DictConfig, run_id: str, extra: Mapping[str, object] | None = None) -> None:
    """The flattened config as params, with the ``extra`` params (e.g. ``budget``), and the resolved
    config as ``config.yaml``."""
    container = OmegaConf.to_container(cfg, resolve=True)
    flat = {**flatten(container), **{k: str(v) for k, v in (extra or {}).items()}}
    params = [Param(k, v[:_MAX_VALUE]) for k, v in flat.items()]
    client = MlflowClient()
    for i in range(0, len(params), _MAX_PARAMS):
        client.log_batch(run_id, params=params[i:i + _MAX_PARAMS])
    client.log_text(run_id, OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")


def log_metrics(run_id: str, metrics: Mapping[str, float], step: int = 0) -> None:
    now = int(time.time() * 1000)
    batch = [Metric(k, float(v), now, step) for k, v in metrics.items() if v is not None]
    MlflowClient().log_batch(run_id, metrics=batch)


def log_curves(run_id: str, history: list[dict], keys=CURVES) -> None:
    """Per-iteration records as metric histories (step = iteration), in batches of 1000."""
    now = int(time.time() * 1000)
    batch = [Metric(k, float(rec[k]), now, int(rec.get("iteration", i)))
             for i, rec in enumerate(history) for k in keys if rec.get(k) is not None]
    client = MlflowClient()
    for i in range(0, len(batch), _MAX_METRICS):
        client.log_batch(run_id, metrics=batch[i:i + _MAX_METRICS])


def git_commit() -> str:
    """The commit of the checkout the harness runs from ("unknown" outside a git checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
