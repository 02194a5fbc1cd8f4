"""runners.tune end to end on a tiny study: real Optuna RDB storage and a real MLflow SQLite store in
tmp_path (a fit takes ~0.1 s here, so each study is a few seconds)."""

from __future__ import annotations

import math
import socket
import subprocess
import warnings
from pathlib import Path

import mlflow
import optuna
import pytest
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from omegaconf import open_dict
from optuna.trial import TrialState

from runners import run, tune
from runners.core import budget, experiment
from runners.tuning import objective as objective_module
from runners.tuning import parent_run, search_space, study_run
from runners.tuning import study as studies
from runners.tuning import trial as trial_module
from runners.tuning.objective import objective_value

CONF = str(Path(__file__).parents[2] / "conf")
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
    return optuna.load_study(study_name=cfg.tune.study_name, storage=studies.open_storage(cfg.tune.storage))


# agbm on the TINY data (15 trees): dozens of features and a validation AUC rising from the first tree
# on; fewer features and a lower AUC; mu at the top of the range: (almost) no feature, AUC about 0.5
GOOD = {"mu": 1e-5, "learning_rate": 0.3, "min_node_fraction": 0.005}
SMALL = {"mu": 1e-5, "learning_rate": 0.02, "min_node_fraction": 0.1}
BAD = {"mu": 0.1, "learning_rate": 0.02, "min_node_fraction": 0.1}


def enqueue(cfg, *params):
    """Create the study of ``cfg`` with its first trials' parameters fixed."""
    study = optuna.create_study(study_name=cfg.tune.study_name, storage=cfg.tune.storage,
                                direction="maximize")
    for p in params:
        study.enqueue_trial(p)


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


def test_study_runs_n_trials_then_refits_on_test(tmp_path, capsys):
    cfg = make_cfg(tmp_path, "tune.n_trials=4", "print_summary=true", config="tune")
    assert cfg.tune.enabled and cfg.tune.progress
    metrics = tune.run(cfg)
    study = load(cfg)
    assert len(study.trials) == 4
    parent, trials, (refit,) = children(cfg)
    assert sorted(trials) == [0, 1, 2, 3] and parent.info.status == "FINISHED"
    for r in trials.values():
        assert r.data.tags["counts_for_topk"] == "false" and "method.params.mu" in r.data.params
        assert "val_auc" in r.data.metrics and "test_auc" not in r.data.metrics
        assert r.data.tags["trial_state"] in ("COMPLETE", "PRUNED")
        # MLflow's latest val_auc is the one Optuna got (the model's, not its last iteration's)
        t = study.trials[int(r.data.tags["trial_number"])]
        assert r.data.metrics["val_auc"] == pytest.approx(t.user_attrs["val_auc"])
        if t.state == TrialState.COMPLETE:
            assert r.data.metrics["val_auc"] == pytest.approx(t.value)
    assert refit.data.tags["counts_for_topk"] == "true" and refit.info.status == "FINISHED"
    assert refit.data.metrics["test_auc"] == pytest.approx(metrics["test_auc"])
    assert refit.data.metrics["val_auc"] == pytest.approx(metrics["val_auc"])
    assert refit.data.params["dataset.scale"] == "0.05"
    arts = {a.path for a in MlflowClient().list_artifacts(refit.info.run_id)}
    assert {"config.yaml", "selected_features.json", "model.json", "correlations.png"} <= arts
    best = load(cfg).best_trial
    assert float(refit.data.params["method.params.mu"]) == pytest.approx(best.params["mu"])
    assert parent.data.metrics["best_val_auc"] == pytest.approx(best.value)
    assert "test_auc" in parent.data.metrics
    assert float(parent.data.tags["best.mu"]) == pytest.approx(best.params["mu"])
    # only the refit counts for GBDT-topK's K, not the trials nor the study run
    assert budget.resolve_topk_k(cfg) == int(metrics["n_selected_features"])
    # a bar over the trials with the best value so far
    out = capsys.readouterr()
    err = out.err
    assert "tune agbm on gisette_like" in err and "4/4" in err and f"best={best.value:.4f}" in err
    # what tuning found, printed; the objective named in the study (optuna-dashboard shows it)
    assert f"best val_auc {best.value:.4f} (trial {best.number}: mu={best.params['mu']:.4g}" in out.out
    assert load(cfg).metric_names == ["val_auc"]


