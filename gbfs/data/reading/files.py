"""A user's own data file as a dataset: ``load_dataset("file", path=..., target=...)``.

Formats, by extension (:data:`FORMATS`):

- ``.csv`` (also compressed: ``.csv.gz``, ``.csv.bz2``, ``.csv.xz``, ``.csv.zip``) and ``.parquet``:
  a table whose column ``target`` (required) holds the labels; every other column is a feature,
  named by its header (every name once: duplicates are refused).  Features must be numbers (or
  booleans); NaN is allowed (the booster handles missing values), infinity is not.  Text columns
  are categorical features (``categorical="auto"``), coded by their sorted levels
  (:mod:`gbfs.data.reading.table_encoding`; ``Dataset.categorical`` / ``categories`` say which and what);
  ``categorical`` may also name the columns (integer-coded ones too), or be ``"none"`` to refuse
  text columns.
- LIBSVM (``.svm``, ``.libsvm``, ``.txt``): ``label idx:val ...`` lines read by
  ``sklearn.datasets.load_svmlight_file`` (0- or 1-based indices, detected); features ``f0``,
  ``f1``, ...; the label comes from the file, so ``target`` stays None.
- ``.npz`` with arrays ``X`` (rows x features) and ``y``, optionally ``feature_names``; ``target``
  stays None.

Labels and task (:mod:`gbfs.data.reading.file_labels`): ``task="auto"`` detects it from the target,
``binary`` (two values), ``multiclass`` (a few integers or texts) or ``regression`` (real numbers),
or it is given and checked.  Two values are mapped to 0 / 1 in sorted order, so the larger value
(the later one in alphabetical order) is the positive class 1: ``0``/``1``, ``-1``/``+1`` and
``"no"``/``"yes"`` come out as expected; classes to the codes ``0 .. K-1`` of their sorted values;
a regression target stays float64.  ``FileData.class_names`` holds the classes as text (none for a
regression).  A LIBSVM file with query ids (or a ``.query`` file) is ranking data:
:mod:`gbfs.data.reading.ranking_files` reads it (:func:`file_task` says which task a file is).

Values: features are float64 and hold exactly what the file holds; what float64 would change
(integers beyond 2^53), infinities and truncated or corrupt files are refused naming the file, the
column and the row (:mod:`gbfs.data.reading.file_reading`).

Splits: with ``test_path`` (a file of the same format and columns) that file is the test set;
without it a seeded stratified ``test_fraction`` of the rows is.  ``gbfs.data.load_dataset`` then
applies ``scale`` and holds out ``val_fraction`` of train for validation, as for the real datasets.

Cache: parsing a large CSV on every run is slow, so the parsed arrays are cached like the real
datasets' (:func:`gbfs.data.prepare.write_npz_atomic`, a ``.sha256`` record checked on every load)::

    <data root>/file/prepared/<stem>-<key>.npz          X (float64), labels (as in the file), feature_names
                                                        (and X_test, labels_test with a test file)
    <data root>/file/prepared/<stem>-<key>.npz.sha256   its own sha256

``key`` is the first 16 hex digits of the sha256 of the file's contents (and the test file's), the
format, ``target`` and :data:`CACHE_FORMAT`: a changed file gets a new key (the old cache file is
left in place; :data:`CACHE_FORMAT` 3 made ``X`` float64, 4 keeps the labels as the file holds them,
so the caches of before are not found, and one placed under a current key is refused).  The task
is not part of the key: the labels are encoded for it on every load.  A cache that fails its check
is rebuilt with a warning.  A data root that is not
writable is not an error: the file is parsed on every load (with one warning).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from ..fetching.download import sha256_file
from ..fetching.fsutil import is_not_writable
from ..fetching.manifest import data_root
from ..formats import FormatError
from ..prepare import read_sidecar, sidecar_path, write_npz_atomic
from . import ranking_files, table_encoding
from .file_labels import AUTO, encode_labels
from .file_reading import TABLES, header, labels_where
from .file_reading import parse as _parse
from .file_reading import parse_other as _parse_other
from .file_reading import read_table as _read_table

__all__ = ["CACHE_FORMAT", "FORMATS", "NAME", "TABLES", "FileData", "cache_path", "check_file", "describe",
           "encode_labels", "file_format", "file_task", "load"]

#: the name of this dataset in ``load_dataset``
NAME = "file"
#: extension -> format
FORMATS = {".csv": "csv", ".csv.gz": "csv", ".csv.bz2": "csv", ".csv.xz": "csv", ".csv.zip": "csv",
           ".parquet": "parquet", ".svm": "libsvm", ".libsvm": "libsvm", ".txt": "libsvm", ".npz": "npz"}
#: bump when the arrays cached for the same file change (3: X float64, exactly the file's values; 4: the
#: labels as the file holds them, encoded for the task on load)
CACHE_FORMAT = 4
_REQUIRED = ("X", "labels", "feature_names", "categorical", "category_sizes", "category_levels")
_SHOWN = 10
_warned_roots: set[Path] = set()


@dataclass(frozen=True)
class FileData:
    """A data file parsed and split into train and test (float64 ``X``; ``y`` as :attr:`task` fits it:
    0 / 1, class codes ``0 .. K-1`` or real numbers)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: list[str]
    class_names: tuple[str, ...]
    source: str
    checksum: str
    categorical: tuple[int, ...] = ()
    categories: tuple | None = None
    task: str = "binary"


