"""The selection path as a method (runners.core.path_run) and the sweep summary of
runners.tuning.hydra_callbacks,
against a real MLflow SQLite store in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pandas as pd
import pytest
from harness_utils import TINY, compose_cfg
from mlflow.tracking import MlflowClient
from omegaconf import open_dict

from gbfs import load_model
from runners import run as run_module
from runners.core import experiment, summaries
from runners.tracking import runs as tracking
from runners.tuning.hydra_callbacks import PrintComparison

pytestmark = pytest.mark.usefixtures("restore_mlflow")
# two budgets and a short search keep the path at a few seconds on the TINY data
PATH = [*TINY, "method=agbm_path", "method.budgets=[2,4]", "method.path.n_probes=6"]


def _runs(root: Path):
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name("gbfs")
    return client, client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


@pytest.mark.slow  # a few seconds: the default suite stays under 5 minutes
def test_path_method_logs_a_parent_and_a_nested_run_per_budget(tmp_path, capsys):
    metrics = run_module.run(compose_cfg(tmp_path, PATH))
    client, runs = _runs(tmp_path)
    (parent,) = [r for r in runs if r.data.tags.get("role") == "path"]
    budgets = sorted((r for r in runs if r.data.tags.get("role") == "budget"),
                     key=lambda r: int(r.data.tags["budget"]))
    assert len(runs) == 3 and all(r.info.status == "FINISHED" for r in runs)
    assert {"method": "agbm_path", "dataset": "gisette_like", "seed": "0", "budgets": "2,4",
            "counts_for_topk": "false"}.items() <= parent.data.tags.items()
    assert "budget" not in parent.data.tags
    assert {"path_seconds", "mu_max", "n_probes"} == set(parent.data.metrics) == set(metrics)
    assert 1 <= parent.data.metrics["n_probes"] <= 6 and parent.data.metrics["mu_max"] > 0
    parent_artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"config.yaml", "path.csv", "path.png"} <= parent_artifacts
    local = Path(client.download_artifacts(parent.info.run_id, "", str(tmp_path / "parent")))
    frame = pd.read_csv(local / "path.csv")
    assert frame["budget"].tolist() == [2, 4]
    assert (local / "path.png").read_bytes()[:4] == b"\x89PNG"
    for k, r in zip((2, 4), budgets):
        assert r.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert r.data.tags["budget"] == r.data.params["budget"] == str(k)
        assert r.data.tags["method"] == "agbm_path" and r.data.tags["counts_for_topk"] == "false"
        row = frame[frame["budget"] == k].iloc[0]
        assert r.data.params["source"] == row["source"] and "mu" in r.data.params
        m = r.data.metrics
        assert {"val_auc", "test_auc", "test_rmse", "test_logloss", "n_selected_features",
                "fit_seconds"} <= set(m)
        assert 1 <= m["n_selected_features"] <= k and m["n_selected_features"] == row["n_features"]
        assert m["val_auc"] == pytest.approx(row["val_score"])
        assert m["test_auc"] == pytest.approx(row["test_score"])
        assert {"config.yaml", "selected_features.json", "model.json"} <= {
            a.path for a in client.list_artifacts(r.info.run_id)}
        model = load_model(client.download_artifacts(r.info.run_id, "model.json", str(tmp_path / str(k))))
        assert len(model.selected_features_) == m["n_selected_features"]
    # the summary table: one row per budget, with its budget
    out = capsys.readouterr().out
    assert "| method | dataset | budget |" in out
    assert "| agbm_path | gisette_like | 2 |" in out and "| agbm_path | gisette_like | 4 |" in out

    # the same store as a sweep over methods and samplers: the sweep summary shows each budget's
    # row and the sampler, which differs between the rows
    run_module.run(compose_cfg(tmp_path, [*TINY, "method=agbm", "sampler=sgb", "print_summary=false"]))
    cfg = compose_cfg(tmp_path, [*TINY], hydra_cfg=True)
    client, runs = _runs(tmp_path)
    for r in runs:
        client.set_tag(r.info.run_id, "sweep_dir", str(cfg.hydra.sweep.dir))
    with open_dict(cfg):
        cfg.hydra.overrides.task = ["method=agbm_path,agbm", "sampler=none,sgb", "dataset.scale=0.05"]
    PrintComparison().on_multirun_end(cfg)
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert table[0].startswith("| method | dataset | budget | sampler | test AUC |")
    assert [line.split(" | ")[:4] for line in table[2:]] == [
        ["| agbm_path", "gisette_like", "2", "none"], ["| agbm_path", "gisette_like", "4", "none"],
        ["| agbm", "gisette_like", "-", "sgb"]]


def test_format_table_shows_budget_and_given_columns():
    rows = [{"method": "agbm", "dataset": "d", "budget": 5, "sampler": "goss", "test_auc": 0.91234,
             "n_selected_features": 5.0},
            {"method": "gbdt_full", "dataset": "d", "budget": None, "sampler": "None", "fit_seconds": 1.26}]
    lines = summaries.format_table(rows, ["sampler"]).splitlines()
    assert lines[0] == ("| method | dataset | budget | sampler | test AUC | test RMSE | selected features "
                        "| fit s |")
    assert lines[2] == "| agbm | d | 5 | goss | 0.9123 | - | 5 | - |"
    assert lines[3] == "| gbdt_full | d | - | - | - | - | - | 1.3 |"
    assert summaries.format_table([]).count("\n") == 1     # the header only


def test_a_sweep_over_seeds_is_pooled_per_configuration():
    rows = [{"method": "agbm", "dataset": "d", "budget": None, "seed": s, "sampler": "none",
             "test_auc": auc, "n_selected_features": n, "fit_seconds": 1.0}
            for s, auc, n in ((0, 0.90, 4), (1, 0.92, 6), (2, 0.94, 5))]
    rows.append({"method": "gbdt_full", "dataset": "d", "budget": None, "seed": 0, "sampler": "none",
                 "test_auc": 0.88, "n_selected_features": 30.0})
    pooled, columns = summaries.aggregate_seeds(rows, ["seed", "sampler"])
    assert columns == ["sampler", "seeds"] and len(pooled) == 2
    lines = summaries.format_table(pooled, columns).splitlines()
    assert lines[0] == ("| method | dataset | budget | sampler | seeds | test AUC | test RMSE | "
                        "selected features | fit s |")
    assert lines[2] == "| agbm | d | - | none | 3 | 0.9200 ± 0.0200 | - | 5 ± 1 | 1.0 ± 0.0 |"
    assert lines[3] == "| gbdt_full | d | - | none | 1 | 0.8800 | - | 30 | - |"


def test_the_sweep_chart_has_a_point_per_configuration_with_its_spread_over_seeds():
    rows = [{"method": "agbm", "dataset": "d", "budget": None, "seed": s, "test_auc": auc,
             "n_selected_features": n} for s, auc, n in ((0, 0.90, 4), (1, 0.92, 6), (2, 0.94, 5))]
    rows += [{"method": "gbdt_full", "dataset": "d", "budget": None, "seed": 0, "test_auc": 0.88,
              "n_selected_features": 30.0}, {"method": "failed", "dataset": "d", "seed": 0}]
    score, points = summaries.chart_points(rows, ["seed"])
    assert score == "test AUC" and [p["label"] for p in points] == ["agbm d", "gbdt_full d"]
    agbm, full = points
    assert (agbm["x"], agbm["x_sd"], agbm["n"]) == (5.0, 1.0, 3)
    assert agbm["y"] == pytest.approx(0.92) and agbm["y_sd"] == pytest.approx(0.02)
    assert (full["x"], full["y"], full["y_sd"], full["n"]) == (30.0, 0.88, 0.0, 1)
    # another task's score when the rows have no AUC
    assert summaries.chart_points([{"method": "m", "test_r2": 0.5, "n_selected_features": 3}], [])[0] == \
        "test R²"


def test_an_interrupt_in_a_budget_run_ends_it_and_the_path_killed(tmp_path, monkeypatch):
    """SIGTERM (runners.tracking.runs.Terminated) while a budget's nested run logs: neither that run nor
    the path's run is left RUNNING, and both say KILLED, not FAILED."""
    def interrupted(*args, **kwargs):
        raise tracking.Terminated("SIGTERM received")
    monkeypatch.setattr(experiment, "log_outcome", interrupted)
    with pytest.raises(tracking.Terminated):
        run_module.run(compose_cfg(tmp_path, PATH))
    _, runs = _runs(tmp_path)
    assert sorted((r.data.tags["role"], r.info.status) for r in runs) == [("budget", "KILLED"),
                                                                         ("path", "KILLED")]
    assert mlflow.active_run() is None