@pytest.mark.slow
@pytest.mark.parametrize("storage", ["sqlite:///{root}/optuna.db", "journal:///{root}/optuna.log"],
                         ids=["sqlite", "journal"])
def test_resume_runs_only_missing_trials_and_fails_interrupted_ones(tmp_path, monkeypatch, storage):
    cfg = make_cfg(tmp_path, "tune.n_trials=2", "tune.refit=false",
                   f"tune.storage='{storage.format(root=tmp_path)}'")
    run.run(cfg)   # runners.run hands tune=optuna over to runners.tune
    cfg.tune.n_trials = 4
    tune.run(cfg)
    assert [t.number for t in load(cfg).trials] == [0, 1, 2, 3]
    (parent,) = runs(cfg, "tags.role = 'study'")   # the second invocation reused the first's run
    client = MlflowClient()
    # a killed process leaves its trial RUNNING, its MLflow trial run and the study's run too
    dead = subprocess.Popen(["true"])
    dead.wait()
    killed = load(cfg).ask()
    killed.set_user_attr("worker", f"{socket.gethostname()}:{dead.pid}")
    orphan_run = client.create_run(parent.info.experiment_id)
    killed.set_user_attr("mlflow_run_id", orphan_run.info.run_id)
    killed.set_user_attr("mlflow_parent_run_id", parent.info.run_id)
    client.update_run(parent.info.run_id, status="RUNNING")
    cfg.tune.n_trials, cfg.tune.refit = 5, True
    statuses, real_fit = [], experiment.fit_evaluate

    def fit(*args, **kwargs):
        statuses.append(client.get_run(parent.info.run_id).info.status)
        return real_fit(*args, **kwargs)
    monkeypatch.setattr(experiment, "fit_evaluate", fit)
    tune.run(cfg)
    # the dead process's parent run is the one resumed: not closed as KILLED under the new trials
    assert set(statuses) == {"RUNNING"}
    study = load(cfg)
    states = [t.state for t in study.trials]
    assert len(states) == 6 and TrialState.RUNNING not in states
    assert states[killed.number] == TrialState.FAIL and studies.n_done(study) == 5
    orphan = client.get_run(orphan_run.info.run_id)
    assert orphan.info.status == "FAILED" and orphan.data.tags["trial_state"] == "FAIL"
    tune.run(cfg)   # nothing left to run: only a refit
    assert len(load(cfg).trials) == 6
    # one parent run for the study's four invocations, with every trial nested under it
    (resumed,), trials, refits = runs(cfg, "tags.role = 'study'"), *children(cfg)[1:]
    assert resumed.info.run_id == parent.info.run_id == study.user_attrs["mlflow_run_id"]
    assert resumed.info.status == "FINISHED" and resumed.data.tags["n_invocations"] == "4"
    assert sorted(trials) == [0, 1, 2, 3, 5] and len(runs(cfg, "tags.role = 'trial'")) == 5
    assert {t.user_attrs["mlflow_parent_run_id"] for t in study.trials if t.number != killed.number} \
        == {parent.info.run_id}
    steps = sorted(m.step for m in client.get_metric_history(parent.info.run_id, "n_trials_complete"))
    assert steps == [2, 4, 5, 5]   # the study's metrics by number of finished trials
    arts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"config.yaml", "config-2.yaml", "config-3.yaml", "config-4.yaml"} <= arts
    # only the latest refit counts for GBDT-topK's K
    latest, older = sorted(refits, key=lambda r: r.info.start_time, reverse=True)
    assert latest.data.tags["counts_for_topk"] == "true" and older.data.tags["counts_for_topk"] == "false"
    assert older.data.tags["superseded_by"] == latest.info.run_id
    # a new study of the same name (its storage deleted, or another one) never takes the old run
    with open_dict(cfg):
        cfg.tune.storage = f"sqlite:///{tmp_path}/other.db"
    assert parent_run.find_parent_run(studies.load_study(cfg.tune), parent.info.experiment_id) is None


