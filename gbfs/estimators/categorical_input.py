"""Which input columns are categorical, and their codes: what the estimators do with
``categorical_features`` before anything is binned.

A categorical column reaches the booster as non-negative integer codes (NaN: missing):

* a pandas ``category`` column (or a string/object column named in ``categorical_features``) is
  coded by the position of its value in the training categories, which the model keeps
  (``categories_``), so prediction maps values, never the codes of another frame: a category
  unseen in training is predicted like a missing value (as LightGBM does), but a value of another
  kind than the training categories (a number where they are strings, or the reverse) is refused,
  as it is a different encoding of the column, not an unseen category;
* a numeric column named in ``categorical_features`` must already hold such codes (as for
  LightGBM's ``categorical_feature``); any other value is refused, never rounded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse

#: largest code of an integer-coded categorical column (LightGBM's limit too)
MAX_CODE = 2**31 - 1


def _is_frame(X) -> bool:
    return hasattr(X, "dtypes") and hasattr(X, "columns")


def _is_category(dtype) -> bool:
    import pandas as pd

    return isinstance(dtype, pd.CategoricalDtype)


def _is_text(dtype) -> bool:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return not (is_numeric_dtype(dtype) or is_bool_dtype(dtype) or _is_category(dtype))


def resolve(X, categorical_features, name: str = "X") -> np.ndarray:
    """The indices of the categorical columns of ``X`` (sorted int64).

    ``categorical_features``: ``"auto"`` (the pandas ``category`` columns), ``None`` (none), a
    list of column indices or names, or a boolean mask with one entry per column.

    Raises
    ------
    ValueError, TypeError
        Naming ``categorical_features`` or the offending columns.
    """
    columns = [str(c) for c in X.columns] if _is_frame(X) else None
    category = ([j for j, dt in enumerate(X.dtypes) if _is_category(dt)] if columns is not None else [])
    if columns is None and (categorical_features is None or isinstance(categorical_features, str)):
        d = 0  # no column is categorical but by name: the caller's checks see the shape
    else:
        shape = getattr(X, "shape", None) or np.shape(np.asarray(X, dtype=object))
        if len(shape) != 2:
            raise ValueError(f"{name} must be 2-D to declare categorical_features, got shape {shape}")
        d = shape[1]
    if isinstance(categorical_features, str):
        if categorical_features != "auto":
            raise ValueError("categorical_features must be 'auto', None, a list of column indices or "
                             f"names, or a boolean mask; got {categorical_features!r}")
        return np.asarray(category, dtype=np.int64)
    if categorical_features is None:
        chosen = []
    else:
        chosen = _listed(categorical_features, d, columns)
    left_out = [columns[j] for j in category if j not in set(chosen)]
    if left_out:
        raise TypeError(f"{name} has category columns {left_out[:10]} that categorical_features="
                        f"{categorical_features!r} leaves out; list them too (or use 'auto')")
    return np.asarray(sorted(chosen), dtype=np.int64)


def _listed(spec, d: int, columns: list[str] | None) -> list[int]:
    values = list(spec.tolist() if isinstance(spec, np.ndarray) else spec) \
        if isinstance(spec, (Sequence, np.ndarray)) else None
    if values is None:
        raise TypeError("categorical_features must be 'auto', None, a list of column indices or names, "
                        f"or a boolean mask; got {type(spec).__name__}")
    if values and all(isinstance(v, (bool, np.bool_)) for v in values):
        if len(values) != d:
            raise ValueError(f"categorical_features as a boolean mask needs {d} entries (one per "
                             f"column), got {len(values)}")
        return [j for j, v in enumerate(values) if v]
    out = []
    for v in values:
        if isinstance(v, str):
            if columns is None:
                raise ValueError(f"categorical_features names column {v!r}, but X has no column names "
                                 "(pass a DataFrame, or column indices)")
            if v not in columns:
                raise ValueError(f"categorical_features names column {v!r}, which X does not have")
            out.append(columns.index(v))
        elif isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            if not -d <= v < d:
                raise ValueError(f"categorical_features holds column index {v}, outside [0, {d})")
            out.append(int(v) % d)
        else:
            raise TypeError(f"categorical_features must hold column indices or names, got {v!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"categorical_features lists a column twice: {list(values)!r}")
    return out


def fit_categories(X, features: np.ndarray) -> list:
    """The training categories of each categorical column: the values of a pandas ``category``
    (or text) column, ``None`` for an integer-coded one."""
    if not _is_frame(X):
        return [None] * len(features)
    out = []
    for j in features:
        col = X.iloc[:, j]
        if _is_category(col.dtype):
            out.append(np.asarray(col.cat.categories))
        elif _is_text(col.dtype):
            import pandas as pd

            out.append(np.asarray(pd.Categorical(col).categories))
        else:
            out.append(None)
    return out


def encode(X, features: np.ndarray, categories: list, name: str = "X"):
    """``X`` with its categorical columns as float codes (NaN: missing or unseen category); the
    input is never modified.  A DataFrame stays a DataFrame (its column names are kept).

    Raises
    ------
    TypeError
        If a column holds values of another kind than the categories it was fitted on (numbers for
        string categories, or the reverse), or is sparse while it was fitted on category values.
    """
    if len(features) == 0:
        return X
    if scipy.sparse.issparse(X):
        csc = X.tocsc()
        for j, cats in zip(features, categories):
            if cats is not None:  # a sparse column's implicit zeros have no category value
                raise TypeError(f"{name} is sparse, but column {j} was fitted on category values "
                                f"({_preview(cats)}); pass a DataFrame with those values")
            _check_codes(csc[:, [j]].toarray().ravel(), j, name)
        return X
    if _is_frame(X):
        X = X.copy(deep=False)
        for j, cats in zip(features, categories):
            col = X.iloc[:, j]
            if cats is not None:
                by_value = _is_category(col.dtype) or _is_text(col.dtype)
                values = np.asarray(col, dtype=object) if by_value else col.to_numpy()
                codes = _codes_of_values(values, cats, f"{name} column {X.columns[j]!r}")
            elif _is_category(col.dtype) or _is_text(col.dtype):
                raise TypeError(f"{name} column {X.columns[j]!r} holds {col.dtype} values, but the model "
                                "was fitted on integer codes for it")
            else:
                codes = _check_codes(col.to_numpy(dtype=np.float64, na_value=np.nan), j, name)
            X.isetitem(int(j), codes)
        return X
    X = np.asarray(X)
    if X.dtype.kind not in "iufb":
        return X  # the caller's numeric check names the problem
    out = None
    for j, cats in zip(features, categories):
        if cats is None:
            _check_codes(X[:, j].astype(np.float64), j, name)
            continue
        if out is None:
            out = X.astype(np.float64)  # a copy: the caller's array is never modified
        out[:, j] = _codes_of_values(X[:, j], cats, f"{name} column {j}")
    return X if out is None else out


#: pandas' inferred kinds of numeric values (``pandas.api.types.infer_dtype``)
_NUMERIC_KINDS = frozenset({"integer", "floating", "mixed-integer-float", "decimal", "integer-na"})


def _kind(values) -> str:
    """``"string"``, ``"numeric"``, ``"empty"`` (nothing but missing values) or pandas' inferred
    kind (``"mixed"``, ``"boolean"``, ``"bytes"``...) of non-missing ``values``."""
    import pandas as pd
    from pandas.api.types import infer_dtype

    values = np.asarray(values)
    values = values[~pd.isna(values)]
    if values.size == 0:
        return "empty"  # a float column of NaN only: missing values, not numbers
    kind = infer_dtype(values, skipna=True)
    return "numeric" if kind in _NUMERIC_KINDS else kind


def _preview(cats) -> str:
    values = np.asarray(cats).tolist()
    return ", ".join(repr(v) for v in values[:5]) + (", ..." if len(values) > 5 else "")


def _codes_of_values(values, cats, what: str) -> np.ndarray:
    """Each value's position in the training categories ``cats`` (NaN: missing or unseen).

    Values of another kind than the categories are refused: an integer in a column fitted on
    strings is not an unseen category but another encoding (say, the codes of some other frame),
    which would otherwise be predicted as missing without a word."""
    import pandas as pd

    fitted, given = _kind(cats), _kind(values)
    if fitted in ("string", "numeric") and given not in ("empty", fitted):
        raise TypeError(f"{what} holds {given} values, but the model was fitted on {fitted} categories "
                        f"of it ({_preview(cats)}); give values of that kind (one the model has not seen "
                        "is predicted as missing)")
    codes = pd.Index(cats).get_indexer(np.asarray(values, dtype=object)).astype(np.float64)
    codes[codes < 0] = np.nan
    return codes


def _check_codes(values: np.ndarray, j: int, name: str, n_categories: int | None = None) -> np.ndarray:
    """Integer codes in ``[0, MAX_CODE]`` (or NaN), else a ValueError naming column ``j``."""
    values = np.asarray(values, dtype=np.float64)
    known = values[~np.isnan(values)]
    bad = known[(known < 0) | (known > MAX_CODE) | (known != np.floor(known))]
    if bad.size:
        raise ValueError(f"{name} column {j} is categorical: its values must be integer codes in "
                         f"[0, {MAX_CODE}] or NaN, found {bad[0]!r} (declare text columns as pandas "
                         "'category', or encode the categories as integers)")
    if n_categories is not None and known.size and known.max() >= n_categories:
        raise ValueError(f"{name} column {j}: code {known.max():g} is not one of the {n_categories} "
                         "categories the model was fitted on")
    return values
