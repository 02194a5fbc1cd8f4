"""Adversarial tests of the harness (``runners/``, ``conf/``): every refusal is an error naming the
config key, URI or file, raised before any fit or MLflow run exists, so no run is left RUNNING;
every network call to a store is bounded in time; nothing a user gave is silently dropped.

Unreachable stores are a closed port and a "blackhole" (a socket on 127.0.0.1 that accepts
connections and never answers); a call that could hang runs in a thread with a generous bound, so
a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import mlflow
import pytest
from harness_utils import CONF, TINY, compose_cfg
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

# runners.core.checks, runners.tracking.stores and runners.paper.reproduction.lock are imported where used, so
# that each test of the runners' behaviour also runs (and fails) on a harness without them
from runners import reproduce as rp
from runners import run as run_module
from runners import tune as tune_module
from runners.tracking import runs as tracking
from runners.tracking.local_server import free_port

pytestmark = pytest.mark.usefixtures("restore_mlflow", "mlflow_http_env")

REPO = Path(__file__).resolve().parents[2]
#: the store timeout the tests set (seconds), and the bound on the time to the error: generous,
#: for a loaded machine, and far below MLflow's own 4 min 23 s (closed port) or endless (blackhole)
TIMEOUT, BOUND = 1, 60.0
#: MLflow's HTTP settings, which the runners set process-wide from tracking.timeout / max_retries
HTTP_ENV = ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES")
#: a reproduction that runs no unit (the real Gisette is not on disk): a no-op, fast today
EMPTY_REPRODUCTION = ["reproduce.scale=tiny",
                      "+reproduce.scales.tiny={seeds: [0], n_trials: 1, mvs: null, datasets: {gisette: {}}}"]
RUNNERS = {"run": run_module.run, "tune": tune_module.run}
# both entry points share the checks: the default suite runs them through one, the slow one through both
RUNNER_PARAMS = ["run", pytest.param("tune", marks=pytest.mark.slow)]


# --------------------------------------------------------------------------------------- fixtures

@pytest.fixture
def mlflow_http_env():
    """Start without MLflow's HTTP settings in the environment and restore them afterwards: the
    runners set them for the process (and the configs default to them)."""
    saved = {name: os.environ.pop(name, None) for name in HTTP_ENV}
    yield
    for name, value in saved.items():
        os.environ.pop(name, None)
        if value is not None:
            os.environ[name] = value


@pytest.fixture
def blackhole():
    """A TCP server on 127.0.0.1 that accepts every connection and never answers; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.1)
    held, stop = [], threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:   # the accept timeout: look at stop again
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


@pytest.fixture
def hydra_app():
    """Make a composed config (with its ``hydra`` node) the running Hydra app's, as ``@hydra.main``
    does, so that the runners see its ``hydra.overrides.task``; cleared afterwards."""
    yield HydraConfig.instance().set_config
    HydraConfig.instance().cfg = None


# ---------------------------------------------------------------------------------------- helpers

def bounded(call: Callable[[], object], limit: float = BOUND) -> tuple[BaseException | None, float]:
    """Run ``call`` in a thread; return the exception it raised (or None) and the seconds it took.
    Fails the test if it is still running after ``limit`` seconds (the thread is left behind)."""
    box: dict[str, BaseException] = {}

    def target() -> None:
        try:
            call()
        except BaseException as err:   # noqa: BLE001 -- handed to the test
            box["error"] = err

    start = time.monotonic()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    elapsed = time.monotonic() - start
    assert not thread.is_alive(), f"still waiting after {limit:.0f} s"
    return box.get("error"), elapsed


def tiny(root: Path, overrides: list[str], tune: bool = False, hydra_cfg: bool = False):
    """The composed config of a tiny run (or study: one trial) under ``root``."""
    tuning = ["tune=optuna", "tune.n_trials=1", "tune.progress=false"] if tune else []
    return compose_cfg(root, [*TINY, "print_summary=false", *tuning, *overrides], hydra_cfg=hydra_cfg)


def all_runs(root: Path) -> list:
    """Every run (deleted ones too) of the SQLite MLflow store under ``root``; none without it."""
    db = root / "mlflow.db"
    if not db.is_file() or db.read_bytes()[:16] != b"SQLite format 3\x00":
        return []
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    ids = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    return client.search_runs(ids, run_view_type=ViewType.ALL, max_results=1000) if ids else []


