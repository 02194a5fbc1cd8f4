"""Input and parameter validation, done in Python before any numba kernel runs.

numba kernels cannot raise helpful errors, so every argument is checked here and
every error names the argument and what was wrong with it.
"""

from __future__ import annotations

import numbers
import os
import sys
import warnings

import numpy as np
import scipy.sparse
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import column_or_1d

from .booster.kernels._types import MAX_TARGET_SCALE

GROUP_TEST_SCOPES = ("node", "tree")


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


def check_bool(name: str, value) -> bool:
    """``value`` as a bool; anything but True/False (numpy's included) is refused naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


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


def labels_from_json(obj, what: str) -> np.ndarray:
    """A model file's ``{"dtype", "values"}`` field (classes, tasks, categories) as the 1-D array
    it was saved from, or a ValueError naming ``what``.

    Saving writes ``array.dtype.str`` and ``array.tolist()``, so the dtype must hold every value
    exactly: a narrower string dtype would truncate the labels (``"<U1"``: ``"neg"`` -> ``"n"``),
    a bytes, bool or float dtype would turn them into other labels.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("values"), list):
        raise ValueError(f"{what} must be an object with a list 'values'")
    listed = obj["values"]
    try:
        values = np.asarray(listed, dtype=np.dtype(obj.get("dtype")))
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"{what}: cannot read {listed!r:.80} as dtype {obj.get('dtype')!r} ({e})") from e
    back = values.tolist() if values.ndim == 1 else None
    if back is None or len(back) != len(listed) or any(
            type(a) is not type(b) or a != b for a, b in zip(back, listed)):
        raise ValueError(f"{what}: dtype {obj['dtype']!r} does not hold the values {listed!r:.80} "
                         "exactly (a model file holds them as saved)")
    return values


def reject_non_numeric(X, name="X", categorical: bool = True):
    """Refuse string/object columns with a TypeError naming them (before any conversion).

    ``categorical``: the caller splits on categories (``categorical_features=`` or the pandas
    ``category`` dtype), so the message points there rather than to a one-hot encoding.
    """
    if hasattr(X, "dtypes") and hasattr(X, "columns"):  # pandas DataFrame
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        bad = [str(c) for c, dt in X.dtypes.items() if not (is_numeric_dtype(dt) or is_bool_dtype(dt))]
        if bad and categorical:
            raise TypeError(f"{name} has non-numeric columns {bad[:10]}; to split on their values, "
                            f"fit with categorical_features={bad[:10]!r} (or give them the pandas "
                            "'category' dtype), else encode them as numbers")
        if bad:
            raise TypeError(f"{name} has non-numeric columns {bad[:10]}; encode them as numbers "
                            "(e.g. one-hot)")
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


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first caller outside the gbfs package.

    A fixed ``stacklevel`` points at whichever gbfs frame happens to be that many calls up (the
    estimators reach the same check through ``fit``, a selection path or a refit); walking the
    stack names the user's line instead, as ``skip_file_prefixes`` does on Python 3.12+.
    """
    frame, level = sys._getframe(1), 2  # level 2: the caller of warn_user
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


# -- targets ---------------------------------------------------------------------------------------

def target_array(y, owner: str, n_rows: int, name: str = "y") -> np.ndarray:
    """``y`` as a 1-D array of ``n_rows`` entries; errors name ``name`` (``owner``: the estimator).

    numpy turns a list mixing numbers and strings into strings; such a list is kept as objects so
    that :func:`binary_classes` refuses the mix instead of relabelling the numbers.
    """
    if y is None:
        raise ValueError(f"{owner} requires {name} to be passed, but the target {name} is None")
    arr = np.asarray(y)
    if arr.dtype.kind == "U" and not isinstance(y, np.ndarray):
        obj = np.asarray(y, dtype=object)
        if obj.shape == arr.shape and not all(isinstance(v, str) for v in obj.flat):
            arr = obj
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = column_or_1d(arr, warn=True)  # DataConversionWarning, as scikit-learn estimators do
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.shape[0] != n_rows:
        raise ValueError(f"{name} has {arr.shape[0]} entries but X has {n_rows} rows")
    return arr


def _check_object_labels(y: np.ndarray, name: str) -> None:
    """Labels of an object array must be all strings or all numbers.  scikit-learn's
    ``type_of_target`` calls any object array that does not start with a string "unknown" and its
    ``unique_labels`` refuses a mix only after sorting it, so the check is made here, in its words."""
    kinds = {"string" if isinstance(v, str) else "number" if isinstance(v, numbers.Number)
             else type(v).__name__ for v in y.flat}
    if {"string", "number"} <= kinds:
        raise ValueError(f"{name}: Mix of label input types (string and number)")
    other = kinds - {"string", "number"}
    if other:
        raise ValueError(f"{name}: Unknown label type: labels must be strings or numbers, got "
                         f"{sorted(other)}")


def check_labels(y: np.ndarray, name: str = "y") -> np.ndarray:
    """``y``'s distinct labels, sorted; refuses label types scikit-learn classifiers refuse."""
    if y.dtype == object:
        _check_object_labels(y, name)
    try:
        kind = type_of_target(y, input_name=name)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from e
    if kind not in ("binary", "multiclass", "continuous", "unknown"):  # "unknown": numbers as objects
        raise ValueError(f"{name}: Unknown label type: {kind}")
    classes = np.unique(y)
    if kind == "continuous" and classes.shape[0] > 2:  # two float labels are fine
        raise ValueError(f"Unknown label type: continuous. {name} of GBFSClassifier must hold class "
                         "labels; use GBFSRegressor for a real-valued target")
    return classes


