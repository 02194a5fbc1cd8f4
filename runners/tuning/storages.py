"""The Optuna storages ``tune.storage`` may name, one class per kind, found by the URL's scheme
(:data:`KINDS`; any other scheme is an SQLAlchemy URL).

Each kind is an Optuna storage that can also *claim* a study attribute (:meth:`SharedStorage.claim`):
insert it only if it is absent, atomically for every process sharing the storage.  Optuna's own
``set_user_attr`` overwrites; the workers of one study rely on claims to agree on its MLflow parent
run, their invocation numbers and who refits (:func:`runners.tuning.study.claim_attr`).

* **SQLAlchemy URLs** (``sqlite:///<file>``, ``postgresql+psycopg2://...``, ``mysql+pymysql://...``):
  :class:`SqlStorage`, Optuna's ``RDBStorage``.  A claim is one INSERT, which the table's unique
  (study, key) constraint refuses to all but the first process.
* **journal files** (``journal:///<absolute path>``, like ``file:///``; ``?lock=open`` picks Optuna's
  ``JournalFileOpenLock`` instead of its default ``JournalFileSymlinkLock``): :class:`FileJournalStorage`,
  Optuna's ``JournalStorage`` over a ``JournalFileBackend``, an append-only log of operations on a
  file system the machines share (NFS), with no database server.  A claim replays the log and appends
  the attribute only if it is absent, holding a second lock file (``<file>.claim.lock``, of the same
  Optuna lock class) that every claim takes: no other claim can append between the read and the
  write.  Optuna's lock files work on NFS (``symlink``/``O_EXCL``, not ``fcntl``) and are broken after 30 s
  without change, so a process killed while holding one delays the others, never blocks them.
"""

from __future__ import annotations

import abc
import json
import os
from pathlib import Path
from urllib.parse import parse_qs, unquote

import optuna
import sqlalchemy
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock, JournalFileSymlinkLock

from runners.tracking import stores

#: the forms of ``tune.storage``, for error messages
ACCEPTED = ("an SQLAlchemy URL (sqlite:///<file>, postgresql+psycopg2://user@host/db, mysql+pymysql://...) "
            "or an Optuna journal file on a shared file system (journal:///<absolute path>)")
#: Optuna's journal lock classes by the ``lock`` of a ``journal:`` URL; symlink is Optuna's default
JOURNAL_LOCKS = {"symlink": JournalFileSymlinkLock, "open": JournalFileOpenLock}
#: the empty file whose lock (``<journal>.claim.lock``) every claim holds
CLAIM_SUFFIX = ".claim"


class SharedStorage(abc.ABC):
    """What ``runners.tune`` needs of an Optuna storage beyond Optuna's ``BaseStorage``: a check of
    its URL before any study or run exists, opening it, and atomic claims."""

    @classmethod
    @abc.abstractmethod
    def check(cls, url: str, key: str) -> None:
        """Raise ``ValueError`` naming the config ``key`` if ``url`` cannot be opened."""

    @classmethod
    @abc.abstractmethod
    def open(cls, url: str, timeout: int | None) -> SharedStorage:
        """The storage at ``url``, created if need be; ``timeout``: seconds a server may take to
        accept a connection."""

    @abc.abstractmethod
    def claim(self, study_id: int, key: str, value: object, system: bool) -> None:
        """Set the study's user (or ``system``) attribute ``key`` to ``value`` only if it is absent,
        atomically for every process sharing the storage."""


class SqlStorage(SharedStorage, optuna.storages.RDBStorage):
    """Optuna's RDB storage at an SQLAlchemy URL; a claim is one INSERT that the attribute table's
    unique (study, key) constraint refuses to all but the first worker, whatever their timing."""

    @classmethod
    def check(cls, url: str, key: str) -> None:
        try:
            stores.check_sqlalchemy_url(url, key)
        except ValueError as err:
            if isinstance(err.__cause__, (sqlalchemy.exc.ArgumentError, sqlalchemy.exc.NoSuchModuleError)):
                # a form no kind knows: say every form, the journal file's included
                raise ValueError(f"{err}; {key} takes {ACCEPTED}") from err
            raise

    @classmethod
    def open(cls, url: str, timeout: int | None) -> SqlStorage:
        """SQLite waits up to 60 s for the file's lock; a database server must accept the connection
        within ``timeout`` seconds (:func:`runners.tracking.stores.connect_args`): without it psycopg2
        waits for ever on a server that accepts and never answers.

        Raises
        ------
        runners.tracking.stores.StoreUnreachable
            Naming ``tune.storage`` when its server refuses or does not answer in time.
        """
        engine_kwargs = {}
        if url.startswith("sqlite:///"):
            Path(url[len("sqlite:///"):]).expanduser().parent.mkdir(parents=True, exist_ok=True)
            # parallel studies of a multirun share the file: wait for its lock instead of failing
            engine_kwargs = {"connect_args": {"timeout": 60}}
        elif args := stores.connect_args(url, timeout):
            engine_kwargs = {"connect_args": args}
        try:
            return cls(url, engine_kwargs=engine_kwargs)
        except sqlalchemy.exc.OperationalError as err:
            if url.startswith("sqlite"):   # a lock held beyond 60 s: SQLite's own message says so
                raise
            raise stores.unreachable(url, "tune.storage", timeout, "tune.storage_timeout", err) from err

    def claim(self, study_id: int, key: str, value: object, system: bool) -> None:
        name = "study_system_attributes" if system else "study_user_attributes"
        table = sqlalchemy.table(name, sqlalchemy.column("study_id"), sqlalchemy.column("key"),
                                 sqlalchemy.column("value_json"))
        try:
            with self.engine.begin() as conn:
                conn.execute(table.insert().values(study_id=study_id, key=key, value_json=json.dumps(value)))
        except sqlalchemy.exc.IntegrityError:
            pass   # another worker set it first


