"""Reading a data file of one's own (:mod:`gbfs.data.reading.files`) into arrays that hold exactly what it
holds.

What the file holds reaches the arrays unchanged, or the file is refused with an error naming it and
the column (and the row where there is one):

- Headers.  Duplicate column names are refused: pandas would rename a second ``label`` to
  ``label.1`` and make it a feature (the target leaking into the features), and a second ``a`` to
  ``a.1``.  A CSV header is read as text (:func:`header`) rather than from pandas' renamed columns,
  so a genuine column ``a.1`` next to ``a`` is told apart from a renamed duplicate.  Parquet schemas
  and an ``.npz``'s ``feature_names`` are checked the same way; ``feature_names`` of the wrong
  length are refused rather than replaced by ``f0, f1, ...``.
- Compressed files.  A truncated or corrupt ``.csv.gz``, ``.csv.bz2``, ``.csv.xz``, ``.csv.zip``,
  Parquet or ``.npz`` file is refused saying so (the decompressors raise a bare ``EOFError`` or
  ``BadZipFile`` that names no file).
- Values.  Features are float64, the dtype the booster bins (``gbfs.booster.kernels._types.X_DTYPE``): every
  float of the file and every integer up to 2^53 is kept exactly (float32 rounded epoch seconds to
  multiples of 128 s and turned values above 3.4e38 into infinity).  Integers beyond 2^53 that
  float64 would round, and infinite values (``inf``, ``-inf``, ``1e400``: the estimators refuse
  infinity; NaN is a missing value and stays) are refused.
"""

from __future__ import annotations

import gzip
import lzma
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from ..formats import FormatError
from ..ovr import read_npz
from . import table_encoding
from .file_labels import label_values

#: formats whose labels are a column named by ``target``
TABLES = ("csv", "parquet")
#: float64 holds every integer of at most this magnitude exactly
EXACT_INTEGER = 2 ** 53
_SHOWN = 10
# what the decompressors (gzip, bz2, lzma, zipfile) raise on a cut or damaged stream: the OSError of
# gzip's BadGzipFile and of bz2's "Invalid data stream" included
_CORRUPT = (EOFError, OSError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, gzip.BadGzipFile)
#: compressed CSV files: they end with an end-of-stream marker, so a cut one is told apart
COMPRESSED = (".gz", ".bz2", ".xz", ".zip")


@contextmanager
def reading(path: Path, fmt: str, what: str = "read") -> Iterator[None]:
    """Turn the errors of reading ``path`` into a :class:`FormatError` naming it; a compressed or
    Parquet file that ends early or does not decompress is called truncated or corrupt."""
    try:
        yield
    except FormatError:
        raise
    except pd.errors.EmptyDataError as exc:
        raise FormatError(f"{path}: cannot {what} this {fmt} file: it is empty ({exc})") from exc
    except (ValueError, pd.errors.ParserError) as exc:
        if _is_arrow_error(exc):          # pyarrow's ArrowInvalid: a damaged or cut Parquet file
            raise _corrupt(path, fmt, exc) from exc
        raise FormatError(f"{path}: cannot {what} this {fmt} file ({type(exc).__name__}: {exc})") from exc
    except _CORRUPT as exc:
        damaged = fmt == "parquet" or path.name.lower().endswith(COMPRESSED)
        if not damaged or isinstance(exc, (PermissionError, FileNotFoundError, IsADirectoryError)):
            raise FormatError(f"{path}: cannot {what} this {fmt} file ({type(exc).__name__}: {exc})") from exc
        raise _corrupt(path, fmt, exc) from exc


def _is_arrow_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("pyarrow")


def _corrupt(path: Path, fmt: str, exc: BaseException) -> FormatError:
    return FormatError(f"{path}: cannot read this {fmt} file: it is truncated or corrupt "
                       f"({type(exc).__name__}: {exc}); copy or download it again")


def header(path: Path, fmt: str) -> list[str]:
    """The column names of a table as the file spells them (CSV: its first row; Parquet: its
    schema); duplicates are refused."""
    with reading(path, fmt, "read the header of"):
        if fmt == "csv":
            # the first row as text: pandas' own header would already have renamed duplicates
            row = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
            names = [str(c) for c in row.iloc[0]] if len(row) else []
        else:
            import pyarrow.parquet as pq

            names = [str(c) for c in pq.read_schema(path).names if not str(c).startswith("__index_level_")]
    refuse_duplicates(names, path, "duplicate column names")
    return names


