"""Helpers of the harness tests: compose the Hydra config of the repository with overrides."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

import runners  # noqa: F401 (registers the resolvers of conf/: data_label)

CONF = Path(__file__).resolve().parents[1] / "conf"
# a tiny, fast setting: 300 + 50 rows of the Gisette stand-in with 100 columns, 15 trees
TINY = ["dataset=gisette_like", "dataset.scale=0.05", "dataset.kwargs.feature_scale=0.02",
        "method.params.n_estimators=15"]


def model_uri(run) -> str:
    """``runs:/<run_id>/<method>-<dataset>``: the MLflow model a run logged, by its name."""
    from runners.tracking.mlflow_model import model_name

    return f"runs:/{run.info.run_id}/{model_name(run.data.tags['method'], run.data.tags['dataset'])}"


def compose_cfg(root: Path, overrides: list[str], hydra_cfg: bool = False):
    """The composed config with every path under ``root`` (a fresh MLflow store per test).  The runs'
    figures (``tracking.log_figures``, ~0.15 s a run) are off unless a test turns them on: the tests
    of what they show do (``tests/harness/test_run.py``)."""
    figures = [] if any(o.startswith("tracking.log_figures=") for o in overrides) else \
        ["tracking.log_figures=false"]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=[f"paths.root_dir={root}", *figures, *overrides],
                       return_hydra_config=hydra_cfg)


def tiny_study_cfg(root: Path, *overrides: str):
    """A tiny study of runners.tune under ``root`` (TINY data, 2 random start-up trials, no bar, no
    summary)."""
    return compose_cfg(root, ["tune=optuna", *TINY, "tune.n_startup_trials=2", "print_summary=false",
                              "tune.progress=false", *overrides])


def stored_study(cfg):
    """The Optuna study of ``cfg.tune`` as its storage (an SQLAlchemy URL or a journal file) holds it now."""
    import optuna

    from runners.tuning.storages import open_storage

    return optuna.load_study(study_name=cfg.tune.study_name, storage=open_storage(cfg.tune.storage))


def paper_rows(method_prefix: str, k_param: str) -> list:
    """The GT-GBM paper's rows of a reproduction's tables (``conf/reproduce.yaml``): GBDT-Full, the
    selectors GBFS, A-GBM and GT-GBM, and GBDT-topK held to their K through ``k_param``; the method of
    row ``name`` is ``method=<method_prefix><name>``."""
    from runners.paper.reproduction.plan import Row

    selectors = [Row(name, label, (f"method={method_prefix}{name}",), selector=True, paper=name)
                 for name, label in (("gbfs", "GBFS"), ("agbm", "A-GBM"), ("gtgbm", "GT-GBM"))]
    return [Row("gbdt_full", "GBDT-Full", (f"method={method_prefix}gbdt_full",), paper="gbdt_full"),
            *selectors,
            Row("gbdt_topk", "GBDT-topK", (f"method={method_prefix}gbdt_topk",), k_param=k_param,
                paper="gbdt_topk")]


def unit_tags(parent: str, dataset: str, row: str, seed: int) -> dict[str, str]:
    """The tags of the run of a reproduction's unit (``runners.paper.reproduction.run``): under the
    reproduction ``parent``, its refit at seed 0 and evaluations at the other seeds."""
    return {"reproduction": parent, "repro_dataset": dataset, "repro_row": row, "seed": str(seed),
            "role": "refit" if seed == 0 else "evaluation"}


def reproduction_parent(root: Path, experiment: str, artifacts: Path | None = None):
    """A reproduction's parent run in a new ``experiment`` (its artifacts under ``artifacts``) of the
    SQLite MLflow store under ``root``, from now on the tracking URI: ``(client, experiment_id,
    parent_run_id)``."""
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{root}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    exp = client.create_experiment(experiment, artifact_location=str(artifacts) if artifacts else None)
    return client, exp, client.create_run(exp, tags={"role": "reproduction"}).info.run_id


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def open_optuna_storage(url: str, barrier, results) -> None:
    """Process target: wait for the others, then open (and if needed create) an Optuna storage as a
    tuning job does; put "ok" or the error on ``results``."""
    import optuna

    barrier.wait()
    try:
        optuna.storages.RDBStorage(url)
        results.put("ok")
    except Exception as exc:          # noqa: BLE001 -- reported to the test, which names it
        results.put(f"{type(exc).__name__}: {exc}"[:200])


def wait_for(predicate, what: str, timeout: float = 180.0, interval: float = 0.05):
    """Poll ``predicate`` until it returns something truthy, which is returned; fail naming ``what``
    after ``timeout`` seconds (generous: the tests must pass on a loaded machine)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def tune_argv(root: Path, overrides: list[str]) -> list[str]:
    """The command line of a ``runners.tune`` process on the TINY data under ``root``."""
    import sys

    return [sys.executable, "-m", "runners.tune", f"paths.root_dir={root}", *TINY, "print_summary=false",
            "tune.progress=false", *overrides]