@pytest.mark.slow  # 1.5-2 s: the default suite stays under 5 minutes (CI runs the slow tests too)
def test_real_pruning_on_the_validation_curve(tmp_path):
    """The median pruner with no warm-up after one trial: a trial whose validation AUC stays below
    the first one's is pruned at its first iterations, by the real reports of fit."""
    # early stopping: GOOD's model is not its last tree, so its final val_auc is not the curve's last
    # (trees enough for early stopping to end the fit before the last)
    cfg = make_cfg(tmp_path, "tune.n_trials=2", "tune.refit=false", "tune.n_startup_trials=1",
                   "tune.pruner_warmup_steps=0", "tune.progress=false",
                   "method.params.early_stopping_rounds=2", "method.params.n_estimators=60")
    enqueue(cfg, GOOD, BAD)
    tune.run(cfg)
    good, bad = load(cfg).trials
    assert good.state == TrialState.COMPLETE and bad.state == TrialState.PRUNED
    n_trees = len(good.intermediate_values)
    assert 0 < len(bad.intermediate_values) < n_trees
    _, trials, refits = children(cfg)
    assert not refits
    assert trials[1].info.status == "KILLED" and trials[1].data.tags["trial_state"] == "PRUNED"
    # the pruned trial's run ends with its last reported iteration
    last_report = bad.intermediate_values[max(bad.intermediate_values)]
    assert trials[1].data.metrics["val_auc"] == pytest.approx(last_report)
    assert trials[0].info.status == "FINISHED" and trials[0].data.tags["trial_state"] == "COMPLETE"
    # MLflow's latest val_auc of a trial is its model's (the objective), logged after its curve
    curve = sorted(MlflowClient().get_metric_history(trials[0].info.run_id, "val_auc"), key=lambda m: m.step)
    assert trials[0].data.metrics["val_auc"] == pytest.approx(good.value)
    assert len(curve) == n_trees + 1 and curve[-1].value == pytest.approx(good.value)
    last_tree = curve[n_trees - 1]
    assert last_tree.step == n_trees - 1 and last_tree.value != pytest.approx(good.value)


def _sampled(tmp_path, name: str, seed: int) -> list[dict]:
    """The parameters TPE samples in a fresh study (2 random start-up trials, then 3 by TPE)."""
    cfg = make_cfg(tmp_path, f"tune.study_name={name}", f"tune.sampler_seed={seed}")
    study = studies.load_study(cfg.tune)
    for _ in range(5):
        trial = study.ask()
        params = search_space.suggest(trial, experiment.search_space(cfg.method))
        study.tell(trial, -abs(math.log10(params["mu"]) + 3))
    return [t.params for t in study.trials]


def test_the_seed_makes_the_tpe_sequence_reproducible(tmp_path):
    first = _sampled(tmp_path, "a", seed=1)
    assert _sampled(tmp_path, "b", seed=1) == first
    assert _sampled(tmp_path, "c", seed=2) != first


@pytest.mark.slow  # a few seconds: the default suite stays under 5 minutes
def test_timeout_stops_the_study_before_n_trials(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(study_run, "in_multirun", lambda: True)   # and no progress bar in a multirun
    # a trial takes 0.1-1 s here: 30 of them would take several seconds
    cfg = make_cfg(tmp_path, "tune.n_trials=30", "tune.timeout=1", "tune.refit=false")
    out = tune.run(cfg)
    assert 1 <= len(load(cfg).trials) < 30 and out["n_trials_complete"] >= 1
    assert "tune agbm" not in capsys.readouterr().err


def _failing_fit(numbers):
    real = experiment.fit_evaluate

    def fit(cfg, ds, params, callbacks=(), evaluate_test=True):
        if callbacks and callbacks[0].trial.number in numbers:
            raise ValueError("bad parameter combination")
        return real(cfg, ds, params, callbacks=callbacks, evaluate_test=evaluate_test)
    return fit


def test_failed_trials_are_recorded_not_fatal_and_do_not_use_up_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "fit_evaluate", _failing_fit({1}))
    cfg = make_cfg(tmp_path, "tune.n_trials=3")
    metrics = tune.run(cfg)
    study = load(cfg)
    # the failed trial's slot is run again: 3 trials count, as tune.n_trials asks
    assert [t.state == TrialState.FAIL for t in study.trials] == [False, True, False, False]
    assert studies.n_done(study) == 3 and metrics["n_trials_fail"] == 1
    assert study.trials[1].user_attrs["error"] == "ValueError: bad parameter combination"
    parent, trials, (refit,) = children(cfg)
    assert trials[1].info.status == "FAILED" and trials[1].data.tags["trial_state"] == "FAIL"
    assert "bad parameter combination" in trials[1].data.tags["error"]
    assert {trials[n].info.status for n in (0, 2, 3)} <= {"FINISHED", "KILLED"}
    assert "test_auc" in metrics and refit.info.status == "FINISHED" and parent.info.status == "FINISHED"


