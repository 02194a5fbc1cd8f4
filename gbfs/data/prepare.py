"""Prepare: parse verified raw files once into float32 arrays and cache them as compressed .npz.

The cache file is ``prepared/<name>-v<version>-<key>.npz`` where ``key`` hashes the
manifest version, its preparation options (e.g. Epsilon's subsample seed), this
module's :data:`CACHE_FORMAT` and the sha256 of every raw file.  A changed raw file
therefore gets a new key and the cache is rebuilt; stale cache files of the dataset
are removed after the new one is in place.  The file is written to a temporary name
and renamed, so a crash mid-write leaves no prepared file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from .download import (
    DEFAULT_POLICY,
    ChecksumError,
    DownloadError,
    RetryPolicy,
    fetch_dataset,
    file_status,
    lock_unlocked,
)
from .formats import FormatError, encode_flight, read_flight_csv, read_gisette, read_libsvm_bz2
from .manifest import Manifest, ManifestError, dataset_lock, prepared_dir, raw_dir

#: bump when the arrays written for the same raw files change
CACHE_FORMAT = 1
ARRAYS = ("X_train", "y_train", "X_test", "y_test", "feature_names")


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
    without either is locked now, at its first use)."""
    lock_unlocked(manifest, root)
    hashes = {}
    for fname in manifest.files:
        status, digest = file_status(manifest, fname, root)
        path = raw_dir(manifest, root) / fname
        if status == "missing":
            raise DownloadError(f"{manifest.name}: raw file {path} is missing; run "
                                f"`python -m gbfs.data download {manifest.name}`")
        if status == "mismatch":
            raise ChecksumError(f"{manifest.name}: {path} has sha256 {digest}, which does not match "
                                f"{'the published checksum' if manifest.sha256(fname) else 'the local lock'}")
        hashes[fname] = digest
    return hashes


def prepare(manifest: Manifest, root=None, *, download: bool = True, mirror: str | None = None,
            progress: bool = True, policy: RetryPolicy = DEFAULT_POLICY) -> Path:
    """Return the path of the prepared cache of ``manifest``, downloading and parsing as needed."""
    if manifest.format not in PREPARERS:
        raise ManifestError(f"{manifest.path}: unknown format {manifest.format!r}; "
                            f"known: {sorted(PREPARERS)}")
    with dataset_lock(manifest, root):
        return _prepare_locked(manifest, root, download, mirror, progress, policy)


def _prepare_locked(manifest, root, download, mirror, progress, policy) -> Path:
    if download:
        fetch_dataset(manifest, root, mirror=mirror, policy=policy, progress=progress)
    hashes = verify_raw(manifest, root)
    folder = prepared_dir(manifest, root)
    target = folder / f"{manifest.name}-v{manifest.version}-{cache_key(manifest, hashes)}.npz"
    if target.is_file():
        return target
    arrays = PREPARERS[manifest.format](manifest, raw_dir(manifest, root), progress)
    _check_shapes(manifest, arrays)
    for orphan in folder.glob(".tmp-*.npz"):      # left by a killed writer (we hold the dataset lock)
        orphan.unlink(missing_ok=True)
    write_npz_atomic(target, arrays)
    for stale in folder.glob(f"{manifest.name}-v*.npz"):
        if stale != target:
            stale.unlink(missing_ok=True)
    return target


def _check_shapes(manifest: Manifest, arrays: dict) -> None:
    for split in ("train", "test"):
        want = manifest.splits[split].get("n_rows")
        got = arrays[f"X_{split}"].shape[0]
        if want is not None and got != want:
            raise FormatError(f"{manifest.name}: the {split} split has {got} rows, the manifest says {want}")
    if manifest.n_features and arrays["X_train"].shape[1] != manifest.n_features:
        raise FormatError(f"{manifest.name}: {arrays['X_train'].shape[1]} features, the manifest says "
                          f"{manifest.n_features}")


def write_npz_atomic(target: Path, arrays: dict) -> None:
    """``np.savez_compressed`` to a temporary file in the same folder, then an atomic rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_prepared(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in ARRAYS}


def prepared_shapes(path: Path) -> dict[str, tuple]:
    """Shapes of the arrays in a prepared file, read from the .npy headers without loading them."""
    shapes = {}
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            with zf.open(name) as f:
                version = npy_format.read_magic(f)
                read_header = (npy_format.read_array_header_1_0 if version == (1, 0)
                               else npy_format.read_array_header_2_0)
                shape, _, _ = read_header(f)
            shapes[name.removesuffix(".npy")] = shape
    return shapes


def find_prepared(manifest: Manifest, root=None) -> Path | None:
    """The current prepared file, if any (without hashing the raw files)."""
    hits = sorted(prepared_dir(manifest, root).glob(f"{manifest.name}-v{manifest.version}-*.npz"))
    return hits[-1] if hits else None
