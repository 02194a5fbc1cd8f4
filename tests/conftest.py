"""Fixtures shared by the tests: the small, seeded data sets of the estimator-level tests (drawn by
``tests/estimator_cases.py``), small booster settings, and MLflow's state and stores."""

from __future__ import annotations

import os

# numba's OpenMP threads spin while they wait for work: on a loaded machine the spinning threads
# steal the cores the working ones need and the suite runs several times slower (measured: 69 s
# against 16 s for the grower tests under a load of 8 on 2 cores).  Set before numba starts its
# thread pool; subprocesses the tests start inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# each worker process of a parallel run (pytest-xdist) keeps its own numba cache: numba's cache
# index is rewritten whole by whichever process compiles a new signature, with no lock, so two
# processes saving signatures of one kernel at the same moment could leave the index naming the
# other one's code.  The caches live in the checkout (.numba_cache/, ignored by git), as
# __pycache__ does: a fresh clone compiles every kernel anew -- a cache keyed by the source's
# content alone would keep a kernel that inlined a helper changed since.  A run in one process
# (-n 0, the slow tests) keeps the cache in __pycache__ beside the code.
if os.environ.get("PYTEST_XDIST_WORKER") and "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                 ".numba_cache", os.environ["PYTEST_XDIST_WORKER"])

import pytest  # noqa: E402
from estimator_cases import sparse_classification, sparse_regression  # noqa: E402


@pytest.fixture(scope="session")
def clf_data():
    """(X, y) for binary classification, labels in {0, 1}."""
    return sparse_classification()


@pytest.fixture(scope="session")
def reg_data():
    """(X, y) for regression."""
    return sparse_regression()


@pytest.fixture(scope="session")
def clf_split():
    """(X_train, y_train, X_val, y_val) for eval_set / early-stopping tests."""
    X, y = sparse_classification(n_samples=600, seed=2)
    return X[:400], y[:400], X[400:], y[400:]


@pytest.fixture(scope="session")
def reg_split():
    X, y = sparse_regression(n_samples=600, seed=3)
    return X[:400], y[:400], X[400:], y[400:]


@pytest.fixture
def fast_params():
    """Small settings that keep fits fast but still grow real trees (a fresh dict per test)."""
    return dict(n_estimators=15, max_leaves=8, min_samples_leaf=5, random_state=0)


@pytest.fixture
def restore_mlflow():
    """Leave MLflow as the test found it: no active run, the same tracking URI (harness tests)."""
    import mlflow

    uri = mlflow.get_tracking_uri()
    yield
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(uri)


@pytest.fixture
def mlflow_server(tmp_path):
    """The URL of a real ``mlflow server`` on 127.0.0.1, SQLite backend and proxied artifacts under
    ``tmp_path`` (``tests/mlflow_fixture.py``: readiness polled, stopped with its workers)."""
    from mlflow_fixture import mlflow_server as server

    with server(tmp_path) as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def mlflow_schema_once(tmp_path_factory):
    """Build MLflow's SQLite schema once per session and copy it into each new store.

    A new SQLite tracking store runs MLflow's whole migration history (about 1.2 s on 2 cores),
    and the harness tests make a fresh store per test: ~80 s of the suite.  MLflow builds the schema
    itself, once, into a template; every later new store in this process gets a byte copy of it
    through SQLite's backup API, which is what the migrations would have written.  Subprocesses the
    tests start (the command-line runs) still migrate for real, as a user's first run does.
    """
    try:
        import mlflow.store.db.utils as db_utils
    except ImportError:        # library-only installs: no harness, no stores
        yield
        return
    import sqlite3

    import sqlalchemy

    migrate = db_utils._initialize_tables
    template = tmp_path_factory.mktemp("mlflow-schema") / "mlflow.db"

    def initialize(engine):
        path = engine.url.database if engine.url.get_backend_name() == "sqlite" else None
        if not path or path == ":memory:":
            return migrate(engine)
        if not template.exists():
            fresh = sqlalchemy.create_engine(f"sqlite:///{template}")
            try:
                migrate(fresh)
            finally:
                fresh.dispose()
        raw = engine.raw_connection()
        try:
            source = sqlite3.connect(template)
            try:
                source.backup(raw.driver_connection)
            finally:
                source.close()
        finally:
            raw.close()

    db_utils._initialize_tables = initialize
    yield
    db_utils._initialize_tables = migrate
