"""runners.tune on a real PostgreSQL server started here: the Optuna storage in one database, the
MLflow backend store in another, as for a study shared by several machines.

The server's binaries come from the ``pgserver`` wheel of the ``test`` extra (PostgreSQL 16 built
for manylinux); a PostgreSQL of the system (``pg_ctl`` on the PATH, or Debian's
``/usr/lib/postgresql/<version>/bin``) is used if that wheel is absent.  PostgreSQL refuses to run
as root: as root the server runs as ``nobody``, in a data folder of its own.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
from harness_utils import four_workers_on_one_study, race, stored_study, study_runs, tiny_study_cfg, wait_for

from runners import tune
from runners.tuning import study as studies

pytestmark = pytest.mark.usefixtures("restore_mlflow")


def server_binaries() -> Path | None:
    """The folder of ``initdb`` and ``postgres``: the pgserver wheel's, else the system's."""
    spec = importlib.util.find_spec("pgserver")   # not imported: only its binaries are used
    found = spec.submodule_search_locations or [] if spec else []
    candidates = [Path(p) / "pginstall" / "bin" for p in found]
    if shutil.which("pg_ctl"):
        candidates.append(Path(shutil.which("pg_ctl")).parent)
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    return next((c for c in candidates if (c / "initdb").exists() and (c / "postgres").exists()), None)


class Postgres:
    """A throw-away PostgreSQL server listening on a Unix socket only (no port to collide on)."""

    def __init__(self, bin_dir: Path):
        root = os.geteuid() == 0
        # in /tmp, which every account may enter, under a short name: a socket path has ~100 bytes
        self.dir = Path(tempfile.mkdtemp(prefix="gbfs-pg-", dir="/tmp" if root else None))
        self.as_user, self.proc = {}, None
        try:
            if root:   # postgres refuses root: run it as nobody, owning its folder
                try:
                    nobody = pwd.getpwnam("nobody")
                except KeyError:
                    raise RuntimeError("PostgreSQL refuses to run as root and this machine has no "
                                       "'nobody' account to run it as") from None
                os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
                self.as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
                bin_dir = self._reachable(bin_dir)
            self.bin, self.data = bin_dir, self.dir / "data"
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                      "--no-sync")
            self.log = open(self.dir / "server.log", "w")   # closed by stop()
            # no durability needed: fsync off keeps the many small commits of 4 workers fast
            argv = [str(self.bin / "postgres"), "-D", str(self.data), "-k", str(self.dir), "-h", "",
                    "-c", "fsync=off", "-c", "max_connections=200"]
            self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir,
                                         **self.as_user)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def _run(self, program: str, *args: str) -> None:
        res = subprocess.run([str(self.bin / program), *args], capture_output=True, text=True, cwd=self.dir,
                             timeout=300, **self.as_user)
        if res.returncode:
            raise RuntimeError(f"{program} failed ({res.returncode}): {res.stderr[-2000:]}")

    def _reachable(self, bin_dir: Path) -> Path:
        """``bin_dir``, or a copy that ``nobody`` can read of the installation (``pginstall``) and of
        the libraries its binaries find at ``$ORIGIN/../../../pgserver.libs`` (a checkout under a
        folder only root may enter)."""
        try:
            if subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True,
                              **self.as_user).returncode == 0:
                return bin_dir
        except PermissionError:
            pass
        install, top = bin_dir.parent, bin_dir.parents[2]
        copy = self.dir / "install"
        shutil.copytree(install, copy / install.parent.name / install.name)
        if (top / "pgserver.libs").is_dir():
            shutil.copytree(top / "pgserver.libs", copy / "pgserver.libs")
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | (0o055 if path.is_dir() else 0o044))
        return copy / install.parent.name / install.name / "bin"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg2://postgres@/{database}?host={self.dir}"

    def ready(self) -> bool:
        import psycopg2

        if self.proc.poll() is not None:
            raise RuntimeError(f"postgres exited with {self.proc.returncode}: "
                               f"{(self.dir / 'server.log').read_text()[-2000:]}")
        try:
            psycopg2.connect(host=str(self.dir), user="postgres", dbname="postgres",
                             connect_timeout=5).close()
        except psycopg2.OperationalError:   # not accepting connections yet
            return False
        return True

    def create_database(self, name: str) -> None:
        import psycopg2

        conn = psycopg2.connect(host=str(self.dir), user="postgres", dbname="postgres")
        conn.autocommit = True   # CREATE DATABASE cannot run in a transaction
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        conn.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # SIGINT: postgres's fast shutdown, which ends the sessions this process's pools still hold
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=60)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres():
    """A running PostgreSQL server (stopped and deleted after the module's tests)."""
    bin_dir = server_binaries()
    if bin_dir is None:
        pytest.skip('no PostgreSQL server binaries: pip install -e ".[test]" installs them (pgserver)')
    pytest.importorskip("psycopg2", reason='no psycopg2: pip install -e ".[test]" installs psycopg2-binary')
    server = Postgres(bin_dir)
    try:
        wait_for(server.ready, "PostgreSQL to accept connections", timeout=300, interval=0.1)
        yield server
    finally:
        server.stop()


@pytest.fixture
def databases(postgres, request):
    """Fresh Optuna and MLflow databases on the server for one test: their overrides."""
    name = request.node.name.lower().replace("[", "_").replace("]", "")[:40]
    for store in ("optuna", "mlflow"):
        postgres.create_database(f"{store}_{name}")
    optuna_url, mlflow_url = postgres.url(f"optuna_{name}"), postgres.url(f"mlflow_{name}")
    return [f"tune.storage='{optuna_url}'", f"tracking.uri='{mlflow_url}'"]   # quoted: the URLs hold a "="


@pytest.mark.slow
def test_one_worker_tunes_on_postgresql(tmp_path, databases):
    cfg = tiny_study_cfg(tmp_path, "tune.n_trials=3", *databases)
    metrics = tune.run(cfg)
    study = stored_study(cfg)
    assert studies.n_done(study) == 3 and "test_auc" in metrics
    roles = study_runs(cfg.tracking.uri)
    assert [len(roles[r]) for r in ("study", "trial", "refit")] == [1, 3, 1]
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "optuna.db").exists()


@pytest.mark.slow   # the race test below covers the claims in the default suite
def test_four_workers_on_one_postgresql_study_run_exactly_n_trials(tmp_path, databases):
    four_workers_on_one_study(tmp_path, databases)
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "optuna.db").exists()


@pytest.mark.slow
def test_claims_hold_in_a_race_of_instant_trials_on_postgresql(databases):
    """Six processes claiming instant trials of three studies in one PostgreSQL database (see the
    SQLite race in test_tune_workers.py)."""
    url = databases[0].partition("=")[2].strip("'")
    race([(url, f"race{rep}") for rep in range(3)], n_trials=12)