def assert_no_run(root: Path) -> None:
    assert mlflow.active_run() is None
    assert all_runs(root) == []


def assert_refused(root: Path, overrides: list[str], match: str, tune: bool = False) -> None:
    """The tiny run (``tune``: study) of ``overrides`` under ``root`` is refused with a ValueError
    matching ``match`` before it writes anything: no store, no study, no run."""
    cfg = tiny(root, overrides, tune=tune)
    with pytest.raises(ValueError, match=match):
        RUNNERS["tune" if tune else "run"](cfg)
    assert not list(root.iterdir())


def reproduce_cfg(root: Path, overrides: list[str], hydra_cfg: bool = False):
    base = [f"paths.root_dir={root}", f"paths.data_dir={root}/data", *overrides]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="reproduce", overrides=base, return_hydra_config=hydra_cfg)


def reproduce(root: Path, overrides: list[str], cfg=None):
    """``runners.reproduce.run`` under ``root`` with ``overrides`` (its units composed likewise)."""
    base = [f"paths.root_dir={root}", f"paths.data_dir={root}/data", *overrides]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = cfg if cfg is not None else compose(config_name="reproduce", overrides=base)
        return rp.run(cfg, lambda ov: compose(config_name="reproduce", overrides=[*base, *ov]))


# ----------------------------------------------------------------- 1. negative tuning budgets

@pytest.mark.parametrize("override, key", [
    ("tune.budget_penalty=-1", "tune.budget_penalty"),      # a reward per feature over the budget
    ("tune.budget_penalty=abc", "tune.budget_penalty"),
    ("tune.budget_penalty=nan", "tune.budget_penalty"),
    ("tune.feature_budget=-3", "tune.feature_budget"),
    ("tune.feature_budget=abc", "tune.feature_budget"),
    ("tune.feature_budget=2.5", "tune.feature_budget")])
def test_a_negative_or_non_numeric_budget_is_refused_naming_the_key(tmp_path, override, key):
    assert_refused(tmp_path, ["tune.objective=val_auc_budget", "tune.feature_budget=3", override],
                   rf"^{key} must be", tune=True)


# ---------------------------------------------------------------- 2. every network call is bounded

@pytest.mark.parametrize("runner", RUNNER_PARAMS)
@pytest.mark.parametrize("server", ["closed port", "blackhole"])
def test_an_unreachable_tracking_server_fails_within_the_timeout_naming_the_uri(
        tmp_path, request, runner, server):
    port = free_port() if server == "closed port" else request.getfixturevalue("blackhole")
    uri = f"http://127.0.0.1:{port}"
    cfg = tiny(tmp_path, ["tracking=remote", f"tracking.uri={uri}", f"tracking.timeout={TIMEOUT}"],
               tune=runner == "tune")
    err, elapsed = bounded(lambda: RUNNERS[runner](cfg))
    assert isinstance(err, ConnectionError), err
    assert f"tracking.uri={uri}" in str(err) and f"tracking.timeout={TIMEOUT}" in str(err)
    assert elapsed < BOUND
    if server == "blackhole":   # it waited for the timeout: the probe, once, without retry
        assert TIMEOUT - 0.5 < elapsed < 3 * TIMEOUT + 5
    assert mlflow.active_run() is None and not (tmp_path / "mlflow.db").exists()
    # MLflow's own settings bound every later request of the process
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_HTTP_REQUEST_TIMEOUT

    assert (MLFLOW_HTTP_REQUEST_TIMEOUT.get(), MLFLOW_HTTP_REQUEST_MAX_RETRIES.get()) == (TIMEOUT, 2)


@pytest.mark.slow
def test_tracking_timeout_in_the_config_bounds_the_wait_for_a_silent_server(tmp_path, blackhole):
    uri = f"http://127.0.0.1:{blackhole}"
    cfg = tiny(tmp_path, ["tracking=remote", f"tracking.uri={uri}", "tracking.timeout=2",
                          "tracking.max_retries=0"])
    err, elapsed = bounded(lambda: run_module.run(cfg))
    assert isinstance(err, ConnectionError) and f"tracking.uri={uri}" in str(err), err
    assert "tracking.timeout=2 s" in str(err) and 1.5 < elapsed < BOUND
    assert [os.environ[name] for name in HTTP_ENV] == ["2", "0"]   # MLflow's settings, for what follows