def _two_or_more(y: np.ndarray, name: str, need: str) -> np.ndarray:
    """``y``'s classes (:func:`check_labels`), refusing a single class with ``need`` as the reason."""
    classes = check_labels(y, name)
    if classes.shape[0] < 2:
        raise ValueError(f"{name} has only one class ({classes.tolist()}); {need}")
    return classes


def class_labels(y: np.ndarray, name: str = "y") -> np.ndarray:
    """The classes of a classification target (sorted): at least two."""
    return _two_or_more(y, name, "a classifier needs at least two")


def binary_classes(y: np.ndarray, name: str = "y") -> np.ndarray:
    """The two classes of a binary target (sorted; ``classes[1]`` is the positive class)."""
    classes = _two_or_more(y, name, "GBFSClassifier needs exactly two classes")
    if classes.shape[0] > 2:
        raise ValueError(f"Only binary classification is supported. {name} has {classes.shape[0]} "
                         f"classes ({classes[:10].tolist()}); GBFSClassifier needs exactly two")
    return classes


def regression_target(y: np.ndarray, name: str = "y") -> np.ndarray:
    """A regression target as float64: numeric, finite, and small enough for float64 sums of
    squared residuals (``n_rows * max|y| <= MAX_TARGET_SCALE``)."""
    if y.dtype.kind in "USV" or (y.dtype == object and any(isinstance(v, (str, bytes)) for v in y.flat)):
        raise ValueError(f"{name} must be numeric, got strings (dtype {y.dtype})")
    warn_inexact_integers(y, name)
    try:
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be numeric: {e}") from e
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{name} contains NaN or infinity")
    top = float(np.max(np.abs(y))) if y.size else 0.0
    if top * y.shape[0] > MAX_TARGET_SCALE:
        raise ValueError(f"{name} is too large for float64 arithmetic: max |{name}| = {top:.3g} over "
                         f"{y.shape[0]} rows, but max |{name}| * n_rows must be at most "
                         f"{MAX_TARGET_SCALE:.0e} (split gains square sums of residuals); rescale {name}")
    return y


# -- integers beyond float64's exact range -----------------------------------------------------------

_EXACT = 2 ** 53  # every integer of at most this magnitude is a float64


def _n_inexact(a: np.ndarray) -> int:
    """How many values of the integer array ``a`` float64 rounds."""
    if a.size == 0 or (a.max() <= _EXACT and (a.dtype.kind == "u" or a.min() >= -_EXACT)):
        return 0
    if a.dtype.kind == "u":
        mag = a[a > _EXACT].astype(np.uint64)
    else:
        big = a.astype(np.int64, copy=False)
        big = big[(big > _EXACT) | (big < -_EXACT)]
        neg = big < 0  # |v| as uint64, without overflowing at -2**63
        mag = np.where(neg, -(big + 1), big).astype(np.uint64) + neg.astype(np.uint64)
    # v > 2**53 is exact iff it is a multiple of 2**(bit_length - 53); frexp of the rounded float
    # gives the bit length, or one more when the rounding carried, which only happens to inexact v
    # and then still leaves a remainder
    _, exp = np.frexp(mag.astype(np.float64))
    step = np.left_shift(np.uint64(1), (exp - 53).astype(np.uint64))
    return int(np.count_nonzero(mag % step))


def warn_inexact_integers(X, name: str = "X") -> None:
    """Warn (naming ``name``) when integer data holds values float64 cannot represent exactly: the
    learner works in float64, so such values would silently collapse onto their neighbours."""
    if hasattr(X, "dtypes") and hasattr(X, "select_dtypes"):  # pandas DataFrame
        ints = X.select_dtypes(include="integer")
        blocks = [ints.loc[:, ints.dtypes == dt].to_numpy(dtype=getattr(dt, "numpy_dtype", dt), na_value=0)
                  for dt in set(ints.dtypes)]
    elif isinstance(X, np.ndarray):
        blocks = [X]
    elif scipy.sparse.issparse(X):  # the stored values (any format: DOK and LIL have no .data)
        blocks = [X.tocoo().data]
    else:
        try:
            blocks = [np.asarray(X)]
        except (TypeError, ValueError):  # left to the conversion that follows, whose error is clearer
            return
    n = sum(_n_inexact(b) for b in blocks if b.dtype.kind in "iu")
    if n:
        warn_user(f"{name} has {n} integer value{'s' if n > 1 else ''} beyond +-2**53 that float64 "
                  "cannot represent exactly: they are rounded to the nearest float64 (subtract an "
                  "offset or rescale them if their exact values matter)")


def check_max_cost(max_cost: float | None, costs: np.ndarray | None, bags: np.ndarray | None,
                   d: int) -> None:
    """Refuse a cost budget no feature fits in (a constant model nobody asked for); warn when it
    can never bind (it covers the dearest way to open every bag)."""
    if max_cost is None or d == 0:
        return
    costs = np.ones(d) if costs is None else costs
    if max_cost < costs.min():
        raise ValueError(f"max_cost={max_cost:g} is below the cost of every feature (the cheapest "
                         f"costs {costs.min():g}): no feature could be used")
    _, bag_of = np.unique(np.arange(d) if bags is None else bags, return_inverse=True)
    dearest = np.zeros(int(bag_of.max()) + 1)
    np.maximum.at(dearest, bag_of, costs)
    if max_cost >= dearest.sum():
        warn_user(f"max_cost={max_cost:g} covers every {'bag' if bags is not None else 'feature'} "
                  "of X: the budget never binds")
