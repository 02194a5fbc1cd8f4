"""Multitask datasets from multiclass data: task ``t`` is "class ``c_t`` vs the rest" on all rows.

The input is an ``.npz`` file with arrays ``X`` (rows x features) and ``y`` (one class label per
row), optionally ``feature_names`` and ``class_names`` (the name of the ``k``-th smallest label).
Each task sees every row, so the rows of a split are stacked once per task: ``X`` repeats the
rows ``T`` times, ``task`` says which task a copy belongs to and ``y`` is 1 where the row's class
is that task's class.  Stacking after splitting keeps the copies of one row in the same split, so
no task is scored on a row another task was fitted on.

The split is drawn once on the original rows, stratified by "which task's class, or none", hence
stratified by the label of every task: ``test_fraction`` of the rows for test, then
``val_fraction`` of the rest for validation (``gbfs.data.load_dataset`` passes its own), seeded.

Registered names (:data:`OVR_DATASETS`): ``isolet_ovr`` (Isolet, 1560 x 617, 26 letters; the
first 5 letters by default), ``tox171_ovr`` (TOX-171, 171 x 5748, 4 classes; all of them) and
``ovr`` (any file: ``path`` is required).  Without ``path`` a registered file is looked for in
``$GBFS_SHARED_DATA``.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from .formats import FormatError
from .synthetic.base import check_int

ENV_SHARED_DATA = "GBFS_SHARED_DATA"
#: name -> (file name looked for in $GBFS_SHARED_DATA, default number of tasks: None = every class)
OVR_DATASETS: dict[str, tuple[str | None, int | None]] = {
    "isolet_ovr": ("isolet.npz", 5),
    "tox171_ovr": ("tox171.npz", None),
    "ovr": (None, None),
}


def one_vs_rest(X: np.ndarray, labels: np.ndarray, classes: Sequence) -> tuple[np.ndarray, np.ndarray,
                                                                               np.ndarray]:
    """Stack ``X`` once per class of ``classes``: the multitask form of one-vs-rest.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    labels : ndarray of shape (n,)
        The class of each row.
    classes : sequence
        The class of each task, in task order.

    Returns
    -------
    X_stacked : ndarray of shape (T * n, d)
        ``X`` repeated ``T`` times, task-major (the rows of task 0 first).
    y : ndarray of int64, shape (T * n,)
        1 where the row's class is its task's class.
    task : ndarray of int64, shape (T * n,)
        The task of each stacked row: its position in ``classes``.
    """
    X, labels = np.asarray(X), np.asarray(labels)
    T = len(classes)
    y = np.concatenate([(labels == c).astype(np.int64) for c in classes]) if T else np.empty(0, np.int64)
    task = np.repeat(np.arange(T, dtype=np.int64), len(labels))
    return np.tile(X, (T, 1)), y, task


def resolve_path(name: str, path: str | os.PathLike | None) -> Path:
    """The file of ``name``: ``path``, else the registered file in ``$GBFS_SHARED_DATA``.

    Raises
    ------
    FileNotFoundError
        Naming the path looked at and how to give another one.
    """
    file = OVR_DATASETS[name][0]
    if path is None:
        folder = os.environ.get(ENV_SHARED_DATA)
        if file is None or folder is None:
            what = "an .npz file with arrays X and y" if file is None else f"{file}"
            raise FileNotFoundError(f"one-vs-rest dataset {name!r}: no path given; pass path= (the harness: "
                                    f"dataset.kwargs.path=...) to {what}, or set ${ENV_SHARED_DATA} to the "
                                    f"folder holding it")
        path = Path(folder) / file
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"one-vs-rest dataset {name!r}: no file {path} (give another with "
                                f"dataset.kwargs.path=..., or set ${ENV_SHARED_DATA} to the folder holding "
                                f"{file or 'it'}; the file is an .npz with arrays X and y)")
    return path


def read_npz(path: Path, dtype=np.float32, strict_names: bool = False) -> tuple[np.ndarray, np.ndarray,
                                                                                list[str], dict]:
    """``(X, labels, feature_names, class_names)`` of a multiclass ``.npz``; ``ValueError`` naming the
    file on a missing or malformed array, :class:`~gbfs.data.formats.FormatError` on a truncated or
    corrupt file.

    ``dtype`` is that of ``X`` (None: as stored).  ``feature_names`` of another length than ``X``'s
    width are replaced by ``f0, f1, ...``, or with ``strict_names`` refused, as are duplicates.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in ("X", "y") if k not in z.files]
            if missing:
                raise ValueError(f"{path}: no array {missing} (it has {z.files}); expected X (rows x "
                                 f"features) and y (a class per row)")
            X, labels = np.asarray(z["X"], dtype=dtype), np.asarray(z["y"])
            names = [str(s) for s in z["feature_names"]] if "feature_names" in z.files else None
            class_names = [str(s) for s in z["class_names"]] if "class_names" in z.files else None
    except ValueError as exc:
        if str(exc).startswith(str(path)) or "allow_pickle" in str(exc):
            raise
        raise _corrupt(path, exc) from exc   # numpy's "cannot reshape" / "EOF" of a cut member
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise _corrupt(path, exc) from exc
    if X.ndim != 2 or labels.ndim != 1 or len(labels) != len(X):
        raise ValueError(f"{path}: X must be 2-D and y 1-D with one label per row; got X {X.shape}, "
                         f"y {labels.shape}")
    if strict_names and names is not None:
        if len(names) != X.shape[1]:
            raise ValueError(f"{path}: feature_names has {len(names)} names for the {X.shape[1]} columns of "
                             f"X; give one name per column (or no feature_names: f0, f1, ...)")
        if len(set(names)) != len(names):
            dups = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"{path}: feature_names has duplicate names: {', '.join(map(repr, dups[:10]))}; "
                             f"every column needs its own name")
    if names is None or len(names) != X.shape[1]:
        names = [f"f{j}" for j in range(X.shape[1])]
    found = np.unique(labels)
    by_class = {} if class_names is None or len(class_names) != len(found) else \
        {c.item(): n for c, n in zip(found, class_names)}
    return X, labels, names, by_class