def refuse_duplicates(names: Sequence[str], path: Path, what: str) -> None:
    """``ValueError`` naming the duplicated ``names`` (and their positions) of ``path``."""
    seen: dict[str, list[int]] = {}
    for j, name in enumerate(names):
        seen.setdefault(name, []).append(j + 1)
    dups = {n: at for n, at in seen.items() if len(at) > 1}
    if dups:
        shown = ", ".join(f"{n!r} (columns {', '.join(map(str, at))})"
                          for n, at in list(dups.items())[:_SHOWN])
        raise ValueError(f"{path}: {what}: {shown}; every column needs its own name (pandas would rename "
                         f"a repeated one, e.g. to {next(iter(dups)) + '.1'!r}, and read it as a feature)")


def read_table(path: Path, fmt: str) -> pd.DataFrame:
    """The whole table (column names as text); errors name the file."""
    with reading(path, fmt):
        df = pd.read_csv(path, low_memory=False) if fmt == "csv" else pd.read_parquet(path)
    df.columns = [str(c) for c in df.columns]
    return df


def table(path: Path, fmt: str, target: str, columns: list[str] | None = None):
    """``(features, labels, feature_names)`` of a CSV or Parquet file (``features`` a frame), its
    columns in the order ``columns``."""
    df = read_table(path, fmt)
    if columns is not None:
        df = df[columns]
    if len(df) == 0:
        raise ValueError(f"{path}: no rows")
    n_nan = int(df[target].isna().sum())
    if n_nan:
        first = int(np.flatnonzero(df[target].isna().to_numpy())[0]) + 1
        raise ValueError(f"{path}: the target column {target!r} is empty (NaN) in {n_nan} of {len(df)} rows "
                         f"(the first is data row {first}); drop or fill those rows first")
    features = [c for c in df.columns if c != target]
    if not features:
        raise ValueError(f"{path}: no feature columns besides the target {target!r}")
    refuse_inexact_integers(df[features], path)
    return df[features], df[target].to_numpy(), features


def parse_other(path: Path, fmt: str):
    """``(X, labels, feature_names)`` of a LIBSVM or ``.npz`` file, ``X`` float64."""
    if fmt == "npz":
        try:   # X as stored: integers are checked before they become float64
            X, labels, names, _ = read_npz(path, dtype=None, strict_names=True)
        except ValueError as exc:
            if "allow_pickle" not in str(exc):
                raise
            raise FormatError(f"{path}: holds an object array, which is not read (it would run pickled "
                              f"code); save text as np.array(..., dtype=str)") from exc
        if X.dtype.kind in "iu":
            refuse_inexact_integers(pd.DataFrame(X, columns=names), path)
        return np.asarray(X, dtype=np.float64), labels, names
    from sklearn.datasets import load_svmlight_file

    try:
        X, labels = load_svmlight_file(str(path), dtype=np.float64)
    except (ValueError, OSError) as exc:
        raise FormatError(f"{path}: not a LIBSVM file ({exc})") from exc
    return X.toarray(), labels, [f"f{j}" for j in range(X.shape[1])]


def refuse_inexact_integers(frame: pd.DataFrame, path: Path) -> None:
    """``ValueError`` naming the first integer column (and row) holding a value float64 would round."""
    for name in frame.columns:
        col = frame[name]
        if not pd.api.types.is_integer_dtype(col.dtype):
            continue
        values = col.to_numpy(dtype=np.uint64 if col.dtype.kind == "u" else np.int64, na_value=0)
        bad = inexact_integers(values)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{path}: column {name!r} holds integers beyond 2^53 that float64 (the "
                             f"booster's dtype) would round, e.g. {int(values[row])} in data row {row + 1} "
                             f"({int(bad.sum())} such values); subtract an offset or rescale the column")