class FileJournalStorage(SharedStorage, optuna.storages.JournalStorage):
    """Optuna's journal storage in one file (``journal:///<absolute path>[?lock=symlink|open]``), for
    machines that share a file system but no database server.

    The folder must exist (a missing one is more likely an unmounted share than a folder to create:
    each machine would then tune a study of its own); the file is created if need be.
    """

    def __init__(self, path: str, lock: str = "symlink") -> None:
        lock_class = JOURNAL_LOCKS[lock]
        super().__init__(JournalFileBackend(path, lock_obj=lock_class(path)))
        # the symlink lock links <file>.claim.lock to <file>.claim and reads the target's time to
        # break a stale lock: the target must exist
        Path(path + CLAIM_SUFFIX).touch(exist_ok=True)
        self._claim_lock = lock_class(path + CLAIM_SUFFIX)

    @staticmethod
    def parse(url: str, key: str = "tune.storage") -> tuple[Path, str]:
        """The file and the lock kind of a ``journal:`` URL; ``ValueError`` naming ``key`` if it has
        neither a file nor a known lock (:data:`JOURNAL_LOCKS`)."""
        rest, _, query = url[len("journal://"):].partition("?")
        path = unquote(rest)
        if path.startswith("/"):   # journal:////abs (as ${paths.root_dir} gives) is /abs too
            path = "/" + path.lstrip("/")
        if not path.strip("/"):
            raise ValueError(f"{key}={url!r} names no file; expected journal:///<absolute path>, e.g. "
                             f"journal:///shared/optuna.log")
        options = parse_qs(query, keep_blank_values=True)
        unknown = sorted(set(options) - {"lock"})
        lock = options.get("lock", ["symlink"])[-1]
        if unknown or lock not in JOURNAL_LOCKS:
            raise ValueError(f"{key}={url!r}: a journal URL takes one option, lock="
                             f"{'|'.join(JOURNAL_LOCKS)} (Optuna's lock classes), got {query!r}")
        return Path(path).expanduser(), lock

    @classmethod
    def check(cls, url: str, key: str) -> None:
        path, _ = cls.parse(url, key)
        problem = journal_problem(path)
        if problem:
            raise ValueError(f"{key}={url!r}: the journal file {path} {problem}")

    @classmethod
    def open(cls, url: str, timeout: int | None) -> FileJournalStorage:
        cls.check(url, "tune.storage")
        path, lock = cls.parse(url)
        return cls(str(path), lock)

    def claim(self, study_id: int, key: str, value: object, system: bool) -> None:
        # every claim holds the claim lock from its read to its write: none can append in between
        # (Optuna's own writes take the journal's lock, a different file, inside set_study_*_attr)
        self._claim_lock.acquire()
        try:
            attrs = self.get_study_system_attrs(study_id) if system else self.get_study_user_attrs(study_id)
            if key in attrs:
                return   # another worker set it first
            if system:
                self.set_study_system_attr(study_id, key, value)
            else:
                self.set_study_user_attr(study_id, key, value)
        finally:
            self._claim_lock.release()


def journal_problem(path: Path) -> str | None:
    """What makes ``path`` unusable as a read-write Optuna journal file, or None (also for a file
    yet to be created in an existing, writable folder)."""
    if path.is_dir():
        return "is a directory; name a file in it, e.g. journal:///<folder>/optuna.log"
    folder = path.absolute().parent
    if not folder.is_dir():
        return (f"cannot be created: its folder {folder} does not exist (on a shared file system: is it "
                f"mounted?); create the folder first")
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"cannot be written: its folder {folder} is read-only (the lock files are made there)"
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            return "is read-only (the journal is appended to): make it writable or name another file"
        with path.open("rb") as f:
            head = f.read(16)
        if head and not head.startswith(b"{"):
            return (f"is not an Optuna journal (it begins with {head[:8]!r}, not a JSON line); move it "
                    f"away or name another file")
    return None


#: the storage kinds by URL scheme; any other scheme is an SQLAlchemy URL (:class:`SqlStorage`), whose
#: databases SQLAlchemy's own dialect registry knows
KINDS: dict[str, type[SharedStorage]] = {"journal": FileJournalStorage}


def kind_of(url: str) -> type[SharedStorage]:
    """The storage class of ``url``, by its scheme (:data:`KINDS`)."""
    scheme, sep, _ = url.partition("://")
    return KINDS.get(scheme.lower(), SqlStorage) if sep else SqlStorage


def check_storage(url: object, key: str = "tune.storage") -> None:
    """Raise ``ValueError`` naming ``key`` unless ``url`` is a storage :func:`open_storage` opens: an
    SQLAlchemy URL whose driver is installed (and an SQLite file that is usable), or a journal
    file in an existing folder."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"{key} must be {ACCEPTED}, got {url!r}")
    kind_of(url).check(url, key)


def open_storage(url: str, timeout: int | None = stores.DEFAULT_TIMEOUT) -> SharedStorage:
    """The storage of ``tune.storage`` (its schema or file created if need be).

    Raises
    ------
    ValueError
        Naming ``tune.storage`` if a journal file cannot be used.
    runners.tracking.stores.StoreUnreachable
        Naming ``tune.storage`` when its database server refuses or does not answer in time.
    """
    return kind_of(url).open(url, timeout)