def file_format(path: str | os.PathLike, argument: str = "path", query_path=None) -> str:
    """The format of ``path`` from its extension (a file without one, with a ``query_path`` or next to
    a ``<file>.query`` file of group sizes, is LIBSVM ranking data, as LightGBM's ``rank.train``
    example); ``ValueError`` listing the supported ones."""
    ext = _extension(Path(path))
    if ext is None and (query_path is not None or Path(f"{os.fspath(path)}.query").is_file()):
        return "libsvm"
    if ext is None:
        raise ValueError(f"{argument}={os.fspath(path)!r}: unknown file type; supported extensions: "
                         f"{', '.join(FORMATS)}")
    return FORMATS[ext]


def check_file(path, target: str | None = None, test_path=None, query_path=None,
               test_query_path=None) -> tuple[Path, Path | None, str, str | None]:
    """Check the arguments of :func:`load` without parsing the data: the files exist and have a
    supported extension (or, for ranking data, a file of group sizes: ``query_path``,
    ``test_query_path``), ``target`` is given exactly for tables and is one of their columns, no
    column name is repeated, and the test file has the same format and columns.  Returns
    ``(path, test_path, format, target)``, the paths absolute and ``target`` as text (a column ``1``
    given on a command line is ``"1"``).

    Raises
    ------
    FileNotFoundError
        A file is missing.
    ValueError
        Any other problem, saying what to do.
    """
    target = None if target is None else str(target)
    if path is None:
        raise ValueError(f"path is required: the data file ({', '.join(FORMATS)})")
    path = _existing(path, "path")
    fmt = file_format(path, query_path=query_path)
    test = None if test_path is None else _existing(test_path, "test_path")
    if test is not None and (found := file_format(test, "test_path", test_query_path)) != fmt:
        raise ValueError(f"test_path={os.fspath(test)!r} must have the format of path ({fmt}), "
                         f"found {found}")
    if fmt not in TABLES:
        if target is not None:
            raise ValueError(f"target={target!r}: a {fmt} file holds its own labels; leave target unset "
                             f"(it names the label column of a CSV or Parquet file)")
        return path, test, fmt, target
    if target is None:
        raise ValueError(f"target is required for the {fmt} file {path}: the name of its label column")
    columns = header(path, fmt)
    if target not in columns:
        more = f" ... ({len(columns)} in all)" if len(columns) > _SHOWN else ""
        raise ValueError(f"target={target!r} is not a column of {path}; its columns: "
                         f"{', '.join(map(repr, columns[:_SHOWN]))}{more}")
    if test is not None:
        test_columns = header(test, fmt)
        missing = [c for c in columns if c not in test_columns]
        extra = [c for c in test_columns if c not in columns]
        if missing or extra:
            raise ValueError(f"test_path {test}: its columns differ from those of path {path}: missing "
                             f"{missing[:_SHOWN]}, extra {extra[:_SHOWN]}; give a test file with the same "
                             f"columns")
    return path, test, fmt, target


