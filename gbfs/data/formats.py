"""Parsers of the upstream formats: Gisette (NIPS 2003 challenge), LIBSVM (Epsilon), benchm-ml CSV (Flight).

Every parser returns float32 features and int64 labels in {0, 1} (the positive class,
``+1`` or ``"Y"``, is 1) and raises :class:`FormatError` naming the file and line of
anything that does not match the published format.
"""

from __future__ import annotations

import bz2
import io
import os
import re
import warnings
from collections.abc import Iterable

import numpy as np
import pandas as pd
from tqdm.auto import tqdm


class FormatError(ValueError):
    """A raw file does not follow its upstream format."""


# ----------------------------------------------------------------------------- Gisette

def read_gisette_data(path: str | os.PathLike, n_features: int = 5000) -> np.ndarray:
    """Read a ``gisette_*.data`` file: one row per line, ``n_features`` space-separated
    integers in 0..999, each line ending in a space (the trailing space is not a column)."""
    try:
        # loadtxt splits on runs of whitespace, so the trailing space adds no empty column,
        # and it refuses ragged rows.
        X = np.loadtxt(path, dtype=np.float32, ndmin=2, comments=None)
    except ValueError as exc:
        raise FormatError(f"{path}: not a Gisette data file ({exc})") from exc
    if X.shape[1] != n_features:
        raise FormatError(f"{path}: expected {n_features} values per line, found {X.shape[1]}")
    if X.min() < 0 or X.max() > 999 or not np.array_equal(X, np.round(X)):
        bad = X[(X < 0) | (X > 999) | (X != np.round(X))]
        raise FormatError(f"{path}: values must be integers in 0..999, found {bad[:5].tolist()}")
    return X


def read_pm1_labels(path: str | os.PathLike) -> np.ndarray:
    """Read a labels file with one ``+1``/``-1`` per line; return int64 labels (+1 -> 1, -1 -> 0)."""
    try:
        raw = np.loadtxt(path, dtype=np.float64, ndmin=1, comments=None)
    except ValueError as exc:
        raise FormatError(f"{path}: not a +1/-1 labels file ({exc})") from exc
    return _pm1_to_01(raw, str(path))


def _pm1_to_01(raw: np.ndarray, where: str) -> np.ndarray:
    bad = ~np.isin(raw, (-1.0, 1.0))
    if bad.any():
        line = int(np.flatnonzero(bad)[0]) + 1
        raise FormatError(f"{where}: labels must be +1 or -1, found {raw[bad][0]:g} (line {line})")
    return (raw > 0).astype(np.int64)


def read_gisette(raw: os.PathLike, n_features: int = 5000) -> dict[str, np.ndarray]:
    """Gisette as the GT-GBM paper uses it: the 6000 train rows are its train set and the
    1000 validation rows its test set (the challenge never released test labels)."""
    raw = os.fspath(raw)
    out = {}
    for split, stem in (("train", "train"), ("test", "valid")):
        X = read_gisette_data(os.path.join(raw, f"gisette_{stem}.data"), n_features)
        y = read_pm1_labels(os.path.join(raw, f"gisette_{stem}.labels"))
        if len(y) != len(X):
            raise FormatError(f"gisette_{stem}: {len(X)} data rows but {len(y)} labels")
        out[f"X_{split}"], out[f"y_{split}"] = X, y
    out["feature_names"] = np.array([f"f{j}" for j in range(n_features)])
    return out


# ----------------------------------------------------------------------------- LIBSVM (Epsilon)

def read_libsvm_rows(lines: Iterable[bytes], n_rows: int, n_features: int, keep: np.ndarray,
                     where: str = "libsvm") -> tuple[np.ndarray, np.ndarray]:
    """Parse the rows ``keep`` (sorted, 0-based) of a LIBSVM text stream ``label idx:val ...``.

    Only kept lines are parsed, others are only counted, so a 400 000-row file streams
    through in constant memory apart from the kept rows.  Indices are 1-based; absent
    indices are zeros.  The stream must hold exactly ``n_rows`` lines.
    """
    keep = np.asarray(keep, dtype=np.int64)
    X = np.zeros((len(keep), n_features), dtype=np.float32)
    y = np.empty(len(keep), dtype=np.float64)
    k, n_seen = 0, 0
    for i, line in enumerate(lines):
        n_seen = i + 1
        if k < len(keep) and keep[k] == i:
            y[k] = _parse_libsvm_line(line, X[k], i + 1, where)
            k += 1
    if n_seen != n_rows:
        raise FormatError(f"{where}: expected {n_rows} rows, found {n_seen}")
    return X, _pm1_to_01(y, where)