def _corrupt(path: Path, exc: BaseException) -> FormatError:
    return FormatError(f"{path}: cannot read this npz file: it is truncated or corrupt "
                       f"({type(exc).__name__}: {exc}); copy or write it again")


def _classes(path: Path, labels: np.ndarray, n_tasks: int | None, classes: Sequence | None) -> list:
    found = np.unique(labels)
    if classes is not None:
        wanted = np.asarray(list(classes), dtype=labels.dtype)
        unknown = sorted(set(wanted.tolist()) - set(found.tolist()))
        if unknown or len(wanted) == 0 or len(set(wanted.tolist())) != len(wanted):
            raise ValueError(f"{path}: classes must be distinct labels of y {found.tolist()[:30]}; got "
                             f"{list(classes)}")
        return wanted.tolist()
    if n_tasks is None:
        return found.tolist()
    n = check_int("n_tasks", n_tasks, 1)
    if n > len(found):
        raise ValueError(f"{path}: n_tasks={n} but y has only {len(found)} classes")
    return found[:n].tolist()


def load(name: str, *, path: str | os.PathLike | None = None, n_tasks: int | None = -1,
         classes: Sequence | None = None, test_fraction: float = 0.2, val_fraction: float = 0.2,
         seed: int = 0, scale: float = 1.0) -> dict:
    """Load a multiclass ``.npz`` as one-vs-rest tasks, split into train / validation / test.

    Parameters
    ----------
    name : str
        A key of :data:`OVR_DATASETS`.
    path : path, optional
        The ``.npz`` file (default: the registered file in ``$GBFS_SHARED_DATA``).
    n_tasks : int or None
        Tasks for the first ``n_tasks`` classes in sorted order; None: every class; -1 (the
        default): the registered default of ``name``.
    classes : sequence, optional
        The tasks' classes, in task order (overrides ``n_tasks``).
    test_fraction, val_fraction : float in (0, 1)
        Shares of the rows for test, and of the remaining rows for validation.
    seed : int
        Seed of the split (and of ``scale``'s subsample).
    scale : float in (0, 1]
        Keep a seeded stratified share of the rows first, for quick runs.

    Returns
    -------
    dict
        The fields of :class:`gbfs.data.Dataset` (``X_train``, ``y_train``, ``task_train``, ...,
        ``feature_names``, ``task_names``, ``source``).
    """
    if name not in OVR_DATASETS:
        raise ValueError(f"name must be one of {sorted(OVR_DATASETS)}, got {name!r}")
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) \
            or not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}")
    if scale > 1:
        raise ValueError(f"scale must be in (0, 1] for the one-vs-rest dataset {name!r} (a share of its "
                         f"rows), got {scale}")
    file = resolve_path(name, path)
    X, labels, feature_names, class_names = read_npz(file)
    chosen = _classes(file, labels, OVR_DATASETS[name][1] if n_tasks == -1 else n_tasks, classes)
    # one stratum per task's class and one for every other class: each task's label is stratified
    strata = np.full(len(labels), -1, dtype=np.int64)
    for t, c in enumerate(chosen):
        strata[labels == c] = t
    rows = np.arange(len(labels))
    if scale < 1:
        rows, _ = train_test_split(rows, train_size=scale, random_state=seed, stratify=strata)
    rest, test = train_test_split(rows, test_size=test_fraction, random_state=seed, stratify=strata[rows])
    train, val = train_test_split(rest, test_size=val_fraction, random_state=seed, stratify=strata[rest])
    out = {"feature_names": feature_names, "source": str(file),
           "task_names": tuple(class_names.get(c, str(c)) for c in chosen)}
    for split, idx in (("train", train), ("val", val), ("test", test)):
        idx = np.sort(idx)
        out[f"X_{split}"], out[f"y_{split}"], out[f"task_{split}"] = one_vs_rest(X[idx], labels[idx], chosen)
    return out
