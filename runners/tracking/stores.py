"""Reaching the harness's two stores -- MLflow's tracking store (``tracking.uri``) and Optuna's RDB
storage (``tune.storage``) -- within a bounded time, and refusing, naming the config key, a URL, a
driver or an SQLite file they cannot work with.  Everything here runs before any MLflow run exists.

Why each check is needed (all measured on MLflow 3.17, Optuna 5, SQLAlchemy 2.1):

* MLflow retries a failing HTTP request 7 times with exponential backoff, each attempt waiting up
  to 120 s: an unreachable server failed a run only after 4 min 23 s, and a server that accepts
  connections but never answers hung it for over 10 minutes.  MLflow reads its own settings
  (``MLFLOW_HTTP_REQUEST_TIMEOUT``, ``MLFLOW_HTTP_REQUEST_MAX_RETRIES``) at every request, so
  :func:`reach_tracking` sets them from ``tracking.timeout`` and ``tracking.max_retries`` and first
  probes the server once, without retry, so that a wrong URI fails within ``tracking.timeout``.
* A PostgreSQL or MySQL server that does not answer blocks its driver for ever unless it is given a
  connect timeout (:func:`connect_args`, as SQLAlchemy ``connect_args``).
* SQLite errors name no file ("file is not a database", "unable to open database file"; MLflow
  retries the latter for 100 s): :func:`sqlite_problem` says which file and what is wrong with it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from urllib.parse import urlparse

#: seconds to wait for a store's answer when the config does not say (``tracking.timeout``)
DEFAULT_TIMEOUT = 30
#: retries of a failed MLflow HTTP request after the start-up probe (MLflow's own default is 7)
DEFAULT_RETRIES = 2
#: MLflow's upper bound on ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` (``_MLFLOW_HTTP_REQUEST_MAX_RETRIES_LIMIT``)
MAX_RETRIES_LIMIT = 10

#: MLflow's database stores: SQLAlchemy URLs, a driver may follow (``postgresql+psycopg2://``)
DB_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
ACCEPTED_URIS = ("sqlite:///<file>, postgresql://..., mysql://..., mssql://... (SQLAlchemy URLs), "
                 "http(s)://<host>:<port> (an MLflow tracking server) or databricks[://<profile>]")
#: the DBAPI argument bounding the time a driver waits to connect, by SQLAlchemy driver name
CONNECT_TIMEOUT_ARGS = {"psycopg2": "connect_timeout", "psycopg": "connect_timeout", "pg8000": "timeout",
                        "pymysql": "connect_timeout", "mysqldb": "connect_timeout",
                        "mariadbconnector": "connect_timeout", "mysqlconnector": "connection_timeout",
                        "pyodbc": "timeout", "pymssql": "login_timeout"}
#: a common driver of each server database, named in the URL (SQLAlchemy 2.1's default for
#: postgresql:// is psycopg 3, while psycopg2 is the one most installs have)
DRIVERS = {"postgresql": "postgresql+psycopg2://", "mysql": "mysql+pymysql://", "mssql": "mssql+pyodbc://"}
#: the first bytes of every SQLite 3 database file
SQLITE_HEADER = b"SQLite format 3\x00"


class StoreUnreachable(ConnectionError):
    """A store's server did not answer (refused, or silent beyond the timeout); the message names
    the config key and the URL."""


def shown(url: str) -> str:
    """``url`` with its password masked, for error messages and logs."""
    parsed = urlparse(url)
    if parsed.password is None:
        return url
    return parsed._replace(netloc=parsed.netloc.replace(f":{parsed.password}@", ":***@")).geturl()


# ------------------------------------------------------------------------------ MLflow tracking

def check_uri(uri: object) -> None:
    """Raise ``ValueError`` naming ``tracking.uri`` unless ``uri`` is a tracking store MLflow 3 opens:
    :data:`DB_SCHEMES` (SQLite with a file), ``http(s)``, ``databricks``, the schemes of installed
    tracking-store plugins, and the file store only with ``MLFLOW_ALLOW_FILE_STORE=true``.  (MLflow's
    error for an unknown scheme says "Model registry functionality is unavailable".)"""
    problem = _uri_problem(uri) if isinstance(uri, str) and uri else "it is empty"
    if problem:
        raise ValueError(f"tracking.uri={uri!r} is not an MLflow tracking store ({problem}); expected "
                         f"{ACCEPTED_URIS}")


def _uri_problem(uri: str) -> str | None:
    parsed = urlparse(uri)
    scheme = parsed.scheme.split("+")[0].lower()
    if scheme == "sqlite":
        return None if uri.startswith("sqlite:///") and len(uri) > len("sqlite:///") else \
            "SQLite needs a file: sqlite:///relative.db or sqlite:////absolute.db"
    if scheme in DB_SCHEMES or uri == "databricks" or scheme == "databricks":
        return None
    if scheme in ("http", "https"):
        return None if parsed.netloc else "no host"
    if scheme in ("", "file") or len(scheme) == 1:   # a path (a Windows drive letter looks like a scheme)
        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() in ("1", "true"):
            return None
        return "MLflow 3 refuses its file store unless MLFLOW_ALLOW_FILE_STORE=true; use sqlite:///<file>"
    if scheme in {ep.name for ep in entry_points(group="mlflow.tracking_store")}:
        return None
    return f"unknown scheme {parsed.scheme!r}"


#: MLflow's HTTP settings as the environment gave them when the harness was imported, before the
#: runners set them from ``tracking.timeout`` and ``max_retries``: the user's, and so the defaults of
#: those keys (read from here, not from ``os.environ``, so that one run's setting never becomes the
#: next config's default in the same process)
USER_ENV = {name: os.environ.get(name)
            for name in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES")}


def env_default(name: str, default: int) -> int | str:
    """MLflow's setting ``name`` as the user's environment gave it (:data:`USER_ENV`), else
    ``default``: the resolver ``${mlflow_env:NAME,default}`` of ``conf/tracking/*.yaml``."""
    value = USER_ENV.get(name, os.environ.get(name))
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return value   # refused by check_timeouts, naming the variable


def check_timeouts(timeout: object, max_retries: object) -> None:
    """Raise ``ValueError`` naming ``tracking.timeout`` / ``tracking.max_retries`` unless they are a
    positive and a non-negative integer (MLflow reads both as integers; it refuses more than
    :data:`MAX_RETRIES_LIMIT` retries)."""
    if not _is_int(timeout) or timeout < 1:
        raise ValueError(f"tracking.timeout must be a positive whole number of seconds (it defaults to "
                         f"$MLFLOW_HTTP_REQUEST_TIMEOUT if set), got {timeout!r}")
    if not _is_int(max_retries) or not 0 <= max_retries <= MAX_RETRIES_LIMIT:
        raise ValueError(f"tracking.max_retries must be a whole number in [0, {MAX_RETRIES_LIMIT}] (it "
                         f"defaults to $MLFLOW_HTTP_REQUEST_MAX_RETRIES if set), got {max_retries!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def reach_tracking(uri: str, timeout: int | None = None, max_retries: int | None = None,
                   experiment: str = "Default") -> None:
    """Make sure MLflow can open ``uri`` before any run: refuse what it cannot open, then bound the
    time MLflow waits for it.

    * any store: :func:`check_uri`;
    * ``sqlite:///<file>``: the file (:func:`sqlite_problem`);
    * another database: its driver is installed, and the server answers a connection within
      ``timeout`` seconds;
    * ``http(s)``: MLflow's ``MLFLOW_HTTP_REQUEST_TIMEOUT`` and ``MLFLOW_HTTP_REQUEST_MAX_RETRIES``
      are set (process-wide, as MLflow's tracking URI is) to ``timeout`` and ``max_retries``, and
      the server must answer one request (for ``experiment``) within ``timeout``, without retry.

    ``None`` takes MLflow's environment variable if set, else :data:`DEFAULT_TIMEOUT` and
    :data:`DEFAULT_RETRIES`.

    Raises
    ------
    ValueError
        If ``uri`` is no tracking store, its SQLite file is unusable or its driver is missing.
    StoreUnreachable
        If its server does not answer in time.
    """
    check_uri(uri)
    timeout = env_default("MLFLOW_HTTP_REQUEST_TIMEOUT", DEFAULT_TIMEOUT) if timeout is None else timeout
    max_retries = (env_default("MLFLOW_HTTP_REQUEST_MAX_RETRIES", DEFAULT_RETRIES) if max_retries is None
                   else max_retries)
    check_timeouts(timeout, max_retries)
    scheme = urlparse(uri).scheme.split("+")[0].lower()
    if scheme == "sqlite":
        check_sqlite(uri, "tracking.uri")
    elif scheme in DB_SCHEMES:
        check_sqlalchemy_url(uri, "tracking.uri")
        probe_database(uri, "tracking.uri", timeout, "tracking.timeout")
    elif scheme in ("http", "https"):
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(timeout)
        os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(max_retries)
        probe_http(uri, timeout, experiment)


def probe_http(uri: str, timeout: int, experiment: str = "Default") -> None:
    """One request to the MLflow server at ``uri``, through MLflow's own HTTP client (its
    credentials and TLS settings), without retry; any answer, even an error status, will do.

    Raises
    ------
    StoreUnreachable
        Naming ``tracking.uri`` if the request failed: refused, no answer within ``timeout``
        seconds, or a TLS error.
    """
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    start = time.monotonic()
    try:
        http_request(get_default_host_creds(uri), "/api/2.0/mlflow/experiments/get-by-name", "GET",
                     max_retries=0, timeout=timeout, raise_on_status=False,
                     params={"experiment_name": experiment})
    except Exception as err:   # MLflow wraps every requests error in an MlflowException
        raise StoreUnreachable(
            f"tracking.uri={shown(uri)}: could not reach the MLflow tracking server (gave up after "
            f"{time.monotonic() - start:.1f} s; tracking.timeout={timeout} s): {err}. Check the URI and "
            f"that the server runs; raise tracking.timeout for a slow server") from err


# ------------------------------------------------------------------------- SQLAlchemy databases

def check_sqlalchemy_url(url: object, key: str) -> None:
    """Raise ``ValueError`` naming ``key`` unless ``url`` is an SQLAlchemy URL of a known database
    whose driver is installed (``garbage://x``: "Can't load plugin"; ``postgresql://`` means the
    ``psycopg`` driver to SQLAlchemy 2.1, which may not be the one installed)."""
    import sqlalchemy

    if not isinstance(url, str) or not url:
        raise ValueError(f"{key} must be an SQLAlchemy URL (sqlite:///optuna.db, postgresql+psycopg2://"
                         f"user@host/db, ...), got {url!r}")
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except sqlalchemy.exc.ArgumentError as err:
        raise ValueError(f"{key}={shown(url)!r} is not an SQLAlchemy URL ({err}); expected e.g. "
                         f"sqlite:///optuna.db or postgresql+psycopg2://user@host/db") from err
    try:
        dialect = parsed.get_dialect()
    except sqlalchemy.exc.NoSuchModuleError as err:
        raise ValueError(f"{key}={shown(url)!r}: unknown database {parsed.drivername!r}; expected an "
                         f"SQLAlchemy URL such as sqlite:///<file>, postgresql+psycopg2://..., "
                         f"mysql+pymysql://...") from err
    try:
        dialect.import_dbapi()
    except ImportError as err:
        backend = parsed.get_backend_name()
        other = f", e.g. {DRIVERS[backend]}" if backend in DRIVERS else ""
        raise ValueError(f"{key}={shown(url)!r}: the driver {parsed.get_driver_name()!r} of {backend} is "
                         f"not installed ({err}); install it, or name an installed one in the URL"
                         f"{other}") from err
    if parsed.get_backend_name() == "sqlite":
        check_sqlite(url, key)


def connect_args(url: str, timeout: int | None) -> dict:
    """The SQLAlchemy ``connect_args`` bounding the time ``url``'s driver waits for its server:
    ``{"connect_timeout": timeout}`` for psycopg2 (:data:`CONNECT_TIMEOUT_ARGS`); empty for SQLite,
    a driver not listed, ``timeout`` None, or a timeout the URL gives itself (``?connect_timeout=5``,
    which ``connect_args`` would override)."""
    import sqlalchemy

    parsed = sqlalchemy.engine.make_url(url)
    name = CONNECT_TIMEOUT_ARGS.get(parsed.get_driver_name())
    if name is None or timeout is None or name in parsed.query:
        return {}
    return {name: int(timeout)}


def probe_database(url: str, key: str, timeout: int | None, timeout_key: str) -> None:
    """Connect once to ``url`` with :func:`connect_args`.

    Raises
    ------
    StoreUnreachable
        Naming ``key`` and the URL, when the server refuses or stays silent beyond ``timeout``.
    """
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, connect_args=connect_args(url, timeout))
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.DBAPIError as err:
        raise unreachable(url, key, timeout, timeout_key, err) from err
    finally:
        engine.dispose()


def unreachable(url: str, key: str, timeout: int | None, timeout_key: str,
                err: Exception) -> StoreUnreachable:
    """The error of a database ``url`` (config key ``key``) that could not be connected to."""
    cause = str(getattr(err, "orig", None) or err).strip()
    bound = f"within {timeout_key}={timeout} s" if connect_args(url, timeout) else "(no connect timeout)"
    return StoreUnreachable(f"{key}={shown(url)}: could not connect to the database {bound}: {cause}")


# ------------------------------------------------------------------------------------ SQLite files

def check_sqlite(url: str, key: str) -> None:
    """Raise ``ValueError`` naming ``key`` and the file if the SQLite file of ``url`` is unusable
    (:func:`sqlite_problem`); an in-memory database passes."""
    import sqlalchemy

    database = sqlalchemy.engine.make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database).expanduser()
    problem = sqlite_problem(path)
    if problem:
        raise ValueError(f"{key}={url!r}: the SQLite file {path} {problem}")


def sqlite_problem(path: Path) -> str | None:
    """What makes ``path`` unusable as a read-write SQLite database, or None (also for a file yet to
    be created in a writable folder, or an empty file, which SQLite takes as an empty database)."""
    if path.is_dir():
        return "is a directory; name a file in it, e.g. sqlite:///<folder>/store.db"
    # the folder it is (or will be) in: the store creates missing folders in the first existing one
    folder = next(p for p in path.absolute().parents if p.exists())
    if not folder.is_dir():
        return f"cannot be created: {folder} is a file, not a folder"
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            return "is read-only (the store writes to it): make it writable (chmod u+w) or name another file"
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
        if head and head != SQLITE_HEADER:
            return (f"is not an SQLite database (it begins with {head[:8]!r}); move it away or name "
                    f"another file")
        problem = _unreadable(path) if head else None
        if problem:
            return problem
    if not os.access(folder, os.W_OK | os.X_OK):
        # SQLite writes its journal next to the database file
        return (f"cannot be written: its folder {folder} is read-only (SQLite keeps a journal next to "
                f"the file)")
    return None


def _unreadable(path: Path) -> str | None:
    """Why SQLite cannot read ``path``'s schema (a damaged file with a valid header), or None."""
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            conn.execute("PRAGMA schema_version").fetchone()
        finally:
            conn.close()
    except sqlite3.OperationalError as err:
        if "locked" in str(err):   # another process writes to it: a live store, not a damaged one
            return None
        return f"cannot be read by SQLite ({err})"
    except sqlite3.DatabaseError as err:
        return f"is damaged ({err}); restore it from a copy or name another file"
    return None


# ------------------------------------------------------------------------------- the parent run

def check_parent_run(parent: object, exp_id: str, client, uri: str) -> None:
    """Raise ``ValueError`` naming ``tracking.parent_run_id`` unless ``parent`` (null: no parent) is
    the id of a run of experiment ``exp_id`` that is not deleted: MLflow would otherwise accept a
    ``mlflow.parentRunId`` tag pointing nowhere, and the runs would show nested under nothing."""
    if parent is None:
        return
    from mlflow.exceptions import MlflowException

    run_id = str(parent).strip()
    if not run_id:
        raise ValueError("tracking.parent_run_id is empty; give a run id, or null for no parent run")
    try:
        found = client.get_run(run_id)
    except MlflowException as err:
        if err.error_code not in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            raise
        raise ValueError(f"tracking.parent_run_id={run_id!r}: no such run in tracking.uri={shown(uri)}; "
                         f"give the id of an existing run, or null for no parent run") from err
    if found.info.lifecycle_stage != "active":
        raise ValueError(f"tracking.parent_run_id={run_id!r}: that run is deleted; restore it "
                         f"(mlflow runs restore --run-id {run_id}) or give another")
    if found.info.experiment_id != exp_id:
        raise ValueError(f"tracking.parent_run_id={run_id!r}: that run is in experiment "
                         f"{found.info.experiment_id}, not in tracking.experiment's ({exp_id}); MLflow "
                         f"nests runs only within one experiment")


def check_tags(tags: object) -> dict[str, str]:
    """``tracking.tags`` as MLflow tags (strings); ``ValueError`` naming the key unless it is a
    mapping of names to single values (null: none)."""
    if tags is None:
        return {}
    if not isinstance(tags, Mapping):
        raise ValueError(f"tracking.tags must be a mapping of tag names to values, e.g. "
                         f"+tracking.tags.campaign=may or '++tracking.tags={{campaign: may}}', got {tags!r}")
    nested = sorted(str(k) for k, v in tags.items() if not isinstance(v, (str, int, float, bool, type(None))))
    if nested:
        raise ValueError(f"tracking.tags: the values of {nested} must be single values (a string or a "
                         f"number), not mappings or lists")
    return {str(k): str(v) for k, v in tags.items()}