@pytest.mark.slow  # 1.5-2 s: the default suite stays under 5 minutes (CI runs the slow tests too)
def test_all_trials_failed_says_how_to_go_on_and_a_rerun_runs_n_trials(tmp_path, monkeypatch):
    """A study whose every trial failed is not stuck: the error quotes the first failure and says that
    rerunning runs n_trials new trials, which it does once the cause is fixed."""
    monkeypatch.setattr(experiment, "fit_evaluate", _failing_fit({0, 1}))
    cfg = make_cfg(tmp_path, "tune.n_trials=2")
    with pytest.raises(RuntimeError) as raised:
        tune.run(cfg)
    message = str(raised.value)
    assert "no trial completed" in message
    assert "the first failure, trial 0: ValueError: bad parameter combination" in message
    assert "run the same command again, which runs 2 new trials" in message
    assert [t.state for t in load(cfg).trials] == [TrialState.FAIL] * 2   # it gave up: no endless retries
    assert runs(cfg, "tags.role = 'study'")[0].info.status == "FAILED"
    assert mlflow.active_run() is None
    monkeypatch.undo()   # the cause fixed
    metrics = tune.run(cfg)
    study = load(cfg)
    assert [t.state == TrialState.FAIL for t in study.trials] == [True, True, False, False]
    assert studies.n_done(study) == 2 and "test_auc" in metrics
    (parent,) = runs(cfg, "tags.role = 'study'")
    assert parent.info.status == "FINISHED"


@pytest.mark.parametrize("mode", ["penalty", "constraint"])
def test_feature_budget_as_penalty_or_constraint(tmp_path, mode):
    """GOOD (12 features) beats SMALL (6) on validation AUC; with a budget of 8 it is still the best
    under a small penalty, and infeasible under the constraint."""
    cfg = make_cfg(tmp_path, "tune.n_trials=2", "tune.refit=false", "tune.objective=val_auc_budget",
                   "tune.feature_budget=8", "tune.budget_penalty=0.001", f"tune.budget_mode={mode}",
                   "tune.pruner=null")
    enqueue(cfg, GOOD, SMALL)
    out = tune.run(cfg)
    good, small = load(cfg).trials
    assert good.user_attrs["n_selected_features"] > 8 >= small.user_attrs["n_selected_features"]
    assert good.user_attrs["val_auc"] > small.user_attrs["val_auc"]
    parent, trials, _ = children(cfg)
    if mode == "penalty":
        excess = good.user_attrs["n_selected_features"] - 8
        assert good.value == pytest.approx(good.user_attrs["val_auc"] - 0.001 * excess)
        assert good.constraints == {} and "feasible" not in trials[0].data.tags
        best = good
    else:   # the score is the AUC; the excess is the constraint TPE learns (> 0: infeasible)
        assert good.value == pytest.approx(good.user_attrs["val_auc"])
        assert good.constraints == {"feature_budget": good.user_attrs["n_selected_features"] - 8}
        assert small.constraints["feature_budget"] <= 0
        assert (trials[0].data.tags["feasible"], trials[1].data.tags["feasible"]) == ("false", "true")
        best = small
    assert out["best_value"] == pytest.approx(best.value)
    assert parent.data.tags["best_trial"] == str(best.number)


@pytest.mark.slow  # 2-3 s: the default suite stays under 5 minutes (CI runs the slow tests too)
def test_hard_budget_gives_every_trial_max_features(tmp_path):
    """budget_mode=hard: each trial is within the budget by construction, even GOOD (12 features
    without a budget); the runs are tagged with it and the refit logs it as a param."""
    cfg = make_cfg(tmp_path, "tune.n_trials=3", "tune.feature_budget=3", "tune.budget_mode=hard",
                   "tune.pruner=null")
    enqueue(cfg, GOOD)
    out = tune.run(cfg)
    study = load(cfg)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
    assert all(1 <= t.user_attrs["n_selected_features"] <= 3 for t in study.trials)
    assert out["n_selected_features"] <= 3
    parent, trials, (refit,) = children(cfg)
    assert {r.data.tags["budget"] for r in [parent, refit, *trials.values()]} == {"3"}
    assert refit.data.params["budget"] == refit.data.params["method.params.max_features"] == "3"


