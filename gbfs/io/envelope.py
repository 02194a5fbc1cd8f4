"""The one model-file envelope of every gbfs estimator: JSON, a format name, a version, a checksum.

A model file is one JSON object::

    {"format": "gbfs-model", "format_version": 1, "estimator": "<class name>",
     ...the estimator's own keys...,
     "checksum": "sha256:<hex of the canonical JSON of every other key>"}

(canonical JSON: ``json.dumps(body, sort_keys=True, separators=(",", ":"))``, strict: no NaN).
It is written atomically -- to a fresh temporary name in the target's folder, fsynced, renamed over
the target -- so readers and concurrent writers never see a partial file and a failed save leaves
nothing behind; a new file's mode follows the umask, a replaced file keeps its mode, a read-only
file is refused and a symbolic link is written through (:func:`write_atomic`).

An estimator joins with one decorator and two methods::

    @register_model
    class MyEstimator(...):
        def _model_body(self) -> dict: ...                 # its own keys, JSON-ready
        @classmethod
        def _from_model_body(cls, body: dict) -> "MyEstimator": ...   # validate and restore

:func:`load_model` then reads any registered estimator's file.  Files of the LightGBM baselines
written before the envelope was shared (``"format": "gbfs-lightgbm-baseline", "version": 1``)
are still read.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import json
import os
import secrets
import stat
from pathlib import Path

FORMAT = "gbfs-model"
FORMAT_VERSION = 1
#: the baselines' own envelope before it was shared: still read, never written
LEGACY_FORMATS = {"gbfs-lightgbm-baseline": "LightGBMBaseline"}

MODELS: dict[str, type] = {}
#: registered estimators whose module ``import gbfs`` does not load (it would import LightGBM)
LAZY_MODULES = {"LightGBMBaseline": "gbfs.baselines.lightgbm_baseline"}


def register_model(cls: type) -> type:
    """Class decorator: files whose ``estimator`` is ``cls.__name__`` load as ``cls``."""
    MODELS[cls.__name__] = cls
    return cls


def canonical(body: dict) -> bytes:
    """The bytes the checksum covers (raises ValueError on NaN or infinite floats)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def checksum(body: dict) -> str:
    return "sha256:" + hashlib.sha256(canonical(body)).hexdigest()


def seal(estimator: str, body: dict) -> dict:
    """The whole file content of ``body``: envelope keys first, then the body, then its checksum."""
    out = {"format": FORMAT, "format_version": FORMAT_VERSION, "estimator": estimator, **body}
    out["checksum"] = checksum(out)
    return out


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a unique temporary file renamed over it.

    As ``open(path, "w")`` would: a symbolic link is written through (the link stays, its target
    gets the content), a file that exists keeps its permission bits, and a read-only file is not
    replaced.

    Raises
    ------
    IsADirectoryError
        If ``path`` is a directory.
    PermissionError
        If ``path`` is an existing file that is read-only (no write permission bit) or that this
        process may not write.
    """
    # the rename would replace the link itself by a regular file: rename over its target instead
    path = Path(os.path.realpath(path))
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "save_model needs a file path, not a directory", str(path))
    mode = _replaced_mode(path)
    # os.open with O_EXCL, not mkstemp: mkstemp's files are 0600, this one gets 0666 minus the umask
    # like any file the user creates; 64 random bits make a name clash as unlikely as a hash collision
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the rename must not reach the disk before the content
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _replaced_mode(path: Path) -> int | None:
    """The permission bits of the file ``path`` replaces (None: there is none), refusing a file
    the user could not open for writing -- or, as root, one marked read-only for everyone: a
    rename over it would succeed where writing to it should not."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o222 or not os.access(path, os.W_OK):
        raise PermissionError(errno.EACCES, "Permission denied: save_model does not replace a read-only "
                              "file", str(path))
    return mode