def inexact_integers(a: np.ndarray) -> np.ndarray:
    """Which values of the integer array ``a`` float64 cannot hold exactly."""
    a = np.asarray(a)
    out = np.zeros(a.shape, dtype=bool)
    big = a > EXACT_INTEGER if a.dtype.kind == "u" else (a > EXACT_INTEGER) | (a < -EXACT_INTEGER)
    if not big.any():
        return out
    if a.dtype.kind == "u":
        mag = a[big].astype(np.uint64)
    else:
        v = a[big].astype(np.int64)
        neg = v < 0     # |v| as uint64 without overflowing at -2**63
        mag = np.where(neg, -(v + 1), v).astype(np.uint64) + neg.astype(np.uint64)
    # v > 2**53 is exact iff it is a multiple of 2**(bit_length - 53); frexp of the rounded float
    # gives the bit length (one more when the rounding carried, which only inexact v do)
    _, exp = np.frexp(mag.astype(np.float64))
    step = np.left_shift(np.uint64(1), (exp - 53).astype(np.uint64))
    out[big] = (mag % step) != 0
    return out


def refuse_infinite(X: np.ndarray, names: Sequence[str], path: Path) -> None:
    """``ValueError`` naming the column and data row of the first infinite value of ``X``."""
    inf = np.isinf(X)
    if inf.any():
        row, col = (int(i[0]) for i in np.nonzero(inf))
        n = int(inf.sum())
        raise ValueError(f"{path}: column {names[col]!r} holds an infinite value ({X[row, col]}: text such "
                         f"as inf or Infinity, or a number beyond +-1.8e308) in data row {row + 1} ({n} "
                         f"infinite value{'s' if n > 1 else ''} in all); the estimators refuse infinity "
                         f"(NaN, a missing value, is allowed): replace it by NaN or a finite number")


def parse(path: Path, test: Path | None, fmt: str, target: str | None, categorical="auto") -> dict:
    """The arrays cached for ``path`` (and ``test``): ``X``, ``labels`` (as the file holds them),
    ``feature_names``, the categorical columns (:func:`gbfs.data.reading.table_encoding.pack`) (and
    ``X_test``, ``labels_test``); ``X`` float64."""
    cats: tuple = ([], [])
    if fmt == "libsvm" and test is not None:
        from sklearn.datasets import load_svmlight_files

        try:   # parsed together: the same width and the same 0- or 1-based indexing
            X, labels, X_te, labels_te = load_svmlight_files([str(path), str(test)], dtype=np.float64)
        except (ValueError, OSError) as exc:
            raise FormatError(f"{path}, {test}: not LIBSVM files ({exc})") from exc
        X, X_te, names = X.toarray(), X_te.toarray(), [f"f{j}" for j in range(X.shape[1])]
    elif fmt in TABLES:
        F, labels, names = table(path, fmt, target)
        F_te, labels_te, _ = (None, None, None) if test is None else \
            table(test, fmt, target, [target, *names])
        X, X_te, *cats = table_encoding.encode(F, F_te, categorical, path)
    else:
        X, labels, names = parse_other(path, fmt)
        X_te, labels_te, test_names = (None, None, None) if test is None else parse_other(test, fmt)
        if test is not None and test_names != names:
            raise ValueError(f"test_path {test}: its features differ from those of path {path}: "
                             f"{len(test_names)} vs {len(names)} columns, first names {test_names[:3]} vs "
                             f"{names[:3]}; give a test file with the same features")
    refuse_infinite(X, names, path)
    if test is not None:
        refuse_infinite(X_te, names, test)
    # the labels as the file holds them (text, integers or reals): the task encodes them on load
    out = {"X": np.ascontiguousarray(X, dtype=np.float64), "labels": _plain(labels),
           "feature_names": np.array(names, dtype=str), **table_encoding.pack(*cats)}
    if test is not None:
        out.update(X_test=np.ascontiguousarray(X_te, dtype=np.float64), labels_test=_plain(labels_te))
    return out


def labels_where(path: Path, test: Path | None, fmt: str, target: str | None) -> str:
    """What the labels of ``path`` are, for the errors of
    :func:`gbfs.data.reading.file_labels.encode_labels`."""
    column = f"the target column {target!r}" if fmt in TABLES else "the labels"
    return f"{column} of {path}" + ("" if test is None else f" and {test}")


def _plain(labels) -> np.ndarray:
    """Labels an ``.npz`` holds without pickling: text as str, numbers as they are."""
    values = label_values(labels)
    return values.astype(str) if values.dtype.kind == "O" else values