@pytest.mark.parametrize("method, param", [("agbm", "max_features"), ("gbfs_topk", "max_features"),
                                           ("gbdt_topk", "k")])
def test_hard_budget_sets_the_methods_budget_param(tmp_path, method, param):
    cfg = make_cfg(tmp_path, f"method={method}", "tune.feature_budget=6", "tune.budget_mode=hard")
    hard = budget.with_hard_budget(cfg)
    assert hard.method.params[param] == 6 and budget.budget_tags(hard) == {"budget": "6"}
    assert budget.with_hard_budget(make_cfg(tmp_path, f"method={method}", "tune.feature_budget=6")) \
        .method.params.get(param) is None     # penalty mode leaves the method alone
    assert experiment.method_params(hard.method)[param] == 6


@pytest.mark.parametrize("overrides, match", [
    (["method=gbdt_full"], "has no hard feature budget"),
    (["method.params.max_features=4"], "disagrees with tune.feature_budget=6"),
])
def test_hard_budget_refuses_what_it_cannot_honour(tmp_path, overrides, match):
    cfg = make_cfg(tmp_path, "tune.feature_budget=6", "tune.budget_mode=hard", *overrides)
    with pytest.raises(ValueError, match=match):
        tune.run(cfg)
    assert not (tmp_path / "mlflow.db").exists()


def test_best_trial_skips_trials_over_the_budget():
    study = optuna.create_study(direction="maximize")
    for value, n in [(0.9, 12), (0.7, 6), (0.8, 9)]:
        study.add_trial(optuna.trial.create_trial(value=value, user_attrs={"n_selected_features": n}))
    tune_cfg = {"objective": "val_auc_budget", "feature_budget": 8, "budget_penalty": 0.01,
                "budget_mode": "constraint"}
    assert study_run.best_trial(study, tune_cfg).value == 0.7
    assert study_run.best_trial(study, {**tune_cfg, "feature_budget": 9}).value == 0.8
    assert study_run.best_trial(study, {**tune_cfg, "budget_mode": "penalty"}).value == 0.9
    assert study_run.best_trial(study, {**tune_cfg, "objective": "val_auc"}).value == 0.9
    with pytest.raises(RuntimeError, match=r"tune.feature_budget=5 features \(they used \[6, 9, 12\]"):
        study_run.best_trial(study, {**tune_cfg, "feature_budget": 5})


def test_optuna_4_learns_the_budget_through_constraints_func(tmp_path, monkeypatch):
    """Optuna 4 has no Trial.set_constraint: the sampler's constraints_func reads the feature count."""
    monkeypatch.setattr(objective_module, "trials_set_constraints", lambda: False)
    cfg = make_cfg(tmp_path, "tune.objective=val_auc_budget", "tune.feature_budget=8",
                   "tune.budget_mode=constraint")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # Optuna 5 deprecates constraints_func
        study = studies.load_study(cfg.tune)
    for n in (12, 6):
        trial = study.ask()
        trial_module.record(trial, {"val_auc": 0.7, "n_selected_features": n}, cfg.tune)
        study.tell(trial, 0.7)
    assert [t.constraints for t in study.trials] == [{"0": 4.0}, {"0": -2.0}]


def test_objective_value():
    tune_cfg = {"objective": "val_auc_budget", "feature_budget": 10, "budget_penalty": 0.01}
    assert objective_value(0.9, 14, tune_cfg) == pytest.approx(0.86)
    assert objective_value(0.9, 8, tune_cfg) == pytest.approx(0.9)
    assert objective_value(0.9, 14, {**tune_cfg, "objective": "val_auc"}) == pytest.approx(0.9)
    with pytest.raises(ValueError, match="feature_budget"):
        objective_value(0.9, 14, {**tune_cfg, "feature_budget": None})
    with pytest.raises(ValueError, match="tune.objective"):
        objective_value(0.9, 14, {**tune_cfg, "objective": "test_auc"})


