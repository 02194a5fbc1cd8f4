"""Input and parameter validation, done in Python before any numba kernel runs.

numba kernels cannot raise helpful errors, so every argument is checked here and
every error names the argument and what was wrong with it.
"""

from __future__ import annotations

import numbers

import numpy as np

METHODS = ("gbfs", "agbm", "gtgbm", "topk")
GROUP_TEST_SCOPES = ("node", "tree")
CRITERIA = ("sse", "newton")
LEAF_ESTIMATES = ("mean", "newton")


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def check_int(name, value, low, allow_none=False):
    if value is None and allow_none:
        return None
    if not _is_int(value):
        raise TypeError(f"{name} must be an int{' or None' if allow_none else ''}, "
                        f"got {value!r} ({type(value).__name__})")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    return int(value)


def check_real(name, value, low=None, high=None, low_open=False, high_open=False, allow_none=False):
    if value is None and allow_none:
        return None
    if not _is_real(value):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (v >= high if high_open else v > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value!r}")
    return v


def check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_feature_vector(name, value, n_features, kind):
    """Validate ``feature_costs`` (kind='cost') or ``feature_bags`` (kind='bag')."""
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D with one entry per feature, got shape {arr.shape}")
    if arr.shape[0] != n_features:
        raise ValueError(f"{name} has {arr.shape[0]} entries but X has {n_features} features")
    if kind == "bag":
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integer bag ids, got dtype {arr.dtype}")
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        bad = int(np.flatnonzero(~np.isfinite(arr) | (arr < 0))[0])
        raise ValueError(f"{name} must be finite and >= 0; entry {bad} is {arr[bad]!r}")
    return arr


def reject_non_numeric(X, name="X"):
    """Refuse string/object columns with a TypeError naming them (before any conversion)."""
    if hasattr(X, "dtypes") and hasattr(X, "columns"):  # pandas DataFrame
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        bad = [str(c) for c, dt in X.dtypes.items() if not (is_numeric_dtype(dt) or is_bool_dtype(dt))]
        if bad:
            raise TypeError(f"{name} has non-numeric columns {bad[:10]}; encode them as numbers "
                            "(e.g. one-hot) before fitting")
        return
    # object arrays are left to sklearn's check_array, whose conversion error names the bad value
    if isinstance(X, np.ndarray) and X.dtype.kind in "USV":
        raise TypeError(f"{name} has dtype {X.dtype} (strings or raw bytes); pass numeric data")


def check_callbacks(callbacks):
    if callbacks is None:
        return []
    if callable(callbacks):
        callbacks = [callbacks]
    if not isinstance(callbacks, (list, tuple)):
        raise TypeError(f"callbacks must be a list of callables, got {type(callbacks).__name__}")
    callbacks = list(callbacks)
    for i, cb in enumerate(callbacks):
        if not callable(cb):
            raise TypeError(f"callbacks[{i}] is not callable: {cb!r}")
    return callbacks
