"""Everything the harness writes to an MLflow run, through one object bound to the run: :class:`RunLog`.

Every module that logs (a fit's metrics and curves, its config, its data and model, a study's
tags, a table's artifacts) builds the ``RunLog`` of its run and writes through it; nothing outside
:mod:`runners.tracking` calls ``mlflow.log_*``, ``mlflow.set_tag`` or an ``MlflowClient``'s
``log_*`` and ``set_tag``.  Starting and ending runs is :mod:`runners.tracking.runs`'s
(``managed_run``); reading runs back stays with whoever reads them.

Metric names are the same for every method so runs compare side by side in the MLflow UI; the
final metrics of a fitted model are logged after its curves (a larger step), so that MLflow's
latest value of each is the model's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from gbfs.data import Dataset
from runners.tracking import mlflow_native
from runners.tracking.runs import flatten

#: per-iteration curves logged by step (GT-GBM paper, Figure 2)
CURVES = ("val_auc", "val_rmse", "root_variance", "elapsed_seconds")
#: MLflow's batch limits: 1000 metrics, 100 params per call; 6000 characters per param value
MAX_METRICS, MAX_PARAMS, MAX_VALUE = 1000, 100, 6000


class RunLog:
    """The writes to one MLflow run, ``run_id``: params, tags, metrics, curves, texts, artifacts,
    dataset inputs and the MLflow model.

    Parameters
    ----------
    run_id : str
        The run written to; it need not be the active run (except for :meth:`model`).
    client : MlflowClient, optional
        The client of the run's tracking store; by default one of the store MLflow points at when
        the first write is made (:func:`runners.tracking.runs.configure`).
    """

    def __init__(self, run_id: str, client: MlflowClient | None = None):
        self.run_id = run_id
        self._client = client

    @property
    def client(self) -> MlflowClient:
        """The client written through, made at the first write: building a log touches no store."""
        if self._client is None:
            self._client = MlflowClient()
        return self._client

    @classmethod
    def active(cls) -> RunLog:
        """The log of the active run (``mlflow.active_run()``, which must exist)."""
        return cls(mlflow.active_run().info.run_id)

    def __repr__(self) -> str:
        return f"RunLog({self.run_id!r})"

    # ------------------------------------------------------------------------- params and tags

    def params(self, params: Mapping[str, object]) -> None:
        """``params`` as the run's params (values as strings, cut to MLflow's 6000 characters)."""
        batch = [Param(k, str(v)[:MAX_VALUE]) for k, v in params.items()]
        for i in range(0, len(batch), MAX_PARAMS):
            self.client.log_batch(self.run_id, params=batch[i:i + MAX_PARAMS])

    def config(self, cfg: DictConfig, extra: Mapping[str, object] | None = None) -> None:
        """The flattened config as params, with the ``extra`` params (e.g. ``budget``), and the
        resolved config as ``config.yaml``."""
        container = OmegaConf.to_container(cfg, resolve=True)
        self.params({**flatten(container), **{k: str(v) for k, v in (extra or {}).items()}})
        self.text(OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")

    def tags(self, tags: Mapping[str, object]) -> None:
        """``tags`` on the run (values as strings); a tag set before is overwritten."""
        if tags:
            self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    # ------------------------------------------------------------------------------- metrics

    def metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        """``metrics`` at ``step`` (a value of None is left out)."""
        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items() if v is not None]
        self.client.log_batch(self.run_id, metrics=batch)

    def curves(self, history: Sequence[Mapping], keys: Iterable[str] = CURVES) -> None:
        """Per-iteration records as metric histories (step = the record's ``iteration``, else its
        position), in batches of 1000."""
        keys = tuple(keys)
        now = int(time.time() * 1000)
        batch = [Metric(k, float(rec[k]), now, int(rec.get("iteration", i)))
                 for i, rec in enumerate(history) for k in keys if rec.get(k) is not None]
        for i in range(0, len(batch), MAX_METRICS):
            self.client.log_batch(self.run_id, metrics=batch[i:i + MAX_METRICS])

    # ------------------------------------------------------------------- artifacts and inputs

    def text(self, content: str | object, name: str) -> None:
        """``content`` as the artifact ``name``: a string as it is, anything else as indented JSON
        (strict: NaN is refused, so the file is standard JSON)."""
        if not isinstance(content, str):
            content = json.dumps(content, indent=1, allow_nan=False)
        self.client.log_text(self.run_id, content, name)

    def artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """The file ``path`` as an artifact, in the folder ``artifact_path`` (default: the top)."""
        self.client.log_artifact(self.run_id, str(path), artifact_path=artifact_path)

    def inputs(self, cfg: DictConfig, ds: Dataset, splits: Sequence[str] = mlflow_native.FIT_SPLITS) -> None:
        """``splits`` of ``ds`` as the run's dataset inputs
        (:func:`runners.tracking.mlflow_native.log_inputs`)."""
        mlflow_native.log_inputs(self.run_id, cfg, ds, splits=splits)

    def model(self, cfg: DictConfig, model, ds: Dataset, model_file: str | Path, step: int) -> None:
        """``model`` (saved in ``model_file``) as the run's MLflow model when ``tracking.log_model``
        is true, its metrics at ``step`` linked to it (:func:`runners.tracking.mlflow_native.log_model`).
        MLflow logs a model to the active run: this run must be it."""
        mlflow_native.log_model(cfg, model, ds, model_file, step=step)
