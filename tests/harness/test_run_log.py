"""runners.tracking.run_log.RunLog against a real MLflow SQLite store in a temporary folder: what each
write leaves in the run, read back with the client."""

from __future__ import annotations

import json
import math

import mlflow
import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from runners.tracking import runs as tracking
from runners.tracking.run_log import MAX_PARAMS, MAX_VALUE, RunLog

pytestmark = pytest.mark.usefixtures("restore_mlflow")


@pytest.fixture
def run_log(tmp_path):
    """The log of a fresh run (not active) in a store under ``tmp_path``."""
    tracking.configure({"uri": f"sqlite:///{tmp_path}/mlflow.db", "experiment": "run-log",
                        "artifact_location": str(tmp_path / "artifacts")})
    exp = MlflowClient().get_experiment_by_name("run-log")
    return RunLog(MlflowClient().create_run(exp.experiment_id).info.run_id)


def test_params_and_config_are_strings_cut_to_mlflows_limit_in_batches(run_log):
    many = {f"p{i}": i for i in range(MAX_PARAMS + 5)}          # more than one batch
    run_log.params({**many, "long": "x" * (MAX_VALUE + 10)})
    run_log.config(OmegaConf.create({"method": {"params": {"mu": 0.01}}, "seed": 0}), extra={"budget": 5})
    params = MlflowClient().get_run(run_log.run_id).data.params
    assert params["p104"] == "104" and len(params["long"]) == MAX_VALUE
    assert params["method.params.mu"] == "0.01" and params["seed"] == "0" and params["budget"] == "5"
    text = mlflow.artifacts.load_text(f"runs:/{run_log.run_id}/config.yaml")
    assert OmegaConf.create(text).method.params.mu == 0.01


def test_metrics_at_a_step_after_the_curves(run_log):
    history = [{"iteration": i, "val_auc": 0.5 + i / 10, "val_rmse": None} for i in range(3)]
    run_log.curves(history, keys=("val_auc", "val_rmse"))
    run_log.metrics({"val_auc": 0.9, "skipped": None}, step=len(history))
    client = MlflowClient()
    steps = [(m.step, m.value) for m in client.get_metric_history(run_log.run_id, "val_auc")]
    assert sorted(steps) == [(0, 0.5), (1, 0.6), (2, 0.7), (3, 0.9)]
    metrics = client.get_run(run_log.run_id).data.metrics
    assert metrics["val_auc"] == 0.9 and "val_rmse" not in metrics and "skipped" not in metrics


def test_tags_texts_and_artifacts(run_log, tmp_path):
    run_log.tags({"role": "trial", "n": 3})
    run_log.tags({"role": "refit"})                 # a tag set again is overwritten
    run_log.text({"features": [1, 2]}, "selected.json")
    run_log.text("plain", "note.txt")
    with pytest.raises(ValueError):                 # strict JSON: no NaN in a file
        run_log.text({"x": math.nan}, "bad.json")
    (tmp_path / "table.csv").write_text("a,b\n")
    run_log.artifact(tmp_path / "table.csv", artifact_path="tables")
    client = MlflowClient()
    tags = client.get_run(run_log.run_id).data.tags
    assert tags["role"] == "refit" and tags["n"] == "3"
    selected = mlflow.artifacts.load_text(f"runs:/{run_log.run_id}/selected.json")
    assert json.loads(selected) == {"features": [1, 2]}
    assert {a.path for a in client.list_artifacts(run_log.run_id)} >= {"selected.json", "note.txt", "tables"}
    assert [a.path for a in client.list_artifacts(run_log.run_id, "tables")] == ["tables/table.csv"]


def test_the_active_runs_log(tmp_path):
    tracking.configure({"uri": f"sqlite:///{tmp_path}/mlflow.db", "experiment": "run-log"})
    with tracking.managed_run(run_name="active") as active:
        assert RunLog.active().run_id == active.info.run_id
