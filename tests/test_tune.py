"""runners.tune end to end on a tiny study: real Optuna RDB storage and a real MLflow SQLite store in
tmp_path (a fit takes ~0.1 s here, so each study is a few seconds)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import mlflow
import optuna
import pytest
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from runners import experiment, run, tune

CONF = str(Path(__file__).parents[1] / "conf")
TINY = ["dataset=gisette_like", "dataset.scale=0.05", "dataset.kwargs.feature_scale=0.02", "method=agbm",
        "method.params.n_estimators=15", "print_summary=false"]


def make_cfg(tmp_path, *overrides, config="config"):
    """A tiny study; ``config="tune"`` is runners.tune's primary config, which selects tune=optuna."""
    tuning = [] if any(o.startswith("tune=") for o in overrides) else ["tune.n_startup_trials=2"]
    if config == "config":
        tuning.insert(0, "tune=optuna")
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose(config, overrides=["paths.root_dir=" + str(tmp_path), *TINY, *tuning, *overrides])


pytestmark = pytest.mark.usefixtures("restore_mlflow")


def load(cfg) -> optuna.Study:
    return optuna.load_study(study_name=cfg.tune.study_name, storage=cfg.tune.storage)


def runs(cfg, where: str):
    client = MlflowClient(tracking_uri=cfg.tracking.uri)
    exp = client.get_experiment_by_name(cfg.tracking.experiment)
    return client.search_runs([exp.experiment_id], filter_string=where, max_results=1000)


def children(cfg):
    """The nested runs of the (last) study run: trial runs by number, and the refit runs."""
    parent = runs(cfg, "tags.role = 'study'")[0]
    kids = runs(cfg, f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    trials = {int(r.data.tags["trial_number"]): r for r in kids if r.data.tags["role"] == "trial"}
    return parent, trials, [r for r in kids if r.data.tags["role"] == "refit"]


def test_study_runs_n_trials_then_refits_on_test(tmp_path):
    cfg = make_cfg(tmp_path, "tune.n_trials=4", config="tune")
    assert cfg.tune.enabled
    metrics = tune.run(cfg)
    assert len(load(cfg).trials) == 4
    parent, trials, (refit,) = children(cfg)
    assert sorted(trials) == [0, 1, 2, 3] and parent.info.status == "FINISHED"
    for r in trials.values():
        assert r.data.tags["counts_for_topk"] == "false" and "method.params.mu" in r.data.params
        assert "val_auc" in r.data.metrics and "test_auc" not in r.data.metrics
        assert r.data.tags["trial_state"] in ("COMPLETE", "PRUNED")
    assert refit.data.tags["counts_for_topk"] == "true" and refit.info.status == "FINISHED"
    assert refit.data.metrics["test_auc"] == pytest.approx(metrics["test_auc"])
    assert refit.data.params["dataset.scale"] == "0.05"
    arts = {a.path for a in MlflowClient().list_artifacts(refit.info.run_id)}
    assert {"config.yaml", "selected_features.json", "model.json", "correlations.png"} <= arts
    best = load(cfg).best_trial
    assert float(refit.data.params["method.params.mu"]) == pytest.approx(best.params["mu"])
    assert parent.data.metrics["best_val_auc"] == pytest.approx(best.value)
    assert "test_auc" in parent.data.metrics and "best.mu" in parent.data.params
    # only the refit counts for GBDT-topK's K, not the trials nor the study run
    assert run.resolve_topk_k(cfg) == int(metrics["n_selected_features"])


def test_resume_runs_only_missing_trials_and_fails_interrupted_ones(tmp_path):
    cfg = make_cfg(tmp_path, "tune.n_trials=2", "tune.refit=false")
    run.run(cfg)   # runners.run hands tune=optuna over to runners.tune
    cfg.tune.n_trials = 4
    tune.run(cfg)
    assert [t.number for t in load(cfg).trials] == [0, 1, 2, 3]
    # a killed process leaves its trial RUNNING (and its MLflow trial run)
    killed = load(cfg).ask()
    orphan_run = MlflowClient().create_run(runs(cfg, "tags.role = 'study'")[0].info.experiment_id)
    killed.set_user_attr("mlflow_run_id", orphan_run.info.run_id)
    cfg.tune.n_trials = 5
    tune.run(cfg)
    study = load(cfg)
    states = [t.state for t in study.trials]
    assert len(states) == 6 and TrialState.RUNNING not in states
    assert states[killed.number] == TrialState.FAIL and tune.n_done(study) == 5
    orphan = MlflowClient().get_run(orphan_run.info.run_id)
    assert orphan.info.status == "FAILED" and orphan.data.tags["trial_state"] == "FAIL"
    tune.run(cfg)   # nothing left to run
    assert len(load(cfg).trials) == 6


def test_pruned_trials_are_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(optuna.trial.Trial, "should_prune", lambda self: self.number % 2 == 1)
    cfg = make_cfg(tmp_path, "tune.n_trials=4", "tune.refit=false")
    tune.run(cfg)
    states = {t.number: t.state for t in load(cfg).trials}
    assert states == {0: TrialState.COMPLETE, 1: TrialState.PRUNED, 2: TrialState.COMPLETE,
                      3: TrialState.PRUNED}
    _, trials, refits = children(cfg)
    assert not refits
    for n in (1, 3):
        assert trials[n].info.status == "KILLED" and trials[n].data.tags["trial_state"] == "PRUNED"
        assert "val_auc" in trials[n].data.metrics   # its last reported iteration
    assert trials[0].info.status == "FINISHED" and trials[0].data.tags["trial_state"] == "COMPLETE"


def _failing_fit(numbers):
    real = experiment.fit_evaluate

    def fit(cfg, ds, params, callbacks=(), evaluate_test=True):
        if callbacks and callbacks[0].trial.number in numbers:
            raise ValueError("bad parameter combination")
        return real(cfg, ds, params, callbacks=callbacks, evaluate_test=evaluate_test)
    return fit


def test_failed_trials_are_recorded_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "fit_evaluate", _failing_fit({1}))
    cfg = make_cfg(tmp_path, "tune.n_trials=3")
    metrics = tune.run(cfg)
    assert [t.state for t in load(cfg).trials][1] == TrialState.FAIL
    parent, trials, (refit,) = children(cfg)
    assert trials[1].info.status == "FAILED" and trials[1].data.tags["trial_state"] == "FAIL"
    assert "bad parameter combination" in trials[1].data.tags["error"]
    assert {trials[n].info.status for n in (0, 2)} <= {"FINISHED", "KILLED"}
    assert "test_auc" in metrics and refit.info.status == "FINISHED" and parent.info.status == "FINISHED"