def load(path, target: str | None = None, *, test_path=None, test_fraction: float = 0.25, seed: int = 0,
         root=None, categorical="auto", task: str = AUTO, argument: str = "task") -> FileData:
    """Parse (or read from the cache) a data file and split it into train and test.

    Parameters
    ----------
    path : path
        The data file (see the module docstring for the formats).
    target : str, optional
        The label column of a CSV or Parquet file (required there; None for LIBSVM and ``.npz``).
    test_path : path, optional
        A test file of the same format and columns; without it, a seeded stratified
        ``test_fraction`` of the rows of ``path`` is the test set.
    test_fraction : float in (0, 1)
        The share of rows held out for test when there is no ``test_path`` (ignored otherwise).
    seed : int
        Seed of the test split.
    root : path, optional
        Data root of the cache (default ``$GBFS_DATA_DIR``, else the repository's ``datasets/``).
    categorical : "auto", "none" or list of str
        The categorical columns of a CSV or Parquet file (:mod:`gbfs.data.reading.table_encoding`):
        its text columns, none, or those named.
    task : {"auto", "binary", "multiclass", "regression"}
        What the target is fitted as (:mod:`gbfs.data.reading.file_labels`); ``"auto"`` detects it.
        A ranking file is read by :func:`gbfs.data.reading.ranking_files.load`.
    argument : str
        The name of ``task`` in the errors.

    Raises
    ------
    FileNotFoundError, ValueError
        See :func:`check_file` and :func:`encode_labels`; text feature columns not declared
        categorical, NaN labels, an empty file.
    """
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) \
            or not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}")
    path, test, fmt, target = check_file(path, target, test_path)
    categorical = table_encoding.check_categorical(categorical)
    digests = [sha256_file(path)] + ([] if test is None else [sha256_file(test)])
    arrays = _cached(path, test, fmt, target, digests, root, categorical)
    X = arrays["X"]
    y, y_test, class_names, task = encode_labels(arrays["labels"], arrays.get("labels_test"),
                                                 labels_where(path, test, fmt, target), task, argument)
    if test is None:
        try:
            tr, te = train_test_split(np.arange(len(y)), test_size=test_fraction, random_state=seed,
                                      stratify=None if task == "regression" else y)
        except ValueError as exc:    # too few rows of a class to stratify
            raise ValueError(f"{path}: cannot hold out a stratified test_fraction={test_fraction} of its "
                             f"{len(y)} rows ({exc}); give more rows or a test file (test_path)") from exc
        tr, te = np.sort(tr), np.sort(te)
        X_tr, y_tr, X_te, y_te = X[tr], y[tr], X[te], y[te]
    else:
        X_tr, y_tr, X_te, y_te = X, y, arrays["X_test"], y_test
    checksum = f"sha256 {digests[0]} of {path} (a local file)"
    if test is not None:
        checksum += f"; sha256 {digests[1]} of {test} (the test file)"
    return FileData(X_tr, y_tr, X_te, y_te, [str(s) for s in arrays["feature_names"]], class_names,
                    str(path), checksum, *table_encoding.unpack(arrays), task=task)


