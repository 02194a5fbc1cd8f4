"""Prepare: parse verified raw files once into float32 arrays and cache them as compressed .npz.

The cache file is ``prepared/<name>-v<version>-<key>.npz`` where ``key`` hashes the
manifest version, its preparation options (e.g. Epsilon's subsample seed), this
module's :data:`CACHE_FORMAT` and the sha256 of every raw file.  A changed raw file
therefore gets a new key and the cache is rebuilt; stale cache files of the dataset
are removed after the new one is in place.  The file is written to a temporary name
and renamed, so a crash mid-write leaves no prepared file.

The cache is verified on every load: ``<file>.npz.sha256`` (``sha256sum -c`` format) holds
its sha256, written before the npz is renamed into place.  A cache that is truncated,
bit-flipped or rewritten with other values, or that does not parse, is rebuilt once from
the raw files (with a warning saying why); a rebuild that still does not read back is a
:class:`CacheError` naming the file.  A cache written before these records existed is
parsed, checked against the manifest's shapes, and its sha256 recorded.

Reading needs no write access: a dataset whose raw files match their checksums and whose
cache matches its record is loaded without the dataset lock, so a read-only shared root
works.  The lock is taken only when something must be written, and a root that is not
writable is then an error saying what needed writing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from .fetching.download import (
    DEFAULT_POLICY,
    DownloadError,
    RetryPolicy,
    fetch_dataset,
    file_status,
    lock_unlocked,
    mismatch_error,
    sha256_file,
)
from .fetching.fsutil import TMP_PREFIX, atomic_write, file_mode
from .fetching.manifest import Manifest, ManifestError, dataset_lock, prepared_dir, raw_dir
from .formats import FormatError, encode_flight, read_flight_csv, read_gisette, read_libsvm_bz2

#: bump when the arrays written for the same raw files change
CACHE_FORMAT = 1
ARRAYS = ("X_train", "y_train", "X_test", "y_test", "feature_names")
#: suffix of the file holding a cache's own sha256
SIDECAR = ".sha256"
_SIDECAR_LINE = re.compile(r"^([0-9a-f]{64})  (\S.*)\n?$")


class CacheError(FormatError):
    """A prepared cache cannot be read, or does not match its recorded sha256."""


def _prepare_gisette(m: Manifest, raw: Path, progress: bool) -> dict:
    return read_gisette(raw, n_features=m.n_features or 5000)


def _prepare_libsvm(m: Manifest, raw: Path, progress: bool) -> dict:
    """LIBSVM train/test files, each optionally subsampled (Epsilon: 80 000 / 20 000)."""
    out = {}
    for split in ("train", "test"):
        spec = m.splits[split]
        X, y = read_libsvm_bz2(raw / spec["file"], n_rows=spec["n_rows_raw"], n_features=m.n_features,
                               n_keep=spec.get("n_rows"), seed=m.prepare["subsample_seed"],
                               progress=progress)
        out[f"X_{split}"], out[f"y_{split}"] = X, y
    out["feature_names"] = np.array([f"f{j}" for j in range(m.n_features)])
    return out


def _prepare_flight(m: Manifest, raw: Path, progress: bool) -> dict:
    train = read_flight_csv(raw / m.splits["train"]["file"])
    test = read_flight_csv(raw / m.splits["test"]["file"])
    X_tr, y_tr, X_te, y_te, names = encode_flight(train, test)
    return {"X_train": X_tr, "y_train": y_tr, "X_test": X_te, "y_test": y_te,
            "feature_names": np.array(names)}


PREPARERS: dict[str, Callable[[Manifest, Path, bool], dict]] = {
    "gisette": _prepare_gisette, "libsvm_bz2": _prepare_libsvm, "benchm_ml_csv": _prepare_flight}


def cache_key(manifest: Manifest, raw_hashes: dict[str, str]) -> str:
    blob = json.dumps({"version": manifest.version, "format": manifest.format, "prepare": manifest.prepare,
                       "splits": manifest.splits, "n_features": manifest.n_features,
                       "cache_format": CACHE_FORMAT, "raw": raw_hashes}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def verify_raw(manifest: Manifest, root=None) -> dict[str, str]:
    """sha256 of every raw file after checking it (published checksum or local lock; a file
    without either is checked for plausibility and locked now, at its first use)."""
    lock_unlocked(manifest, root)
    hashes, bad = {}, {}
    for fname in manifest.files:
        status, digest = file_status(manifest, fname, root)
        if status == "missing":
            raise DownloadError(f"{manifest.name}: raw file {raw_dir(manifest, root) / fname} is missing; "
                                f"run `python -m gbfs.data download {manifest.name}`")
        if status == "mismatch":
            bad[fname] = digest
        hashes[fname] = digest
    if bad:
        raise mismatch_error(manifest, root, bad)
    return hashes


def load_prepared(manifest: Manifest, root=None, *, download: bool = True, mirror: str | None = None,
                  progress: bool = True, policy: RetryPolicy = DEFAULT_POLICY) -> tuple[Path, dict]:
    """``(path, arrays)`` of the verified prepared cache of ``manifest``, downloading, parsing and
    rebuilding as needed (see the module docstring).

    Raises
    ------
    DataRootError
        Something must be written (a download, a lock entry, the cache) and the root is read-only.
    CacheError
        The cache was rebuilt and still does not read back.
    """
    if manifest.format not in PREPARERS:
        raise ManifestError(f"{manifest.path}: unknown format {manifest.format!r}; "
                            f"known: {sorted(PREPARERS)}")
    ready, needs = _ready(manifest, root)
    if ready is not None:
        return ready
    with dataset_lock(manifest, root, purpose=needs):
        return _prepare_locked(manifest, root, download, mirror, progress, policy)


def prepare(manifest: Manifest, root=None, *, download: bool = True, mirror: str | None = None,
            progress: bool = True, policy: RetryPolicy = DEFAULT_POLICY) -> Path:
    """Return the path of the verified prepared cache of ``manifest`` (see :func:`load_prepared`)."""
    return load_prepared(manifest, root, download=download, mirror=mirror, progress=progress,
                         policy=policy)[0]


def _target(manifest: Manifest, root, hashes: dict[str, str]) -> Path:
    key = cache_key(manifest, hashes)
    return prepared_dir(manifest, root) / f"{manifest.name}-v{manifest.version}-{key}.npz"


def _ready(manifest: Manifest, root) -> tuple[tuple[Path, dict] | None, str]:
    """The cache and its arrays when nothing needs writing, else ``(None, what needs doing)``.

    Takes no lock and writes nothing but the (best-effort) hash cache: the read-only path."""
    hashes, missing, unlocked, bad = {}, [], [], {}
    for fname in manifest.files:
        status, digest = file_status(manifest, fname, root)
        if status == "missing":
            missing.append(fname)
        elif status == "unlocked":
            unlocked.append(fname)
        elif status == "mismatch":
            bad[fname] = digest
        hashes[fname] = digest
    if bad:
        raise mismatch_error(manifest, root, bad)
    if missing:
        return None, f"download {', '.join(missing)}"
    if unlocked:
        return None, f"record the sha256 of {', '.join(unlocked)} (no published checksum) in its lock file"
    target = _target(manifest, root, hashes)
    if not target.is_file():
        return None, f"parse its raw files into {target}"
    arrays, reason = _read_verified(manifest, target)
    if arrays is None:
        return None, f"rebuild its prepared cache, which is unusable: {reason}"
    return (target, arrays), ""


def _prepare_locked(manifest, root, download, mirror, progress, policy) -> tuple[Path, dict]:
    if download:
        fetch_dataset(manifest, root, mirror=mirror, policy=policy, progress=progress)
    hashes = verify_raw(manifest, root)
    folder = prepared_dir(manifest, root)
    target = _target(manifest, root, hashes)
    if target.is_file():
        arrays, reason = _read_verified(manifest, target)
        if arrays is not None:
            return target, arrays              # another job prepared it while we waited for the lock
        warnings.warn(f"{reason}; rebuilding it from the raw files", RuntimeWarning, stacklevel=4)
        _remove_cache(target)
    arrays = PREPARERS[manifest.format](manifest, raw_dir(manifest, root), progress)
    _check_shapes(manifest, arrays)
    for orphan in folder.glob(f"{TMP_PREFIX}*"):   # left by a killed writer (we hold the dataset lock)
        orphan.unlink(missing_ok=True)
    write_npz_atomic(target, arrays)
    for stale in folder.glob(f"{manifest.name}-v*.npz"):
        if stale != target:
            _remove_cache(stale)
    loaded, reason = _read_verified(manifest, target)
    if loaded is None:
        raise CacheError(f"{target}: the prepared cache was rebuilt from the raw files and still does not "
                         f"read back ({reason}); is the disk full or failing? Delete it to try again")
    return target, loaded


def _remove_cache(path: Path) -> None:
    path.unlink(missing_ok=True)
    sidecar_path(path).unlink(missing_ok=True)


def _check_shapes(manifest: Manifest, arrays: dict) -> None:
    for split in ("train", "test"):
        want = manifest.splits[split].get("n_rows")
        X, y = arrays[f"X_{split}"], arrays[f"y_{split}"]
        if X.ndim != 2 or y.shape != (X.shape[0],):
            raise FormatError(f"{manifest.name}: the {split} split has X of shape {X.shape} and y of shape "
                              f"{y.shape}")
        if want is not None and X.shape[0] != want:
            raise FormatError(f"{manifest.name}: the {split} split has {X.shape[0]} rows, "
                              f"the manifest says {want}")
    width = arrays["X_train"].shape[1]
    if arrays["X_test"].shape[1] != width or arrays["feature_names"].shape != (width,):
        raise FormatError(f"{manifest.name}: {width} train columns, {arrays['X_test'].shape[1]} test "
                          f"columns, {arrays['feature_names'].shape} feature names")
    if manifest.n_features and width != manifest.n_features:
        raise FormatError(f"{manifest.name}: {width} features, the manifest says {manifest.n_features}")


def sidecar_path(path: Path) -> Path:
    """The file holding the sha256 of the prepared cache ``path``."""
    return path.with_name(path.name + SIDECAR)


def write_npz_atomic(target: Path, arrays: dict) -> str:
    """``np.savez_compressed`` to a temporary file in the same folder, its sha256 recorded next to
    the target, then an atomic rename; returns the sha256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=TMP_PREFIX, suffix=".npz")
    recorded = False
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, file_mode())           # mkstemp's 0600 would lock out the other users of a root
        digest = sha256_file(tmp)
        # the record first: an npz under the final name always has the record of its own bytes
        line = f"{digest}  {target.name}\n".encode()
        atomic_write(sidecar_path(target), lambda out: out.write(line))
        recorded = True
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        if recorded:
            sidecar_path(target).unlink(missing_ok=True)
        raise
    return digest