@pytest.mark.slow
def test_after_the_probe_every_mlflow_request_is_bounded_by_the_settings(blackhole):
    from runners.tracking import stores

    uri = f"http://127.0.0.1:{blackhole}"
    with pytest.raises(ConnectionError, match="tracking.uri"):
        stores.reach_tracking(uri, timeout=1, max_retries=1)
    err, elapsed = bounded(lambda: MlflowClient(tracking_uri=uri).get_experiment_by_name("gbfs"))
    assert isinstance(err, mlflow.exceptions.MlflowException) and "timeout" in str(err).lower()
    assert elapsed < 30   # two attempts of 1 s and MLflow's backoff, not 8 x 120 s


def test_the_timeouts_default_to_30_s_and_to_mlflows_variables_when_set(tmp_path):
    cfg = tiny(tmp_path, ["tracking=remote", "tune=optuna"])
    assert (cfg.tracking.timeout, cfg.tracking.max_retries, cfg.tune.storage_timeout) == (30, 2, 30)
    assert tiny(tmp_path, []).tracking.timeout == 30
    # MLflow's variables as the user's environment sets them are the defaults
    code = (f"import sys; sys.path.insert(0, {str(REPO / 'tests')!r}); "
            f"from harness_utils import compose_cfg; "
            f"t = compose_cfg({str(tmp_path)!r}, []).tracking; print(t.timeout, t.max_retries)")
    env = {**os.environ, "MLFLOW_HTTP_REQUEST_TIMEOUT": "90", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "5"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.split() == ["90", "5"], out.stderr[-2000:]


def test_one_runs_timeout_never_becomes_the_next_configs_default(tmp_path, blackhole):
    """The runners set MLflow's variables for the process; a config composed afterwards still
    defaults to the user's environment, not to the last run's setting."""
    uri = f"http://127.0.0.1:{blackhole}"
    with pytest.raises(ConnectionError):
        run_module.run(tiny(tmp_path, ["tracking=remote", f"tracking.uri={uri}", "tracking.timeout=1"]))
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "1"
    assert tiny(tmp_path, []).tracking.timeout == 30


@pytest.mark.parametrize("override, key", [
    ("tracking.timeout=0", "tracking.timeout"), ("tracking.timeout=abc", "tracking.timeout"),
    ("tracking.timeout=2.5", "tracking.timeout"), ("tracking.max_retries=-1", "tracking.max_retries"),
    ("tracking.max_retries=11", "tracking.max_retries")])
def test_a_bad_timeout_is_refused_naming_the_key(tmp_path, override, key):
    assert_refused(tmp_path, [override], rf"^{key} must be")


@pytest.mark.slow
@pytest.mark.parametrize("server", ["closed port", "blackhole"])
def test_an_unreachable_tracking_server_fails_within_the_default_30_s(tmp_path, request, server):
    """The defaults alone (MLflow alone: 4 min 23 s on a closed port, over 10 min on a blackhole)."""
    port = free_port() if server == "closed port" else request.getfixturevalue("blackhole")
    uri = f"http://127.0.0.1:{port}"
    err, elapsed = bounded(lambda: run_module.run(tiny(tmp_path, ["tracking=remote", f"tracking.uri={uri}"])),
                           limit=120)
    assert isinstance(err, ConnectionError) and uri in str(err), err
    assert elapsed < 60 and (server == "closed port" or elapsed > 29)


def test_a_multirun_on_a_silent_tracking_server_stops_before_its_jobs(tmp_path, blackhole):
    from runners.tuning.hydra_callbacks import InitMLflowStore

    uri = f"http://127.0.0.1:{blackhole}"
    cfg = tiny(tmp_path, ["tracking=remote", f"tracking.uri={uri}", f"tracking.timeout={TIMEOUT}"])
    err, elapsed = bounded(lambda: InitMLflowStore().on_multirun_start(cfg))
    assert isinstance(err, SystemExit) and uri in str(err) and elapsed < BOUND


@pytest.mark.slow
def test_a_silent_postgresql_optuna_storage_fails_within_its_timeout_naming_it(tmp_path, blackhole):
    url = f"postgresql+psycopg2://optuna@127.0.0.1:{blackhole}/optuna"
    cfg = tiny(tmp_path, [f"tune.storage='{url}'", f"tune.storage_timeout={TIMEOUT}"], tune=True)
    err, elapsed = bounded(lambda: tune_module.run(cfg))
    assert isinstance(err, ConnectionError), err
    assert f"tune.storage={url}" in str(err) and f"tune.storage_timeout={TIMEOUT}" in str(err)
    assert "timeout expired" in str(err) and elapsed < BOUND
    assert_no_run(tmp_path)   # the MLflow store was opened first, but no run exists


@pytest.mark.slow
def test_a_silent_postgresql_optuna_storage_fails_within_the_default_30_s(tmp_path, blackhole):
    url = f"postgresql+psycopg2://optuna@127.0.0.1:{blackhole}/optuna"
    err, elapsed = bounded(lambda: tune_module.run(tiny(tmp_path, [f"tune.storage='{url}'"], tune=True)),
                           limit=120)
    assert isinstance(err, ConnectionError) and f"tune.storage={url}" in str(err), err
    assert 29 < elapsed < 60


def test_a_multirun_on_a_silent_optuna_storage_stops_before_its_jobs(tmp_path, blackhole):
    from runners.tuning.hydra_callbacks import InitOptunaStorage

    url = f"postgresql+psycopg2://optuna@127.0.0.1:{blackhole}/optuna"
    cfg = tiny(tmp_path, [f"tune.storage='{url}'", f"tune.storage_timeout={TIMEOUT}"], tune=True)
    err, elapsed = bounded(lambda: InitOptunaStorage().on_multirun_start(cfg))
    assert isinstance(err, SystemExit) and f"tune.storage={url}" in str(err) and elapsed < BOUND


@pytest.mark.slow
def test_a_timeout_the_storage_url_gives_is_kept(tmp_path, blackhole):
    from runners.tracking import stores

    url = f"postgresql+psycopg2://optuna@127.0.0.1:{blackhole}/optuna?connect_timeout=2"
    assert stores.connect_args(url, 30) == {}                       # not overridden by connect_args
    assert stores.connect_args(url.split("?")[0], 30) == {"connect_timeout": 30}
    assert stores.connect_args("sqlite:///optuna.db", 30) == {}
    assert stores.connect_args("mysql+pymysql://u@h/db", 7) == {"connect_timeout": 7}
    from runners.tuning.study import open_storage

    err, elapsed = bounded(lambda: open_storage(url, 30))
    assert isinstance(err, ConnectionError) and "timeout expired" in str(err)
    assert elapsed < 15   # the URL's 2 s, not the 30 s


def test_a_silent_postgresql_tracking_store_fails_within_the_timeout_naming_it(tmp_path, blackhole):
    uri = f"postgresql+psycopg2://mlflow@127.0.0.1:{blackhole}/mlflow"
    cfg = tiny(tmp_path, [f"tracking.uri='{uri}'", f"tracking.timeout={TIMEOUT}"])
    err, elapsed = bounded(lambda: run_module.run(cfg))
    assert isinstance(err, ConnectionError) and f"tracking.uri={uri}" in str(err), err
    assert elapsed < BOUND and mlflow.active_run() is None


# ------------------------------------------------------------------ 3. the parent run must exist

@pytest.fixture
def parents(tmp_path):
    """A store with the runs a parent id may wrongly name: a deleted run of the experiment and a run
    of another experiment (both ended); returns the config's overrides for each case."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    exp_id = tracking.init_store(uri, "gbfs", str(tmp_path / "mlartifacts"))
    client = MlflowClient(tracking_uri=uri)
    deleted = client.create_run(exp_id).info.run_id
    client.set_terminated(deleted, "FINISHED")
    client.delete_run(deleted)
    other = client.create_run(client.create_experiment("other")).info.run_id
    client.set_terminated(other, "FINISHED")
    return {"missing": ("0123456789abcdef0123456789abcdef", "no such run"),
            "deleted": (deleted, "deleted"), "other experiment": (other, "in experiment")}


@pytest.mark.parametrize("runner", RUNNER_PARAMS)
@pytest.mark.parametrize("case", ["missing", "deleted", "other experiment"])
def test_a_parent_run_id_that_is_no_run_of_the_experiment_is_refused(tmp_path, parents, runner, case):
    run_id, why = parents[case]
    before = {r.info.run_id for r in all_runs(tmp_path)}
    cfg = tiny(tmp_path, [f"tracking.parent_run_id={run_id}"], tune=runner == "tune")
    with pytest.raises(ValueError, match=rf"tracking.parent_run_id='{run_id}': .*{why}"):
        RUNNERS[runner](cfg)
    after = all_runs(tmp_path)
    assert {r.info.run_id for r in after} == before and mlflow.active_run() is None
    assert not [r for r in after if r.info.status == "RUNNING"]


def test_an_existing_parent_run_is_accepted_and_nests_the_run(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    parent = client.create_run(tracking.init_store(uri, "gbfs", str(tmp_path / "mlartifacts"))).info.run_id
    client.set_terminated(parent, "FINISHED")
    run_module.run(tiny(tmp_path, [f"tracking.parent_run_id={parent}", "tracking.log_model=false"]))
    (child,) = [r for r in all_runs(tmp_path) if r.info.run_id != parent]
    assert child.data.tags["mlflow.parentRunId"] == parent and child.info.status == "FINISHED"


# ---------------------------------------------------------------------- 4. errors that name the cause

def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00garbage\xff" * 100)


def _directory(path: Path) -> None:
    path.mkdir()


def _read_only(path: Path, monkeypatch) -> None:
    """A read-only file as a user other than root sees it (root writes read-only files): an empty
    SQLite file with mode 0444, ``os.access`` answering for it as for that user."""
    import sqlite3

    sqlite3.connect(path).close()
    path.chmod(0o444)
    real = os.access

    def access(target, mode, *args, **kwargs):
        if Path(target) == path and mode & os.W_OK:
            return False
        return real(target, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


STORE_FILES = {"mlflow": ("mlflow.db", "tracking.uri", False), "optuna": ("optuna.db", "tune.storage", True)}


@pytest.mark.parametrize("store", sorted(STORE_FILES))
@pytest.mark.parametrize("problem, message", [
    ("garbage", "is not an SQLite database"), ("directory", "is a directory"), ("read-only", "is read-only")])
def test_an_unusable_sqlite_store_is_refused_naming_the_file(tmp_path, monkeypatch, store, problem, message):
    name, key, tune = STORE_FILES[store]
    path = tmp_path / name
    {"garbage": _garbage, "directory": _directory}.get(problem, lambda p: _read_only(p, monkeypatch))(path)
    cfg = tiny(tmp_path, [], tune=tune)
    shown = re.escape(str(path))
    with pytest.raises(ValueError, match=rf"^{key}='sqlite:///{shown}': the SQLite file {shown} {message}"):
        RUNNERS["tune" if tune else "run"](cfg)
    monkeypatch.undo()
    assert_no_run(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files: nothing to refuse")
@pytest.mark.parametrize("store", sorted(STORE_FILES))
def test_a_really_read_only_sqlite_store_is_refused_naming_the_file(tmp_path, store):
    import sqlite3

    name, key, tune = STORE_FILES[store]
    sqlite3.connect(tmp_path / name).close()
    (tmp_path / name).chmod(0o444)
    with pytest.raises(ValueError, match=rf"^{key}=.*{name} is read-only"):
        RUNNERS["tune" if tune else "run"](tiny(tmp_path, [], tune=tune))


@pytest.mark.parametrize("url, message", [
    ("garbage://x", r"tune.storage='garbage://x': unknown database 'garbage'"),
    ("not a url", r"tune.storage='not a url' is not an SQLAlchemy URL"),
    ("''", r"tune.storage must be an SQLAlchemy URL")])
def test_a_bad_storage_url_is_refused_naming_the_key(tmp_path, url, message):
    assert_refused(tmp_path, [f"tune.storage={url}"], message, tune=True)


def test_a_storage_whose_driver_is_missing_names_the_driver(tmp_path):
    try:
        import psycopg  # noqa: F401
        pytest.skip("psycopg is installed: postgresql:// has its driver")
    except ImportError:
        pass
    with pytest.raises(ValueError, match=r"tune.storage='postgresql://u@db/optuna': the driver 'psycopg'"):
        tune_module.run(tiny(tmp_path, ["tune.storage='postgresql://u@db/optuna'"], tune=True))


@pytest.mark.parametrize("override, message", [
    ("tracking.tags=5", r"tracking.tags must be a mapping of tag names to values.*got 5"),
    ("tracking.tags=campaign", r"tracking.tags must be a mapping.*got .campaign."),
    ("++tracking.tags={a: [1, 2]}", r"tracking.tags: the values of \['a'\] must be single values")])
def test_tags_that_are_not_a_mapping_of_values_are_refused(tmp_path, override, message):
    assert_refused(tmp_path, [override], message)


@pytest.mark.parametrize("overrides, key", [
    (["method=gbfs", "method.params.max_features=ten"], "method.params.max_features"),
    (["method=agbm", "method.params.max_features=-1"], "method.params.max_features"),
    (["method=gtgbm", "method.params.max_features=2.5"], "method.params.max_features"),
    (["method=gbfs_topk", "method.params.max_features=ten"], "method.params.max_features"),
    (["method=gbdt_topk", "method.params.k=ten"], "method.params.k"),
    (["method=agbm_path", "method.budgets=[5,ten]"], r"method.budgets\[1\]"),
    (["method=agbm_path", "method.budgets=5"], "method.budgets")])
def test_a_feature_budget_that_is_no_count_is_refused_naming_the_key(tmp_path, overrides, key):
    assert_refused(tmp_path, overrides, rf"^{key} must be")


@pytest.mark.parametrize("override, key", [
    ("tune.sampler_seed=abc", "tune.sampler_seed"), ("tune.sampler_seed=-1", "tune.sampler_seed"),
    ("tune.n_startup_trials=five", "tune.n_startup_trials"),
    ("tune.pruner_warmup_steps=1.5", "tune.pruner_warmup_steps"),
    ("tune.storage_timeout=0", "tune.storage_timeout")])
def test_a_tuning_integer_that_is_no_integer_is_refused_naming_the_key(tmp_path, override, key):
    assert_refused(tmp_path, [override], rf"^{key} must be", tune=True)


def _holder(path: Path) -> subprocess.Popen:
    """Another process holding the lock ``path`` (as a running reproduction does)."""
    code = ("import fcntl, os, sys, time\n"
            f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, b'elsewhere:4242')\n"
            "print('locked', flush=True)\n"
            "time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_reproduction_of_one_name_is_refused_naming_the_first(tmp_path):
    from runners.paper.reproduction import lock as reproduce_lock

    cfg = reproduce_cfg(tmp_path, EMPTY_REPRODUCTION)
    holder = _holder(reproduce_lock.lock_path(cfg))
    try:
        with pytest.raises(RuntimeError, match=r"reproduction 'tiny' .* is already running in process "
                                               r"elsewhere:4242 .*reproduce.name=<another name>"):
            reproduce(tmp_path, EMPTY_REPRODUCTION)
        assert_no_run(tmp_path)
    finally:
        holder.send_signal(signal.SIGKILL)   # the kernel releases a dead process's lock
        holder.wait(timeout=30)
    assert reproduce(tmp_path, EMPTY_REPRODUCTION) == {}
    (parent,) = all_runs(tmp_path)
    assert parent.info.status == "FINISHED"


def test_a_reproduction_running_in_a_live_process_is_not_resumed(tmp_path):
    """The guard across machines, which share no lock file: the parent run is RUNNING in a live
    process (here a child of this test, as another host's process would count)."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    exp_id = tracking.init_store(uri, "reproduction", str(tmp_path / "mlartifacts"))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        worker = f"{socket.gethostname()}:{child.pid}:{tracking.proc_stat(child.pid)[1]}"
        client = MlflowClient(tracking_uri=uri)
        parent = client.create_run(exp_id, tags={"role": "reproduction", "reproduction_name": "tiny",
                                                 "worker": worker}).info.run_id
        with pytest.raises(RuntimeError, match=rf"its MLflow run {parent} is RUNNING in process {worker}"):
            reproduce(tmp_path, EMPTY_REPRODUCTION)
        assert [r.info.run_id for r in all_runs(tmp_path)] == [parent]
    finally:
        child.kill()
        child.wait(timeout=30)
    reproduce(tmp_path, EMPTY_REPRODUCTION)   # its process died: the rerun resumes the reproduction
    assert [(r.info.run_id, r.info.status) for r in all_runs(tmp_path)] == [(parent, "FINISHED")]


#: one row (GBFS), one seed, two trials on 300 x 100: a whole reproduction in seconds
ONE_ROW = [*(f"~reproduce.rows.{row}" for row in ("gbdt_full", "agbm", "gtgbm", "gbdt_topk", "lgbm_cegb",
                                                  "agbm_refit", "gbfs_topk", "agbm_budget", "agbm_exact",
                                                  "gtgbm_exact")),
           "method.params.n_estimators=10", "reproduce.scale=tiny",
           "+reproduce.scales.tiny={seeds: [0], n_trials: 2, mvs: null, "
           "datasets: {gisette_like: {scale: 0.05, kwargs: {feature_scale: 0.02}}}}"]


@pytest.mark.slow
def test_two_reproductions_at_once_one_runs_the_other_says_so(tmp_path):
    # an existing store, as after earlier runs (on a fresh one the two also raced its schema)
    tracking.init_store(f"sqlite:///{tmp_path}/mlflow.db", "reproduction", str(tmp_path / "mlartifacts"))
    argv = [sys.executable, "-m", "runners.reproduce", f"paths.root_dir={tmp_path}",
            f"paths.data_dir={tmp_path}/data", "n_threads=1", *ONE_ROW]
    procs = [subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes[0] == 0, outs
    if codes[1] != 0:   # they overlapped (the usual case): the second said why, and ran nothing
        (refused,) = [out for p, out in zip(procs, outs) if p.returncode != 0]
        assert "is already running in process" in refused and "no FINISHED run" not in refused
    runs = all_runs(tmp_path)
    assert [r.data.tags["role"] for r in runs].count("reproduction") == 1
    assert not [r for r in runs if r.info.status == "RUNNING"]


# -------------------------------------------------------------- 5. overrides that do nothing

def test_an_empty_search_space_override_is_refused_saying_how_to_remove_entries(tmp_path, hydra_app):
    cfg = tiny(tmp_path, ["method.search_space={}"], tune=True, hydra_cfg=True)
    hydra_app(cfg)
    with pytest.raises(ValueError, match=r"^method.search_space=\{\} does not empty method.search_space: "
                                         r"Hydra merges .* keeps \['mu', .* ~method.search_space.mu"):
        tune_module.run(cfg)
    assert not list(tmp_path.iterdir())


def test_an_empty_rows_override_is_refused_before_the_reproduction(tmp_path, hydra_app):
    cfg = reproduce_cfg(tmp_path, [*EMPTY_REPRODUCTION, "reproduce.rows={}"], hydra_cfg=True)
    hydra_app(cfg)
    with pytest.raises(ValueError, match=r"^reproduce.rows=\{\} does not empty reproduce.rows.*"
                                         r"~reproduce.rows.gbdt_full"):
        reproduce(tmp_path, [], cfg=cfg)
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.slow
def test_an_empty_mapping_override_is_refused_from_the_command_line(tmp_path):
    argv = [sys.executable, "-m", "runners.run", f"paths.root_dir={tmp_path}", "dataset.kwargs={}"]
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert "dataset.kwargs={} does not empty dataset.kwargs" in out.stderr, out.stderr[-2000:]
    assert not (tmp_path / "mlflow.db").exists()


def test_only_overrides_that_change_nothing_are_refused(tmp_path):
    from runners.core import checks

    cfg = reproduce_cfg(tmp_path, [])
    for fine in (["tracking.tags={}"], ["+extra={}"], ["~reproduce.rows.gbfs"], ["method=gbfs,agbm"],
                 ["reproduce.rows.gbfs.label=GBFS2"], ["tracking.tags={a: 1}"]):
        checks.check_overrides(cfg, fine)
    with pytest.raises(ValueError, match=r"^reproduce.scales.quick.datasets.gisette_like=\{\} does not"):
        checks.check_overrides(cfg, ["reproduce.scales.quick.datasets={gisette_like: {}}"])


@pytest.mark.parametrize("name", ["''", "'  '", "null"])
def test_an_empty_study_name_is_refused(tmp_path, name):
    assert_refused(tmp_path, [f"tune.study_name={name}"], r"^tune.study_name must be a non-empty string",
                   tune=True)
