"""Ranking data files: LIBSVM with query ids, or LightGBM's ``.query`` files of group sizes.

Two conventions are read (as LightGBM and the LETOR / MSLR / Yahoo data sets write them):

* LIBSVM lines ``relevance qid:<id> idx:val ...`` (read with scikit-learn's
  ``load_svmlight_file(query_id=True)``): the rows of a query are consecutive; a query id that
  comes back after another query's rows is an error (the group sizes would be ambiguous);
* a LIBSVM file without ``qid`` and, next to it, ``<file>.query`` (or ``query_path``): one group
  size per line, summing to the rows (LightGBM's convention).

:func:`load` splits a file (or a ``test_path`` file) into train / validation / test by whole queries,
seeded, and returns a :class:`gbfs.data.Dataset` with ``task == "ranking"`` and ``group_*``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from ..formats import FormatError


def read(path: str | os.PathLike, query_path: str | os.PathLike | None = None, n_features: int | None = None):
    """``(X, y, sizes)`` of a ranking file: a dense float32 matrix, integer relevances, query sizes.

    Raises
    ------
    FileNotFoundError
        The file (or the given ``query_path``) does not exist.
    FormatError
        Not LIBSVM; no query ids and no ``.query`` file; non-consecutive query ids; group sizes
        that do not sum to the rows; relevances that are not integers in [0, 31].
    """
    from sklearn.datasets import load_svmlight_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path={os.fspath(path)!r}: no such file")
    try:
        X, y, qid = load_svmlight_file(str(path), query_id=True, dtype=np.float32, n_features=n_features)
    except (ValueError, OSError) as exc:
        raise FormatError(f"{path}: not a LIBSVM file ({exc})") from exc
    sidecar = Path(query_path) if query_path is not None else Path(f"{path}.query")
    if query_path is not None and not sidecar.is_file():
        raise FileNotFoundError(f"query_path={os.fspath(sidecar)!r}: no such file")
    if sidecar.is_file():
        sizes = _read_sizes(sidecar, len(y))
    elif np.any(qid != 0):
        sizes = _runs(qid, path)
    else:
        raise FormatError(f"{path}: no query ids (qid:) and no {sidecar.name} file of group sizes next to it")
    if np.any(y != np.floor(y)) or np.any(y < 0) or np.any(y > 31):
        raise FormatError(f"{path}: relevance labels must be integers in [0, 31], found "
                          f"{y[(y != np.floor(y)) | (y < 0) | (y > 31)][0]!r}")
    return X.toarray(), y.astype(np.int64), sizes


def has_queries(path: str | os.PathLike, query_path: str | os.PathLike | None = None) -> bool:
    """Whether a LIBSVM file is ranking data: ``query_path`` is given, ``<path>.query`` exists, or
    its first data line has ``qid:`` (as every line then must)."""
    if query_path is not None or Path(f"{path}.query").is_file():
        return True
    with open(path, "rb") as f:
        for line in f:
            line = line.split(b"#", 1)[0].strip()
            if line:
                return b" qid:" in line
    return False


def describe(path, query_path=None, test_path=None) -> dict:
    """What :func:`load` would load from a ranking file, as ``gbfs.data.reading.files.describe``
    says it of other files: ``task`` ("ranking"), ``rows``, ``columns``, ``feature_names``,
    ``queries``, ``classes`` (relevance -> count), ``query_path`` (the group sizes read, or None for
    the ``qid:`` of the lines), ``problem`` (the error :func:`read` raises, or None)."""
    sidecar = Path(query_path) if query_path is not None else Path(f"{path}.query")
    info = {"format": "libsvm", "path": str(Path(path).resolve()), "target": None, "task": "ranking",
            "test_path": None if test_path is None else str(test_path), "text_columns": [], "nan": {},
            "query_path": str(sidecar.resolve()) if sidecar.is_file() else None, "problem": None,
            "rows": 0, "columns": 0, "feature_names": [], "queries": 0, "classes": {}, "target_range": None}
    try:
        X, y, sizes = read(path, query_path)
    except (FormatError, FileNotFoundError) as exc:
        info["problem"] = str(exc)
        return info
    values, counts = np.unique(y, return_counts=True)
    info.update(rows=len(y), columns=X.shape[1], feature_names=[f"f{j}" for j in range(X.shape[1])],
                queries=len(sizes), classes=dict(zip(values.tolist(), counts.tolist())))
    return info


def _runs(qid: np.ndarray, path: Path) -> np.ndarray:
    change = np.flatnonzero(np.diff(qid)) + 1
    starts = np.concatenate([[0], change])
    ids = qid[starts]
    if np.unique(ids).size != ids.size:
        values, counts = np.unique(ids, return_counts=True)
        again = ids[np.isin(ids, values[counts > 1])][0]
        raise FormatError(f"{path}: the rows of query {again} are not consecutive; sort the file by qid")
    return np.diff(np.concatenate([starts, [len(qid)]])).astype(np.int64)


def _read_sizes(path: Path, n_rows: int) -> np.ndarray:
    try:
        sizes = np.loadtxt(path, dtype=np.int64, ndmin=1)
    except ValueError as exc:
        raise FormatError(f"{path}: not a file of group sizes, one integer per line ({exc})") from exc
    if sizes.ndim != 1 or np.any(sizes < 1) or int(sizes.sum()) != n_rows:
        raise FormatError(f"{path}: group sizes must be positive and sum to the {n_rows} rows of the data "
                          f"file, got {sizes.size} sizes summing to {int(sizes.sum())}")
    return sizes


def _take(X, y, sizes, queries):
    starts = np.concatenate([[0], np.cumsum(sizes)])
    rows = np.concatenate([np.arange(starts[q], starts[q + 1]) for q in queries])
    return X[rows], y[rows], sizes[queries]


def load(path, *, test_path=None, query_path=None, test_query_path=None, test_fraction: float = 0.25,
         val_fraction: float = 0.2, seed: int = 0):
    """A ranking file as a :class:`gbfs.data.Dataset` (``task == "ranking"``): whole queries in
    each split, seeded; ``test_path`` (same convention) is the test set, else ``test_fraction`` of
    the queries."""
    from .. import Dataset, split_queries

    X, y, sizes = read(path, query_path)
    if test_path is None:
        q_tr, q_te = train_test_split(np.arange(len(sizes)), test_size=test_fraction, random_state=seed)
        X_te, y_te, g_te = _take(X, y, sizes, np.sort(q_te))
        X, y, sizes = _take(X, y, sizes, np.sort(q_tr))
    else:
        X_te, y_te, g_te = read(test_path, test_query_path, n_features=X.shape[1])
    tr, va, g_tr, g_va = split_queries(sizes, val_fraction, seed)
    return Dataset(name="ranking_file", X_train=X[tr], y_train=y[tr], X_val=X[va], y_val=y[va], X_test=X_te,
                   y_test=y_te, feature_names=[f"f{j}" for j in range(X.shape[1])], task="ranking",
                   checksum="not verified (a local file)", source=str(Path(path).resolve()),
                   group_train=g_tr, group_val=g_va, group_test=g_te)