def init_stores(cfg) -> None:
    """Create the MLflow store, its experiment and the Optuna storage of ``cfg`` as the multirun
    callbacks do before parallel jobs start (parallel first users race for a fresh schema)."""
    from runners.tuning.hydra_callbacks import InitMLflowStore, InitOptunaStorage

    InitMLflowStore().on_multirun_start(cfg)
    InitOptunaStorage().on_multirun_start(cfg)


def tune_worker(root: str, overrides: list[str], barrier, results) -> None:
    """Process target: compose the tune config, wait for the other workers, then run
    ``runners.tune.run`` as ``python -m runners.tune`` would; put ("ok", metrics) or ("error", text)
    on ``results``."""
    import traceback

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="tune", overrides=[f"paths.root_dir={root}", *TINY, "print_summary=false",
                                                     "tune.progress=false", *overrides])
    from runners import tune

    barrier.wait()
    try:
        results.put(("ok", tune.run(cfg)))
    except BaseException:          # noqa: BLE001 -- reported to the test, which shows it
        results.put(("error", traceback.format_exc()[-3000:]))


def run_workers(root: Path, overrides: list[str], n: int = 4) -> list[dict]:
    """``n`` processes (spawned, as joblib's loky and separate machines are) running the same tune
    config, released together by a barrier once imported; return their metrics."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=tune_worker, args=(str(root), overrides, barrier, results)) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        got = [results.get(timeout=600) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=120)
            if p.is_alive():   # only after a failure above: do not leave it behind
                p.kill()
    errors = [text for status, text in got if status != "ok"]
    assert not errors, errors[0]
    return [metrics for _, metrics in got]


def four_workers_on_one_study(root: Path, stores: list[str] | None = None) -> None:
    """Four worker processes on one study of 8 trials leave exactly what :func:`check_shared_study`
    asks.  ``stores``: the overrides of its Optuna storage and MLflow store (None: SQLite files under
    ``root``)."""
    overrides = ["tune.n_trials=8", "tune.n_startup_trials=2", "tune.pruner=null", "n_threads=1",
                 *(stores or [])]
    cfg = compose_cfg(root, ["tune=optuna", *TINY, *overrides])
    init_stores(cfg)   # a fresh store's schema, once, as the multirun callbacks do
    check_shared_study(cfg, run_workers(root, overrides), n_trials=8, n_workers=4)


def study_runs(uri: str, experiment: str = "gbfs"):
    """The runs of the MLflow experiment by role (deleted ones are not searched)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    found = client.search_runs([exp.experiment_id], max_results=1000)
    roles: dict[str, list] = {}
    for r in found:
        roles.setdefault(r.data.tags.get("role"), []).append(r)
    return roles