def test_a_cross_validated_path_logs_each_answers_fold_mean_and_error(tmp_path):
    run_module.run(compose_cfg(tmp_path, [*PATH, "method.path.cv=3", "method.path.rfe_step=null"]))
    _, runs = _runs(tmp_path)
    budgets = [r for r in runs if r.data.tags.get("role") == "budget"]
    assert len(budgets) == 2 and all(r.info.status == "FINISHED" for r in runs)
    for r in budgets:
        m = r.data.metrics
        assert 0.5 < m["cv_mean"] <= 1.0 and m["cv_se"] >= 0.0


def test_the_sweep_table_pools_seeds_and_keeps_runs_one_flag_away(tmp_path, capsys):
    for seed in (0, 1):
        run_module.run(compose_cfg(tmp_path, [*TINY, "method=agbm", f"seed={seed}", "print_summary=false"]))
    cfg = compose_cfg(tmp_path, [*TINY], hydra_cfg=True)
    client, runs = _runs(tmp_path)
    for r in runs:
        client.set_tag(r.info.run_id, "sweep_dir", str(cfg.hydra.sweep.dir))
    with open_dict(cfg):
        cfg.hydra.overrides.task = ["method=agbm", "seed=0,1"]
    PrintComparison().on_multirun_end(cfg)
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("|")]
    aucs = [r.data.metrics["test_auc"] for r in runs]
    mean, sd = sum(aucs) / 2, abs(aucs[0] - aucs[1]) / 2 ** 0.5
    assert table[0].startswith("| method | dataset | budget | seeds | test AUC |") and len(table) == 3
    assert table[2].startswith(f"| agbm | gisette_like | - | 2 | {mean:.4f} ± {sd:.4f} |")
    assert "+print_per_seed=true" in out
    # the table and the chart are in a run of their own, which no comparison counts as a result
    (summary,) = [r for r in _runs(tmp_path)[1] if r.data.tags.get("role") == "sweep_summary"]
    assert summary.info.status == "FINISHED" and summary.data.tags["sweep_dir"] == str(cfg.hydra.sweep.dir)
    # its name answers "which is best" in the runs table: here the one configuration
    assert summary.info.run_name.startswith(f"best agbm: test AUC {mean:.4f} ± {sd:.4f}, ")
    assert summary.info.run_name.endswith(" features (2 seeds) · sweep summary")
    local = Path(client.download_artifacts(summary.info.run_id, "", str(tmp_path / "summary")))
    assert table[2] in (local / "comparison.md").read_text()
    assert (local / "auc_vs_features.png").read_bytes()[:4] == b"\x89PNG"
    with open_dict(cfg):
        cfg.print_per_seed = True
    PrintComparison().on_multirun_end(cfg)
    per_run = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| agbm")]
    assert len(per_run) == 3      # the pooled row, then one per run