def read_sidecar(target: Path) -> tuple[str | None, str | None]:
    """(recorded sha256 or None when there is no record, problem with the record or None)."""
    path = sidecar_path(target)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"its checksum record {path} cannot be read ({exc})"
    match = _SIDECAR_LINE.match(text)
    if not match or match.group(2) != target.name:
        return None, f"its checksum record {path} is malformed"
    return match.group(1), None


def _read_verified(manifest: Manifest, target: Path) -> tuple[dict | None, str | None]:
    """(arrays, None) when ``target`` matches its recorded sha256 and parses, else (None, why not)."""
    recorded, problem = read_sidecar(target)
    if problem:
        return None, f"{target}: {problem}"
    try:
        digest = sha256_file(target)
    except OSError as exc:
        return None, f"{target} cannot be read ({exc})"
    if recorded is not None and digest != recorded:
        return None, (f"{target} has sha256 {digest}, not the {recorded} recorded when it was written "
                      f"({sidecar_path(target).name}): it was truncated, corrupted or rewritten")
    try:
        arrays = read_prepared(target)
        _check_shapes(manifest, arrays)
    except FormatError as exc:
        return None, str(exc) if isinstance(exc, CacheError) else f"{target}: {exc}"
    if recorded is None:
        # written before caches had a record: it parsed and has the manifest's shapes, so record it
        line = f"{digest}  {target.name}\n".encode()
        try:
            atomic_write(sidecar_path(target), lambda out: out.write(line))
        except OSError:                      # a read-only root: checked again by parsing next time
            pass
    return arrays, None