def save(est, path: str | os.PathLike) -> None:
    """Seal ``est._model_body()`` and write it to ``path`` atomically."""
    body = est._model_body()
    try:
        data = json.dumps(seal(type(est).__name__, body), allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise ValueError(f"cannot save: a value of the model or its parameters has no JSON form: {e}") from e
    write_atomic(path, data)


def read(path: str | os.PathLike) -> dict:
    """The verified body of the model file ``path`` (format, version and checksum checked)."""
    data = Path(path).read_bytes()
    try:
        body = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a gbfs model file (not UTF-8 text: {e})") from e
    except RecursionError as e:
        raise ValueError(f"{path}: not a gbfs model file (invalid JSON: nested too deeply)") from e
    except ValueError as e:  # JSONDecodeError, and int() beyond Python's digit limit
        raise ValueError(f"{path}: not a gbfs model file (invalid JSON: {e})") from e
    return verify(body, str(path))


def verify(body, source: str = "model") -> dict:
    """Check the envelope of a parsed file; returns the body (legacy files with ``estimator`` set)."""
    if not isinstance(body, dict):
        raise ValueError(f"{source}: not a gbfs model file (missing 'format': '{FORMAT}')")
    fmt = body.get("format")
    # a list or object as format is unhashable: compare strings only, so it is refused like any other
    legacy = isinstance(fmt, str) and fmt in LEGACY_FORMATS and "format_version" not in body
    version = body.get("version") if legacy else body.get("format_version")
    if fmt != FORMAT and not legacy:
        raise ValueError(f"{source}: not a gbfs model file (missing 'format': '{FORMAT}')")
    if isinstance(version, bool) or version != FORMAT_VERSION:  # true == 1 in Python, not in the format
        raise ValueError(f"{source}: unsupported format_version {version!r} "
                         f"(this gbfs reads version {FORMAT_VERSION})")
    rest = {k: v for k, v in body.items() if k != "checksum"}
    try:
        expected = checksum(rest)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{source}: model file holds non-JSON values: {e}") from e
    if body.get("checksum") != expected:
        raise ValueError(f"{source}: checksum mismatch: the model file was modified or corrupted")
    if legacy:
        rest["estimator"] = LEGACY_FORMATS[fmt]
    return rest


def estimator_class(body: dict, source: str = "model") -> type:
    """The registered class named by a verified body's ``estimator``; imports its module if needed."""
    name = body.get("estimator")
    if not isinstance(name, str):  # a list or object would not even be a valid dict key
        raise ValueError(f"{source}: unknown estimator {name!r} (known: {sorted(MODELS)})")
    if name not in MODELS and name in LAZY_MODULES:
        importlib.import_module(LAZY_MODULES[name])
    if name not in MODELS:
        raise ValueError(f"{source}: unknown estimator {name!r} (known: {sorted(MODELS)})")
    return MODELS[name]


def load_model(path: str | os.PathLike, expected: type | None = None):
    """Read a model file written by any gbfs estimator's ``save_model``; returns it fitted.

    ``expected``: refuse a file of another estimator class (``SomeEstimator.load_model``).

    Raises
    ------
    ValueError
        If the file is not a valid, untampered gbfs model file of a known version and estimator;
        the message names the file (and the offending field).
    OSError
        If the file cannot be read.
    """
    return from_dict(read(path), str(path), expected, verified=True)


def from_dict(body, source: str = "model", expected: type | None = None, *, verified: bool = False):
    """The fitted estimator of a parsed model file; see :func:`load_model` (``source`` names the file
    in messages, ``verified``: :func:`verify` has already checked ``body``)."""
    if not verified:
        body = verify(body, source)
    cls = estimator_class(body, source)
    if expected is not None and cls is not expected:
        raise ValueError(f"{source}: holds a {cls.__name__} model, not a {expected.__name__}; "
                         "use gbfs.load_model")
    try:
        return cls._from_model_body(body)
    except ValueError as e:  # the class's message names the field
        raise ValueError(f"{source}: {e}") from e
    except (KeyError, TypeError, IndexError, AttributeError, OverflowError, RecursionError) as e:
        raise ValueError(f"{source}: malformed model file ({type(e).__name__}: {e})") from e