def check_shared_study(cfg, metrics: list[dict], n_trials: int, n_workers: int) -> None:
    """What several workers on one study must leave: ``n_trials`` counted trials and none RUNNING,
    one parent run holding every trial's run, one refit counting for GBDT-topK."""
    import pytest
    from mlflow.tracking import MlflowClient
    from optuna.trial import TrialState

    from runners.tuning.study import NOT_RUN, n_done

    study = stored_study(cfg)
    trials = study.get_trials()
    ran = [t for t in trials if NOT_RUN not in t.user_attrs]
    assert n_done(study) == n_trials
    assert [t.state for t in ran] == [TrialState.COMPLETE] * n_trials   # no failure, no pruning here
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    # the workers really shared the study: several of them ran its trials
    assert len({t.user_attrs["worker"] for t in ran}) >= 2
    roles = study_runs(cfg.tracking.uri)
    (parent,) = roles["study"]
    assert parent.info.status == "FINISHED" and parent.info.run_id == study.user_attrs["mlflow_run_id"]
    assert int(parent.data.tags["n_invocations"]) >= 2
    client = MlflowClient(tracking_uri=cfg.tracking.uri)
    arts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert "config.yaml" in arts and len([a for a in arts if a.startswith("config-")]) == n_workers - 1
    assert sorted(int(r.data.tags["trial_number"]) for r in roles["trial"]) == sorted(t.number for t in ran)
    assert {r.data.tags["mlflow.parentRunId"] for r in roles["trial"]} == {parent.info.run_id}
    (refit,) = roles["refit"]
    assert refit.data.tags["counts_for_topk"] == "true" and refit.info.status == "FINISHED"
    assert refit.data.tags["mlflow.parentRunId"] == parent.info.run_id
    (refitted,) = [m for m in metrics if "test_auc" in m]   # the refit's worker returns its metrics
    best = max(ran, key=lambda t: t.value)
    assert refitted["best_value"] == pytest.approx(best.value)
    # the others return the best when they left the study to the workers still running trials
    assert all(m.get("best_value", best.value) <= best.value for m in metrics)
    assert float(refit.data.params["method.params.mu"]) == pytest.approx(best.params["mu"])


def race(studies: list[tuple[str, str]], n_trials: int, n_workers: int = 6) -> list[list[int]]:
    """Run :func:`race_worker` in ``n_workers`` spawned processes on ``studies`` (created here); check
    that each study has exactly ``n_trials`` counted trials, none RUNNING, and every trial asked for
    run by one worker or marked not run; return the trials each worker ran per study."""
    import multiprocessing

    import optuna
    from optuna.trial import TrialState

    from runners.tuning import study as study_module

    for url, name in studies:
        optuna.create_study(study_name=name, storage=study_module.open_storage(url))
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(n_workers), ctx.Queue()
    procs = [ctx.Process(target=race_worker, args=(studies, n_trials, barrier, results))
             for _ in range(n_workers)]
    for p in procs:
        p.start()
    got = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=120)
    assert all(status == "ok" for status, _ in got), got
    for i, (url, name) in enumerate(studies):
        study = optuna.load_study(study_name=name, storage=study_module.open_storage(url))
        assert study_module.n_done(study) == n_trials, [t.state for t in study.trials]
        assert not study.get_trials(states=(TrialState.RUNNING,))
        run_here = [t for t in study.trials if study_module.NOT_RUN not in t.user_attrs]
        assert sum(ran[i] for _, ran in got) == len(run_here)
    return [ran for _, ran in got]


def race_worker(studies: list[tuple[str, str]], n_trials: int, barrier, results) -> None:
    """Process target: on each study (storage URL, name) of ``studies`` in turn, once the other workers are
    ready, run :func:`runners.tuning.study.run_trials` with an instant objective that fails below x = 0.2
    and prunes below 0.3; put ("ok", [number of trials run per study]) or ("error", text) on
    ``results``."""
    import traceback

    import optuna

    from runners.tuning import study as study_module

    def objective(trial):
        x = trial.suggest_float("x", 0, 1)
        if x < 0.2:
            raise ValueError("a failing trial")
        if x < 0.3:
            raise optuna.TrialPruned()
        return x

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ran = []
    try:
        for url, name in studies:
            study = optuna.load_study(study_name=name, storage=study_module.open_storage(url),
                                      sampler=optuna.samplers.RandomSampler())
            barrier.wait()
            ran.append(study_module.run_trials(study, objective, n_trials))
        results.put(("ok", ran))
    except BaseException:          # noqa: BLE001 -- reported to the test, which shows it
        results.put(("error", traceback.format_exc()[-3000:]))
