"""Hydra callbacks of the harness (configured in ``conf/hydra/default.yaml``)."""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from runners import tracking


class InitMLflowStore(Callback):
    """Create the MLflow store and experiment once, in the launching process, before the jobs.

    Parallel jobs (joblib, SLURM) on a fresh SQLite store otherwise race to create its schema
    ("table _alembic_tmp_runs already exists") and the experiment.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        tracking.init_store(config.tracking.uri, config.tracking.experiment,
                            config.tracking.get("artifact_location"))


class InitOptunaStorage(Callback):
    """Create the Optuna RDB schema once, before the jobs, when the sweep tunes (``tune=optuna``).

    Parallel ``runners.tune`` jobs on a fresh SQLite storage otherwise race to create it ("table
    trial_system_attributes already exists", "UNIQUE constraint failed: alembic_version").
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.get("tune") is not None and config.tune.get("enabled"):
            from runners.tune import _storage

            _storage(config.tune.storage)


#: runs of a tuning study that are not a fitted model of their own (the study and its trials)
NOT_A_RESULT = {"study", "trial"}


class PrintComparison(Callback):
    """At the end of a multirun, print the sweep's runs as a table and how to open the MLflow UI."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from runners.run import format_table, ui_hint

        client = MlflowClient(tracking_uri=config.tracking.uri)
        exp = client.get_experiment_by_name(config.tracking.experiment)
        if exp is None:
            return
        sweep = str(config.hydra.sweep.dir).replace("'", "\\'")
        runs = client.search_runs([exp.experiment_id], filter_string=f"tags.sweep_dir = '{sweep}'",
                                  order_by=["attributes.start_time ASC"], max_results=5000)
        rows = [{"method": r.data.tags.get("method", "?") + ("" if r.info.status == "FINISHED"
                                                              else f" ({r.info.status})"),
                 "dataset": r.data.tags.get("dataset", "?"), **r.data.metrics} for r in runs
                if r.data.tags.get("role") not in NOT_A_RESULT]    # a tuning sweep: its refits
        print("\n" + format_table(rows))
        print(ui_hint(config.tracking.uri))