def read_prepared(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a prepared cache; :class:`CacheError` naming ``path`` when it cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            absent = [k for k in ARRAYS if k not in npz.files]
            if absent:
                raise CacheError(f"{path}: not a prepared cache (no {', '.join(absent)})")
            return {k: npz[k] for k in ARRAYS}
    except CacheError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        raise CacheError(f"{path}: cannot read the prepared cache ({type(exc).__name__}: {exc})") from exc


def prepared_shapes(path: Path) -> dict[str, tuple]:
    """Shapes of the arrays in a prepared file, read from the .npy headers without loading them."""
    shapes = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                with zf.open(name) as f:
                    version = npy_format.read_magic(f)
                    read_header = (npy_format.read_array_header_1_0 if version == (1, 0)
                                   else npy_format.read_array_header_2_0)
                    shape, _, _ = read_header(f)
                shapes[name.removesuffix(".npy")] = shape
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise CacheError(f"{path}: cannot read the prepared cache ({type(exc).__name__}: {exc})") from exc
    return shapes


def cache_status(path: Path) -> str:
    """How the prepared file ``path`` compares with its recorded sha256 (hashes the file)."""
    recorded, problem = read_sidecar(path)
    if problem:
        return problem
    if recorded is None:
        return "no sha256 recorded yet (written by an earlier version; checked by parsing at the next load)"
    try:
        digest = sha256_file(path)
    except OSError as exc:
        return f"cannot be read ({exc})"
    if digest != recorded:
        return "SHA256 MISMATCH with its record: rebuilt at the next load"
    return "ok, matches the sha256 recorded when it was written"


def find_prepared(manifest: Manifest, root=None) -> Path | None:
    """The current prepared file, if any (without hashing the raw files)."""
    hits = sorted(prepared_dir(manifest, root).glob(f"{manifest.name}-v{manifest.version}-*.npz"))
    return hits[-1] if hits else None
