"""Real datasets that ship with scikit-learn (no download): the offline real-data checks.

``breast_cancer``: Wisconsin diagnostic breast cancer, 569 rows x 30 features, malignant = 1.
``digits``: the 8x8 handwritten digits, 1797 rows x 64 pixels, as the binary task "digit >= 5"
(balanced: 896 positive, 901 negative) -- the booster and the papers' tables are binary.

Neither has a published test split: :func:`bundled` holds out a seeded stratified ``TEST_FRACTION``
of the rows as the test split; :func:`gbfs.data.load_dataset` then splits validation off the rest.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

TEST_FRACTION = 0.25


def _breast_cancer():
    """Wisconsin diagnostic breast cancer (569 x 30), label 1 = malignant."""
    data = load_breast_cancer()
    # sklearn codes malignant as 0; 1 = malignant makes "positive" the finding
    return data.data, (data.target == 0).astype(np.int64), list(data.feature_names)


def _digits():
    """8x8 handwritten digits (1797 x 64 pixels), label 1 = digit >= 5."""
    data = load_digits()
    return data.data, (data.target >= 5).astype(np.int64), list(data.feature_names)


LOADERS = {"breast_cancer": _breast_cancer, "digits": _digits}


def bundled(name: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """``(X_train, y_train, X_test, y_test, feature_names)`` of a bundled dataset (float32 X).

    The test split is a stratified ``TEST_FRACTION`` of the rows drawn with ``seed``.
    """
    if name not in LOADERS:
        raise ValueError(f"name must be one of {sorted(LOADERS)}, got {name!r}")
    X, y, names = LOADERS[name]()
    tr, te = train_test_split(np.arange(len(y)), test_size=TEST_FRACTION, random_state=seed, stratify=y)
    tr, te = np.sort(tr), np.sort(te)
    X = X.astype(np.float32)
    return X[tr], y[tr], X[te], y[te], names