@pytest.mark.parametrize("overrides, match", [
    ("method.search_space.mu.type=uniform", r"^method\.search_space\.mu\.type: unknown type 'uniform'"),
    ("+method.search_space.max_depth={type:int,low:2}",
     r"^method\.search_space\.max_depth\.high must be a finite number, got None"),
    ("+method.search_space.depth={type:int,low:2,high:6}", "depth"),   # not in method.params
    ("method.search_space.mu.low=0.5",
     r"^method\.search_space\.mu\.low \(0\.5\) is above method\.search_space\.mu\.high \(0\.1\)"),
    ("method.search_space.mu.low=0", r"^method\.search_space\.mu\.low must be positive with log: true"),
    ("method.search_space.mu.low=abc", r"^method\.search_space\.mu\.low must be a finite number, got 'abc'"),
    ("method.search_space.mu.log=maybe", r"^method\.search_space\.mu\.log must be true or false"),
    ("+method.search_space.mu.step=0.1", r"^method\.search_space\.mu: unknown keys \['step'\] for type"),
    ("+method.search_space.max_depth={type:int,low:2.5,high:6}",
     r"^method\.search_space\.max_depth\.low must be an integer for type int, got 2\.5"),
    ("+method.search_space.max_depth={type:categorical,choices:[]}",
     r"^method\.search_space\.max_depth\.choices must be a non-empty list"),
    ("+method.search_space.max_depth=4", r"^method\.search_space\.max_depth must be a mapping"),
    ("sampler=mvs sampler.search_space.subsample.high=2 sampler.search_space.subsample.low=3",
     r"^sampler\.search_space\.subsample\.low \(3\) is above"),
    ("tune=off", "tune=optuna"),
    ("tune.storage=null", "SQLAlchemy URL"),
    ("tune.budget_mode=soft", "tune.budget_mode"),
    ("tune.budget_mode=hard", "tune.budget_mode=hard needs tune.feature_budget"),
    ("tune.timeout=0", "tune.timeout"),
    ("tune.n_trials=0", "tune.n_trials"),
    ("tune.n_trials=true", "tune.n_trials"),
    ("tune.objective=val_auc_budget", "tune.feature_budget"),
])
def test_bad_settings_raise_before_any_trial_or_run(tmp_path, overrides, match):
    cfg = make_cfg(tmp_path, *overrides.split(), config="tune")
    with pytest.raises(ValueError, match=match):
        tune.run(cfg)
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "optuna.db").exists()


@pytest.mark.slow  # 1.5-2 s: the default suite stays under 5 minutes (CI runs the slow tests too)
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


def test_refit_mode_trials_report_each_step_once(tmp_path):
    # refit mode fits twice per trial (selection, then refit): both fits' iterations are reported,
    # the refit's after the selection's, and Optuna never sees a step twice
    cfg = make_cfg(tmp_path, "tune.n_trials=1", "method.params.refit=true", "tune.pruner=null")
    enqueue(cfg, GOOD)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*is already reported.*")
        tune.run(cfg)
    (trial,) = load(cfg).trials
    steps = sorted(trial.intermediate_values)
    assert steps == list(range(len(steps)))
    (_, trials, _) = children(cfg)
    refit_len = len(MlflowClient(tracking_uri=cfg.tracking.uri).get_metric_history(
        trials[0].info.run_id, "val_auc")) - 1      # the trial's curve is its final model's (the refit)
    assert len(steps) > refit_len >= 1              # the selection fit's steps come first


@pytest.mark.parametrize(("overrides", "match"), [
    (["dataset.download=false"], r"dataset=gisette: the real data is not on disk and dataset.download is "
                                 r"false; `python -m gbfs.data download gisette` fetches it"),
    # a mirror on a closed local port: the download fails at once, before any study or run
    (["dataset.download=true", "dataset.mirror=http://127.0.0.1:9/"],
     r"dataset=gisette: the real data is not on disk and could not be downloaded .*"
     r"`python -m gbfs.data download gisette`"),
])
def test_missing_real_data_is_refused_before_any_study_or_run(tmp_path, overrides, match, monkeypatch):
    monkeypatch.setenv("GBFS_DATA_DIR", str(tmp_path / "data"))
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("tune", overrides=[f"paths.root_dir={tmp_path}", f"paths.data_dir={tmp_path}/data",
                                         "dataset=gisette", "method=agbm", "tune.n_trials=1", *overrides])
    import functools

    from gbfs.data.fetching.download import fetch_dataset
    from runners.core import checks
    # the real download, without the sleeps between its retries
    monkeypatch.setattr(checks, "fetch_dataset", functools.partial(fetch_dataset, sleep=lambda s: None))
    with pytest.raises(ValueError, match=match):
        tune.run(cfg)
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "optuna.db").exists()
