"""What runs on one partition before a fit: its checks, its labels and its share of the binning sample.

Each function takes one partition's arrays and runs where the partition lives (``client.map``);
only small summaries come back: counts, labels, a fixed-size row sample.
"""

from __future__ import annotations

import numpy as np

from .. import validation as V
from ..booster.kernels._types import MAX_TARGET_SCALE


def sample_sizes(lengths: list[int], bin_subsample: int | None) -> list[int]:
    """Rows each partition gives to the binning sample: all of them when the data has at most
    ``bin_subsample`` rows (the bins are then those of one process on the same rows), otherwise
    ``bin_subsample`` split in proportion to the partitions' lengths (largest remainders), so the
    sample depends on the partitioning only, never on timing."""
    n = int(sum(lengths))
    if bin_subsample is None or n <= bin_subsample:
        return list(lengths)
    exact = np.asarray(lengths, dtype=np.float64) * bin_subsample / n
    sizes = np.floor(exact).astype(np.int64)
    extra = bin_subsample - int(sizes.sum())
    sizes[np.argsort(-(exact - sizes), kind="stable")[:extra]] += 1
    return [int(s) for s in sizes]


def inspect(X, y, size: int, seed: int, index: int, classifier: bool) -> dict:
    """One partition's checks and summaries: row count, labels (a classifier's distinct labels; a
    regressor's largest ``|y|``) and ``size`` rows drawn with the seed ``[seed, 5, index]``."""
    X = np.asarray(X)
    where = f"partition {index}"
    if X.dtype.kind not in "biuf":
        raise ValueError(f"X must be numeric, got dtype {X.dtype} in {where}")
    if X.dtype.kind in "biu":
        X = X.astype(np.float64)
    if np.isinf(X).any():
        raise ValueError(f"X: Input X contains infinity ({where}); NaN is allowed, +-inf is not")
    y = np.asarray(y)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows in {where}")
    out = {"n": int(X.shape[0])}
    if classifier:
        out["labels"] = V.check_labels(y, "y") if y.size else y[:0]
    else:
        y = V.regression_target(y, "y")
        out["max_abs_y"] = float(np.max(np.abs(y))) if y.size else 0.0
    if size >= X.shape[0]:
        out["sample"] = X
    else:
        rng = np.random.default_rng([seed, 5, index])
        out["sample"] = X[np.sort(rng.choice(X.shape[0], size, replace=False))]
    return out


def check_target_scale(max_abs_y: float, n_rows: int) -> None:
    """A regression target small enough for float64 sums of squared residuals over all rows."""
    if max_abs_y * n_rows > MAX_TARGET_SCALE:
        raise ValueError(f"y is too large for float64 arithmetic: max |y| = {max_abs_y:.3g} over "
                         f"{n_rows} rows, but max |y| * n_rows must be at most {MAX_TARGET_SCALE:.0e} "
                         "(split gains square sums of residuals); rescale y")


def encode(y, classes) -> np.ndarray:
    """A partition's labels as the estimator encodes them: 0/1 (``classes[1]`` is 1) for a
    classifier (``classes`` given), float64 for a regressor."""
    y = np.asarray(y)
    if classes is None:
        return y.astype(np.float64)
    return (y == classes[1]).astype(np.float64)