def file_task(path, target: str | None = None, test_path=None, query_path=None, task: str = AUTO,
              root=None, categorical="auto", argument: str = "task") -> str:
    """The task of a data file, as :func:`load` (or, for ranking, ``ranking_files.load``) reads it:
    ``ranking`` for a LIBSVM file with query ids or group sizes
    (:func:`gbfs.data.reading.ranking_files.has_queries`), else the task of its target
    (:func:`gbfs.data.reading.file_labels.detect_task`; parsed once, then read from the cache).
    A given ``task`` is checked against the file: ``ValueError`` naming ``argument`` when the file
    cannot be read as that task."""
    path, test, fmt, target = check_file(path, target, test_path, query_path)
    queries = fmt == "libsvm" and ranking_files.has_queries(path, query_path)
    if task == "ranking" or (task == AUTO and queries):
        if not queries:
            raise ValueError(f"{argument}='ranking': {path} is no ranking file; a ranking file is LIBSVM "
                             f"with "
                             f"qid: on its lines or a {path.name}.query file of group sizes next to it")
        return "ranking"
    if query_path is not None:
        raise ValueError(f"query_path is only read for a ranking file ({argument}=ranking or auto), "
                         f"got {argument}={task!r}")
    return load(path, target, test_path=test, root=root, categorical=categorical, task=task,
                argument=argument).task


def cache_path(path, target: str | None, test_path, root=None, digests: list[str] | None = None,
               categorical="auto") -> Path:
    """Where the parsed arrays of ``path`` (with ``target``, ``test_path`` and ``categorical``) are
    cached."""
    path = Path(path)
    digests = digests or [sha256_file(p) for p in (path, test_path) if p is not None]
    cat = categorical if isinstance(categorical, str) else list(categorical)
    blob = json.dumps({"format": file_format(path), "target": target, "cache_format": CACHE_FORMAT,
                       "files": digests, "categorical": cat}, sort_keys=True)
    key = hashlib.sha256(blob.encode()).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", path.name[:len(path.name) - len(_extension(path))]) or "data"
    return data_root(root) / NAME / "prepared" / f"{stem}-{key}.npz"


def describe(path, target: str | None = None, test_path=None, root=None, categorical="auto", task: str = AUTO,
             query_path=None) -> dict:
    """What :func:`load` would load, without caching anything: ``format``, ``rows``, ``columns``,
    ``feature_names``, ``target``, ``classes`` (value -> count), ``task`` (the detected or given one,
    None when the labels refuse it), ``target_range`` (a regression's smallest and largest value),
    ``text_columns``, ``nan`` (feature -> count of NaN), ``cache`` (its path, and whether it exists),
    ``problem`` (the error :func:`load` would raise on the contents, or None).  A ranking file
    (:func:`file_task`) is :func:`gbfs.data.reading.ranking_files.describe`'s.  Raises as
    :func:`check_file` does."""
    path, test, fmt, target = check_file(path, target, test_path, query_path)
    queries = fmt == "libsvm" and ranking_files.has_queries(path, query_path)
    if fmt == "libsvm" and (task == "ranking" or (task == AUTO and queries)):
        return ranking_files.describe(path, query_path, test)
    if task == "ranking" or query_path is not None:
        file_task(path, target, test, query_path, task)   # raises, saying what a ranking file is
    if fmt in TABLES:
        df = _read_table(path, fmt)
        features = [c for c in df.columns if c != target]
        nan = df[features].isna().sum()
        info = {"rows": len(df), "columns": len(df.columns), "feature_names": [str(c) for c in features],
                "text_columns": table_encoding.text_columns(df[features]),
                "classes": df[target].value_counts(dropna=False).sort_index().to_dict()}
    else:
        X, labels, names = _parse_other(path, fmt)
        nan = pd.Series(np.isnan(X).sum(axis=0), index=names)
        values, counts = np.unique(labels, return_counts=True)
        info = {"rows": len(X), "columns": X.shape[1], "feature_names": names, "text_columns": [],
                "classes": dict(zip(values.tolist(), counts.tolist()))}
    categorical = table_encoding.check_categorical(categorical)
    cache = cache_path(path, target, test, root, categorical=categorical)
    info.update(format=fmt, path=str(path), test_path=None if test is None else str(test), target=target,
                nan={str(k): int(v) for k, v in nan.items() if v}, cache=str(cache),
                cache_exists=cache.is_file(), problem=None, task=None, target_range=None)
    try:
        parsed = _parse(path, test, fmt, target, categorical)
        info["categorical"] = [info["feature_names"][j] for j in parsed["categorical"]]
        y, y_test, _, info["task"] = encode_labels(parsed["labels"], parsed.get("labels_test"),
                                                   labels_where(path, test, fmt, target), task)
        if info["task"] == "regression":
            every = y if y_test is None else np.concatenate([y, y_test])
            info["target_range"] = (float(every.min()), float(every.max()))
    except (ValueError, FormatError) as exc:
        info["problem"] = str(exc)
    return info


