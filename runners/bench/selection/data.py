"""Data sets of the feature-selection benchmark (:mod:`runners.bench.selection.suite`), as binary ``(X, y)``.

Each loader returns the whole data set (the benchmark draws its own seeded splits) or raises
:class:`FileNotFoundError` when the data is not on this machine, which the benchmark reports and
skips.  Binary targets of the multi-class sets:

* ``isolet`` (``<data-dir>/isolet.npz``, arrays ``X``, ``y`` with the letters 1..26): positive =
  the letters A-M (``y <= 13``), negative = N-Z.
* ``tox171`` (``<data-dir>/tox171.npz``): positive = the largest class (ties: the smallest label),
  negative = the rest.
* ``digits`` (scikit-learn): positive = digits 5-9.
* ``breast_cancer`` (scikit-learn): scikit-learn's labels (1 = benign).
* ``madelon``: NIPS 2003's Madelon design rebuilt with scikit-learn (the real set is not
  redistributed here): ``make_classification(n_samples=2600, n_features=500, n_informative=5,
  n_redundant=15, n_repeated=0, n_clusters_per_class=16, flip_y=0.01, class_sep=1.0,
  hypercube=True, shuffle=True, random_state=0)`` -- 5 informative features whose 32 Gaussian
  clusters sit on the vertices of a 5-dimensional hypercube (16 per class), 15 linear combinations
  of them and 480 probes.
* ``gisette_like``, ``epsilon_like``, ``flight_like``: the offline stand-ins of
  :mod:`gbfs.data.synthetic.generators`, shrunk to about 2500-2800 rows and 500-600 features
  (:data:`STAND_IN_SIZES`), with their train, validation and test rows merged back into one set.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, make_classification

from gbfs.data import load_dataset

#: ``load_dataset`` arguments of each stand-in: gisette_like 2800 x 500, epsilon_like 2500 x 500,
#: flight_like 2500 x ~590 (its one-hot width depends on the levels present)
STAND_IN_SIZES = {"gisette_like": {"scale": 0.4, "feature_scale": 0.1},
                  "epsilon_like": {"scale": 0.025, "feature_scale": 0.25},
                  "flight_like": {"scale": 0.0125}}

MADELON = dict(n_samples=2600, n_features=500, n_informative=5, n_redundant=15, n_repeated=0,
               n_clusters_per_class=16, flip_y=0.01, class_sep=1.0, hypercube=True, shuffle=True,
               random_state=0)


def default_data_dir() -> Path:
    """``$GBFS_SHARED_DATA``, else ``<repo>/../shared/data``."""
    env = os.environ.get("GBFS_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[3].parent / "shared" / "data"


def _npz(data_dir: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    path = Path(data_dir) / f"{name}.npz"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (set --data-dir or $GBFS_SHARED_DATA)")
    with np.load(path) as arrays:
        return np.asarray(arrays["X"], dtype=np.float64), np.asarray(arrays["y"])


def all_classes(name: str, data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of a real data set with its original labels (Isolet's 26 letters, TOX-171's 4
    classes, digits' 10); :data:`DATASETS` derive binary tasks from them."""
    if name == "digits":
        return load_digits(return_X_y=True)
    return _npz(data_dir, name)


def isolet(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    X, y = _npz(data_dir, "isolet")
    return X, (y <= 13).astype(np.int64)


def tox171(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    X, y = _npz(data_dir, "tox171")
    labels, counts = np.unique(y, return_counts=True)
    return X, (y == labels[np.argmax(counts)]).astype(np.int64)  # argmax: the first (smallest) on ties


def breast_cancer(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    return load_breast_cancer(return_X_y=True)


def digits(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_digits(return_X_y=True)
    return X, (y >= 5).astype(np.int64)


def madelon(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    return make_classification(**MADELON)


def _stand_in(name: str) -> Callable[[Path], tuple[np.ndarray, np.ndarray]]:
    def load(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
        ds = load_dataset(name, seed=0, **STAND_IN_SIZES[name])
        X = np.concatenate([ds.X_train, ds.X_val, ds.X_test]).astype(np.float64)
        return X, np.concatenate([ds.y_train, ds.y_val, ds.y_test]).astype(np.int64)

    return load


DATASETS: dict[str, Callable[[Path], tuple[np.ndarray, np.ndarray]]] = {
    "breast_cancer": breast_cancer, "digits": digits, "isolet": isolet, "tox171": tox171,
    "madelon": madelon, **{name: _stand_in(name) for name in STAND_IN_SIZES}}


def load(name: str, data_dir: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """``(X, y)`` of data set ``name``, or None (with a printed note) if it is not available."""
    try:
        return DATASETS[name](data_dir)
    except FileNotFoundError as e:
        print(f"skipping {name}: {e}", flush=True)
        return None
