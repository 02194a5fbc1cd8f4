"""The feature columns of a CSV or Parquet data file as a float64 matrix, categorical columns as
integer codes (:mod:`gbfs.data.reading.files`).  float64, the booster's own dtype, keeps every value of the
file (float32 would round integers above 2^24 and overflow above 3.4e38).

``categorical`` says which columns are categorical: ``"auto"`` the text columns, ``"none"`` none
(a text column is then an error that says how to encode it), or a list of column names (text
columns, or numeric ones already holding non-negative integer codes).  A text column's codes
index its levels -- the distinct values of the train and test files together, sorted -- so both
files share them; NaN stays NaN (a missing value).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

_SHOWN = 5


def text_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]


def check_categorical(categorical) -> str | tuple[str, ...]:
    """``"auto"``, ``"none"`` or a tuple of column names; a ValueError names the argument."""
    if isinstance(categorical, str):
        if categorical in ("auto", "none"):
            return categorical
        raise ValueError(f"categorical must be 'auto', 'none' or a list of column names, got {categorical!r}")
    if isinstance(categorical, Sequence) and all(isinstance(c, str) for c in categorical):
        if len(set(categorical)) != len(categorical):
            raise ValueError(f"categorical lists a column twice: {list(categorical)}")
        return tuple(categorical)
    raise ValueError(f"categorical must be 'auto', 'none' or a list of column names, got {categorical!r}")


def encode(train: pd.DataFrame, test: pd.DataFrame | None, categorical, path) -> tuple:
    """``(X, X_test, categorical_columns, categories)``: float64 matrices (``X_test`` None without a
    test frame), the indices of the categorical columns, and per categorical column its levels
    (a tuple of str) or None (integer codes given as such).

    Raises
    ------
    ValueError
        A text column not declared categorical, a named column that does not exist, a numeric
        categorical column holding other than non-negative integers.
    """
    categorical = check_categorical(categorical)
    names = list(train.columns)
    text = text_columns(train) + [c for c in (text_columns(test) if test is not None else [])
                                  if c not in text_columns(train)]
    if categorical == "auto":
        chosen = [c for c in names if c in text]
    elif categorical == "none":
        chosen = []
    else:
        unknown = [c for c in categorical if c not in names]
        if unknown:
            raise ValueError(f"{path}: categorical names columns {unknown} that are not feature columns "
                             f"(the features are {names[:_SHOWN]}{' ...' if len(names) > _SHOWN else ''})")
        chosen = [c for c in names if c in categorical]
    left = [c for c in text if c not in chosen]
    if left:
        example = train[left[0]].dropna()
        seen = f" (e.g. {example.iloc[0]!r} in {left[0]!r})" if len(example) else ""
        raise ValueError(f"{path}: text (non-numeric) feature columns {left[:_SHOWN]}"
                         f"{' ...' if len(left) > _SHOWN else ''}{seen}; declare them categorical "
                         f"(categorical=auto, or a list of names: dataset.categorical=[...] in the harness) "
                         f"or encode them as numbers first (e.g. pandas.get_dummies(df, columns=[...]))")
    frames = [train] if test is None else [train, test]
    levels = []
    for c in chosen:
        if c in text:
            values = pd.concat([f[c] for f in frames]).dropna().astype(str)
            levels.append(tuple(sorted(set(values))))
        else:
            for f, label in zip(frames, ("path", "test_path")):
                _check_codes(f[c], c, path if label == "path" else "the test file")
            levels.append(None)
    out = [_matrix(f, chosen, levels) for f in frames]
    return out[0], (out[1] if test is not None else None), [names.index(c) for c in chosen], levels


def _matrix(df: pd.DataFrame, chosen: list[str], levels: list) -> np.ndarray:
    df = df.copy(deep=False)
    for c, lv in zip(chosen, levels):
        if lv is not None:
            codes = pd.Index(lv).get_indexer(df[c].astype(str)).astype(np.float64)
            codes[df[c].isna().to_numpy() | (codes < 0)] = np.nan
            df[c] = codes
    return df.to_numpy(dtype=np.float64, na_value=np.nan)


def _check_codes(col: pd.Series, name: str, where) -> None:
    values = col.to_numpy(dtype=np.float64, na_value=np.nan)
    known = values[~np.isnan(values)]
    bad = known[(known < 0) | (known != np.floor(known)) | (known >= 2**24)]
    if bad.size:
        raise ValueError(f"{where}: categorical column {name!r} must hold integer codes in [0, 2^24) or "
                         f"text, found {bad[0]!r}")


def pack(categorical: list[int], levels: list) -> dict:
    """The categorical columns and levels as cacheable arrays (no object arrays)."""
    sizes = [-1 if lv is None else len(lv) for lv in levels]
    flat = [v for lv in levels if lv is not None for v in lv]
    return {"categorical": np.asarray(categorical, dtype=np.int64),
            "category_sizes": np.asarray(sizes, dtype=np.int64),
            "category_levels": np.asarray(flat, dtype=str)}


def unpack(arrays: dict) -> tuple[tuple[int, ...], tuple | None]:
    """``(categorical, categories)`` of :func:`pack`'s arrays (``categories`` None when no column is
    categorical)."""
    cols = tuple(int(j) for j in arrays["categorical"])
    if not cols:
        return (), None
    flat, out, k = [str(v) for v in arrays["category_levels"]], [], 0
    for size in arrays["category_sizes"]:
        out.append(None if size < 0 else tuple(flat[k:k + size]))
        k += max(int(size), 0)
    return cols, tuple(out)