def _parse_libsvm_line(line: bytes, out: np.ndarray, lineno: int, where: str) -> float:
    head, _, rest = line.strip().partition(b" ")
    try:
        label = float(head)
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # numpy warns (not raises) on trailing junk
            pairs = np.fromstring(rest.replace(b":", b" ").decode("ascii"), dtype=np.float64, sep=" ")
    except (ValueError, DeprecationWarning, UnicodeDecodeError) as exc:
        raise FormatError(f"{where}, line {lineno}: not 'label idx:val ...' ({exc})") from None
    if len(pairs) % 2 or rest.count(b":") != len(pairs) // 2:
        raise FormatError(f"{where}, line {lineno}: not 'label idx:val ...'")
    idx = pairs[0::2]
    if len(idx) and (idx.min() < 1 or idx.max() > len(out) or np.any(idx != np.round(idx))):
        raise FormatError(f"{where}, line {lineno}: feature indices must be integers in 1..{len(out)}")
    out[idx.astype(np.int64) - 1] = pairs[1::2]
    return label


def read_libsvm_bz2(path: str | os.PathLike, n_rows: int, n_features: int, n_keep: int | None,
                    seed: int, progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Stream a bz2-compressed LIBSVM file and keep a seeded uniform subsample of ``n_keep`` rows.

    The kept rows are ``sort(default_rng(seed).choice(n_rows, n_keep, replace=False))``, in
    file order; ``n_keep=None`` keeps every row.  Decompression is streamed: the text is
    never held in memory.
    """
    keep = (np.arange(n_rows) if n_keep is None or n_keep >= n_rows
            else np.sort(np.random.default_rng(seed).choice(n_rows, size=n_keep, replace=False)))
    size = os.path.getsize(path)
    with open(path, "rb") as raw, tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024,
                                       desc=os.path.basename(path), disable=not progress, leave=False) as bar:
        counted = _CountingReader(raw, bar)
        try:
            with bz2.open(counted, "rb") as stream:
                return read_libsvm_rows(stream, n_rows, n_features, keep, where=os.fspath(path))
        except (OSError, EOFError) as exc:
            raise FormatError(f"{path}: not a complete bz2 stream ({exc})") from exc


class _CountingReader(io.RawIOBase):
    """Feeds a progress bar with the compressed bytes consumed."""

    def __init__(self, raw, bar):
        self._raw, self._bar = raw, bar

    def readable(self):
        return True

    def readinto(self, b):
        n = self._raw.readinto(b)
        self._bar.update(n or 0)
        return n


# ----------------------------------------------------------------------------- benchm-ml Flight

FLIGHT_CATEGORICAL = ("Month", "DayofMonth", "DayOfWeek", "UniqueCarrier", "Origin", "Dest")
FLIGHT_NUMERIC = ("DepTime", "Distance")
FLIGHT_LABEL = "dep_delayed_15min"
FLIGHT_COLUMNS = ("Month", "DayofMonth", "DayOfWeek", "DepTime", "UniqueCarrier", "Origin", "Dest",
                  "Distance", FLIGHT_LABEL)


def read_flight_csv(path: str | os.PathLike) -> pd.DataFrame:
    """Read a benchm-ml CSV (``train-0.1m.csv``, ``test.csv``): quoted strings, header row."""
    try:
        df = pd.read_csv(path, dtype={c: str for c in FLIGHT_CATEGORICAL + (FLIGHT_LABEL,)},
                         keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise FormatError(f"{path}: not a benchm-ml CSV ({exc})") from exc
    if tuple(df.columns) != FLIGHT_COLUMNS:
        raise FormatError(f"{path}: expected columns {list(FLIGHT_COLUMNS)}, found {list(df.columns)}")
    return df


def natural_key(value: str):
    # "c-2" before "c-10", as a reader expects (a plain sort puts c-10 first)
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", value)]


def encode_flight(train: pd.DataFrame, test: pd.DataFrame):
    """One-hot encode the Flight columns as the benchm-ml scripts do.

    Categories of ``Month``, ``DayofMonth``, ``DayOfWeek``, ``UniqueCarrier``, ``Origin`` and
    ``Dest`` are fitted on train and test together (every level gets a column, named
    ``"<column>=<level>"``, levels in natural order); ``DepTime`` and ``Distance`` stay numeric
    and come last.  Labels: ``"Y"`` -> 1, ``"N"`` -> 0.

    Returns
    -------
    X_train, y_train, X_test, y_test : float32 and int64 arrays
    feature_names : list of str
    """
    for label, df in (("train", train), ("test", test)):
        missing = [c for c in FLIGHT_COLUMNS if c not in df.columns]
        if missing:
            raise FormatError(f"flight {label}: missing columns {missing}")
    names: list[str] = []
    codes_tr, codes_te = [], []
    for col in FLIGHT_CATEGORICAL:
        levels = sorted(set(train[col].astype(str)) | set(test[col].astype(str)), key=natural_key)
        lookup = {v: i + len(names) for i, v in enumerate(levels)}
        codes_tr.append(train[col].astype(str).map(lookup).to_numpy(np.int64))
        codes_te.append(test[col].astype(str).map(lookup).to_numpy(np.int64))
        names.extend(f"{col}={v}" for v in levels)
    n_onehot = len(names)
    names.extend(FLIGHT_NUMERIC)
    X_tr = _one_hot(np.column_stack(codes_tr), train, len(names), n_onehot, "train")
    X_te = _one_hot(np.column_stack(codes_te), test, len(names), n_onehot, "test")
    return X_tr, _yn_labels(train, "train"), X_te, _yn_labels(test, "test"), names


def encode_flight_categorical(train: pd.DataFrame, test: pd.DataFrame):
    """The Flight columns before one-hot: each categorical column as the integer codes of its levels
    (fitted on train and test together, in natural order, as :func:`encode_flight`'s columns),
    then ``DepTime`` and ``Distance``.

    Returns
    -------
    X_train, y_train, X_test, y_test : float32 and int64 arrays
    feature_names : list of str
        The column names.
    categories : tuple of tuple of str
        The levels of each categorical column (code ``k`` is ``categories[j][k]``).
    """
    X_tr, y_tr, X_te, y_te, onehot = encode_flight(train, test)
    n_cat = len(FLIGHT_CATEGORICAL)
    categories = tuple(tuple(n.split("=", 1)[1] for n in onehot if n.split("=", 1)[0] == col)
                       for col in FLIGHT_CATEGORICAL)
    starts = np.cumsum([0] + [len(c) for c in categories])

    def collapse(X):
        out = np.empty((len(X), n_cat + len(FLIGHT_NUMERIC)), dtype=np.float32)
        for j in range(n_cat):   # each row has exactly one 1 among a column's levels
            out[:, j] = np.argmax(X[:, starts[j]:starts[j + 1]], axis=1)
        out[:, n_cat:] = X[:, starts[-1]:]
        return out

    return collapse(X_tr), y_tr, collapse(X_te), y_te, [*FLIGHT_CATEGORICAL, *FLIGHT_NUMERIC], categories


def _one_hot(codes: np.ndarray, df: pd.DataFrame, width: int, n_onehot: int, label: str) -> np.ndarray:
    X = np.zeros((len(df), width), dtype=np.float32)
    X[np.arange(len(df))[:, None], codes] = 1.0
    for k, col in enumerate(FLIGHT_NUMERIC):
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(np.float64)
        if np.isnan(values).any():
            row = int(np.flatnonzero(np.isnan(values))[0])
            raise FormatError(f"flight {label}: column {col} must be numeric, found "
                              f"{df[col].iloc[row]!r} (row {row + 1})")
        X[:, n_onehot + k] = values
    return X


def _yn_labels(df: pd.DataFrame, label: str) -> np.ndarray:
    values = df[FLIGHT_LABEL].astype(str)
    bad = ~values.isin(("Y", "N"))
    if bad.any():
        raise FormatError(f"flight {label}: {FLIGHT_LABEL} must be 'Y' or 'N', found "
                          f"{values[bad].iloc[0]!r} (row {int(np.flatnonzero(bad.to_numpy())[0]) + 1})")
    return (values == "Y").to_numpy(np.int64)