def test_all_trials_failed_raises_and_fails_the_study_run(tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "fit_evaluate", _failing_fit({0, 1}))
    cfg = make_cfg(tmp_path, "tune.n_trials=2")
    with pytest.raises(RuntimeError, match="no trial completed"):
        tune.run(cfg)
    assert runs(cfg, "tags.role = 'study'")[0].info.status == "FAILED"
    assert mlflow.active_run() is None


def test_budget_objective_penalises_features_over_budget(tmp_path):
    cfg = make_cfg(tmp_path, "tune.n_trials=2", "tune.refit=false", "tune.objective=val_auc_budget",
                   "tune.feature_budget=1", "tune.budget_penalty=0.01")
    out = tune.run(cfg)
    done = load(cfg).get_trials(states=(TrialState.COMPLETE,))
    for t in done:
        excess = max(0, t.user_attrs["n_selected_features"] - 1)
        assert t.value == pytest.approx(t.user_attrs["val_auc"] - 0.01 * excess)
    assert out["best_value"] < max(t.user_attrs["val_auc"] for t in done)


def test_objective_value():
    tune_cfg = {"objective": "val_auc_budget", "feature_budget": 10, "budget_penalty": 0.01}
    assert tune.objective_value(0.9, 14, tune_cfg) == pytest.approx(0.86)
    assert tune.objective_value(0.9, 8, tune_cfg) == pytest.approx(0.9)
    assert tune.objective_value(0.9, 14, {**tune_cfg, "objective": "val_auc"}) == pytest.approx(0.9)
    with pytest.raises(ValueError, match="feature_budget"):
        tune.objective_value(0.9, 14, {**tune_cfg, "feature_budget": None})
    with pytest.raises(ValueError, match="tune.objective"):
        tune.objective_value(0.9, 14, {**tune_cfg, "objective": "test_auc"})


@pytest.mark.parametrize("override, match", [
    ("method.search_space.mu.type=uniform", "search_space.mu: unknown type"),
    ("+method.search_space.depth={type:int,low:2}", "search_space.depth: int parameters need"),
    ("+method.search_space.depth={type:int,low:2,high:6}", "depth"),   # not in method.params
    ("tune=off", "tune=optuna"),
    ("tune.storage=null", "SQLAlchemy URL"),
])
def test_bad_settings_raise_before_any_run(tmp_path, override, match):
    cfg = make_cfg(tmp_path, override, config="tune")
    with pytest.raises(ValueError, match=match):
        tune.run(cfg)
    assert not (tmp_path / "mlflow.db").exists()


def test_only_trials_of_dead_local_processes_count_as_interrupted():
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    assert tune._maybe_alive("another-host:123")   # a worker of a shared study elsewhere: left alone
    assert tune._maybe_alive(f"{host}:{os.getppid()}")
    assert not tune._maybe_alive(f"{host}:{dead.pid}")
    assert not tune._maybe_alive(f"{host}:{os.getpid()}")   # an earlier study of this very process
    assert not tune._maybe_alive(None)   # a trial asked for outside runners.tune


def test_sampler_search_space_is_tuned_with_the_method(tmp_path):
    cfg = make_cfg(tmp_path, "sampler=mvs", "tune.n_trials=3")
    assert "mvs" in cfg.tune.study_name
    metrics = tune.run(cfg)
    study = load(cfg)
    for trial in study.trials:
        assert {"mu", "subsample", "mvs_lambda"} <= set(trial.params)
    _, trials, (refit,) = children(cfg)
    assert refit.data.tags["sampler"] == "mvs"
    best = study.best_params
    # the refit uses the best sampler values (not sampler.params' defaults)
    assert float(refit.data.params["method.params.subsample"]) == pytest.approx(best["subsample"])
    assert "test_auc" in metrics