# ----------------------------------------------------------------------------- arguments

def _existing(path, argument: str) -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{argument}={os.fspath(path)!r}: no such file (a relative path is taken "
                                f"from the directory you run from)")
    return path.resolve()


def _extension(path: Path) -> str | None:
    # the longest first: ".csv.gz" is not ".gz"
    return next((e for e in sorted(FORMATS, key=len, reverse=True) if path.name.lower().endswith(e)), None)


# ----------------------------------------------------------------------------- cache

def _cached(path: Path, test: Path | None, fmt: str, target: str | None, digests: list[str], root,
            categorical="auto") -> dict:
    """The arrays of :func:`_parse`, from the verified cache or parsed (and cached if possible)."""
    target_path = cache_path(path, target, test, root, digests, categorical)
    if target_path.is_file():
        arrays, reason = _read_cache(target_path, test is not None)
        if arrays is not None:
            return arrays
        warnings.warn(f"{reason}; rebuilding it from {path}", RuntimeWarning, stacklevel=3)
    arrays = _parse(path, test, fmt, target, categorical)
    try:
        write_npz_atomic(target_path, arrays)
    except OSError as exc:
        if not is_not_writable(exc):
            raise
        folder = target_path.parent
        if folder not in _warned_roots:
            _warned_roots.add(folder)
            warnings.warn(f"cannot cache the parsed arrays of data files in {folder} ({exc}); they are "
                          f"parsed on every load (set $GBFS_DATA_DIR or root= to a writable folder to "
                          f"cache them)", RuntimeWarning, stacklevel=3)
    return arrays


def _read_cache(path: Path, with_test: bool) -> tuple[dict | None, str | None]:
    """(arrays, None) when the cache ``path`` matches its recorded sha256 and holds consistent
    arrays, else (None, why not)."""
    recorded, problem = read_sidecar(path)
    if problem or recorded is None:
        return None, f"{path}: {problem or f'no checksum record {sidecar_path(path).name}'}"
    try:
        digest = sha256_file(path)
    except OSError as exc:
        return None, f"{path} cannot be read ({exc})"
    if digest != recorded:
        return None, (f"{path} has sha256 {digest}, not the {recorded} recorded when it was written: it was "
                      f"truncated, corrupted or rewritten")
    want = _REQUIRED + (("X_test", "labels_test") if with_test else ())
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in want if k in npz.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        return None, f"{path}: cannot read the cache ({type(exc).__name__}: {exc})"
    X, y = arrays.get("X"), arrays.get("labels")
    ok = len(arrays) == len(want) and X.ndim == 2 and y.shape == (len(X),) \
        and arrays["feature_names"].shape == (X.shape[1],)
    if ok and with_test:
        ok = arrays["X_test"].shape[1:] == X.shape[1:] \
            and arrays["labels_test"].shape == (len(arrays["X_test"]),)
    if not ok:
        return None, f"{path}: not a cache of a data file (arrays missing or of inconsistent shapes)"
    if any(arrays[k].dtype != np.float64 for k in ("X", "X_test") if k in arrays):
        # an older cache's float32 rounded the file's values: parse them again
        return None, f"{path}: a cache of an older format (X {X.dtype}, not float64)"
    return arrays, None
