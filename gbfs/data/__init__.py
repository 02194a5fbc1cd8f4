"""Datasets: download, verify, prepare and cache Gisette, Epsilon and Flight; synthetic stand-ins.

>>> from gbfs.data import load, load_dataset
>>> X, y, names = load("gisette_like", split="train", scale=0.1)     # offline, synthetic
>>> ds = load_dataset("gisette")          # downloads (once), verifies, prepares (once), splits
>>> ds.X_train, ds.X_val, ds.X_test, ds.feature_names

Real datasets (a manifest in ``datasets/``): ``gisette``, ``epsilon``, ``flight``.
Synthetic stand-ins (no download): ``gisette_like``, ``epsilon_like``, ``flight_like``,
``figure1``, ``multitask`` (see :mod:`gbfs.data.synthetic.generators`).  Real data bundled with
scikit-learn (no download): ``breast_cancer``, ``digits`` (see :mod:`gbfs.data.bundled`).
Multitask data from a multiclass ``.npz`` file, one task per class against the rest:
``isolet_ovr``, ``tox171_ovr``, ``ovr`` (see :mod:`gbfs.data.ovr`).  A data file of your own
(CSV, Parquet, LIBSVM, ``.npz``): ``load_dataset("file", path=..., target=...)`` (see
:mod:`gbfs.data.reading.files`).  The
validation split is ``val_fraction`` (20 %) of train, stratified by label (and task), drawn with
``seed``; the test split is used as published (bundled data: a seeded 25 % of the rows).  The
command line is ``python -m gbfs.data``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from numbers import Real
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from . import ovr
from .bundled import LOADERS as BUNDLED
from .bundled import bundled as _bundled
from .fetching.download import (
    ChecksumError,
    ContentError,
    DownloadError,
    LockFileError,
    RetryPolicy,
    file_status,
)
from .fetching.manifest import (
    ENV_DATA_DIR,
    ENV_MIRROR,
    DataRootError,
    Manifest,
    ManifestError,
    available_manifests,
    raw_dir,
    read_manifest,
)
from .formats import FormatError
from .ovr import OVR_DATASETS
from .prepare import CacheError, load_prepared
from .reading import files, ranking_files
from .synthetic.base import check_positive
from .synthetic.generators import GENERATORS

__all__ = ["Dataset", "load", "load_dataset", "list_datasets", "missing_raw_files", "read_dataset_manifest",
           "split_train_val", "BUNDLED", "CacheError", "ChecksumError", "ContentError", "DataRootError",
           "DownloadError",
           "FormatError", "LockFileError", "ManifestError", "RetryPolicy", "ENV_DATA_DIR", "ENV_MIRROR"]

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Dataset:
    """A dataset split into train / validation / test (float32 features; float64 for a data file of
    one's own, whose values are kept exactly as the file holds them).

    ``relevant`` holds the truly relevant columns of a synthetic stand-in (``None`` for real
    data); ``checksum`` says how the raw files were verified; ``task_*`` are the task ids
    of the multitask datasets (else ``None``), ``task_names`` their names in task-id order.
    ``class_names`` are the values labels 0 and 1 (or the class codes ``0 .. K-1``) stand for, where
    known (a data file: its target's values in sorted order, the positive class 1 last).  ``task``
    is ``binary``, ``multiclass`` (``y`` the class codes), ``regression`` (``y`` real), ``ranking``
    or ``multitask``.  ``categorical`` are the
    columns holding integer codes of categories (to split on sets of them: the estimators'
    ``categorical_features``), ``categories`` the category of each code, per such column.
    ``group_*`` are the query sizes of a ranking dataset (``task == "ranking"``; whole queries go
    to validation).
    """

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: list[str]
    task: str
    relevant: np.ndarray | None = None
    checksum: str = "synthetic"
    source: str = "synthetic"
    task_train: np.ndarray | None = None
    task_val: np.ndarray | None = None
    task_test: np.ndarray | None = None
    relevant_per_task: tuple[np.ndarray, ...] | None = None
    task_names: tuple[str, ...] | None = None
    class_names: tuple[str, ...] | None = None
    categorical: tuple[int, ...] = ()
    categories: tuple[tuple[str, ...], ...] | None = None
    group_train: np.ndarray | None = None
    group_val: np.ndarray | None = None
    group_test: np.ndarray | None = None

    def split(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        _check_split(split)
        return getattr(self, f"X_{split}"), getattr(self, f"y_{split}")


def list_datasets(root=None) -> dict[str, list[str]]:
    """``{"real": [...], "bundled": [...], "synthetic": [...], "one_vs_rest": [...], "file": ["file"]}``:
    the names :func:`load_dataset` accepts (real: a manifest to download; bundled: shipped with
    scikit-learn; one_vs_rest: a multiclass ``.npz`` given by ``path``; file: a data file of your own
    given by ``path``)."""
    return {"real": available_manifests(root), "bundled": sorted(BUNDLED), "synthetic": sorted(GENERATORS),
            "one_vs_rest": sorted(OVR_DATASETS), "file": [files.NAME]}


def load(name: str, split: str = "train", **kwargs) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(X, y, feature_names)`` of one split (``"train"``, ``"val"`` or ``"test"``).

    Keyword arguments are those of :func:`load_dataset`.  To use several splits, call
    :func:`load_dataset` once instead (this loads the whole dataset every time).
    """
    _check_split(split)
    ds = load_dataset(name, **kwargs)
    X, y = ds.split(split)
    return X, y, ds.feature_names


def load_dataset(name: str, *, root: str | os.PathLike | None = None, val_fraction: float = 0.2,
                 seed: int = 0, scale: float = 1.0, download: bool = True, mirror: str | None = None,
                 progress: bool = True, **generator_kwargs) -> Dataset:
    """Load ``name`` split into train / validation / test.

    Parameters
    ----------
    name : str
        A real dataset with a manifest (``gisette``, ``epsilon``, ``flight``), one bundled with
        scikit-learn (``breast_cancer``, ``digits``), a synthetic stand-in (``gisette_like``,
        ``epsilon_like``, ``flight_like``, ``figure1``, ``multitask``), one-vs-rest tasks of a
        multiclass ``.npz`` (``isolet_ovr``, ``tox171_ovr``, ``ovr``; :func:`gbfs.data.ovr.load`)
        or ``"file"``, a data file of your own (:func:`gbfs.data.reading.files.load`).
    root : path, optional
        Data root (default ``$GBFS_DATA_DIR``, else the repository's ``datasets/``); also where a
        data file's parsed arrays are cached.
    val_fraction : float in (0, 1)
        Share of the train rows held out for validation, stratified by label (and task).
    seed : int
        Seed of the validation split, of ``scale``'s subsample of real data, and of a synthetic
        generator.
    scale : float
        Synthetic: multiplies the generator's row counts.  Real data: keeps a seeded stratified
        ``scale`` share (0 < scale <= 1) of the train and test rows, for quick runs.
    download : bool
        Download missing raw files (else a missing file is an error naming where to put it).
    mirror : str, optional
        Base URL replacing the hosts of the manifest's URLs (default ``$GBFS_DATA_MIRROR``).
    **generator_kwargs
        Further arguments of a synthetic generator (e.g. ``n_features`` of ``figure1``), of a
        one-vs-rest dataset (``path``, ``n_tasks``, ``classes``, ``test_fraction``), or of
        ``"file"``: ``path``, ``target`` (the label column of a CSV or Parquet file), ``test_path``
        (a test file; else a seeded stratified ``test_fraction``, default 0.25, of the rows).

    Examples
    --------
    >>> ds = load_dataset("file", path="my.csv", target="label")   # doctest: +SKIP
    >>> ds.class_names         # label 0, label 1 (the positive class)   # doctest: +SKIP
    ('no', 'yes')
    """
    val_fraction, scale = _check_args(val_fraction, seed, scale)
    if name in GENERATORS:
        return _synthetic(name, val_fraction, seed, scale, generator_kwargs)
    if name in OVR_DATASETS:
        fields = ovr.load(name, val_fraction=val_fraction, seed=seed, scale=scale, **generator_kwargs)
        return Dataset(name=name, task="binary", checksum="not verified (a local file)", **fields)
    if name == files.NAME:
        return _file(val_fraction, seed, scale, root, generator_kwargs)
    if generator_kwargs:
        raise TypeError(f"unexpected arguments for the real dataset {name!r}: {sorted(generator_kwargs)}")
    if scale > 1:
        raise ValueError(f"scale must be in (0, 1] for the real dataset {name!r} (a share of its rows), "
                         f"got {scale}")
    if name in BUNDLED:
        X_tr, y_tr, X_te, y_te, names = _bundled(name, seed)
        checksum, source = "bundled with scikit-learn", "sklearn.datasets"
    else:
        manifest = read_dataset_manifest(name, root)
        path, arrays = load_prepared(manifest, root, download=download,
                                     mirror=mirror or os.environ.get(ENV_MIRROR), progress=progress)
        X_tr, y_tr, X_te, y_te = arrays["X_train"], arrays["y_train"], arrays["X_test"], arrays["y_test"]
        names = arrays["feature_names"].tolist()
        checksum, source = checksum_summary(manifest, root), str(path)
    if scale < 1.0:
        X_tr, y_tr = _subsample(X_tr, y_tr, scale, seed)
        X_te, y_te = _subsample(X_te, y_te, scale, seed + 1)
    tr, va = split_train_val(y_tr, val_fraction, seed)
    return Dataset(name=name, X_train=X_tr[tr], y_train=y_tr[tr], X_val=X_tr[va], y_val=y_tr[va],
                   X_test=X_te, y_test=y_te, feature_names=names, task="binary", checksum=checksum,
                   source=source)


def read_dataset_manifest(name: str, root=None) -> Manifest:
    """The manifest of a real dataset; an unknown name's error lists every name load_dataset takes."""
    try:
        return read_manifest(name, root)
    except ManifestError as err:
        if "no manifest" not in str(err):
            raise
        known = list_datasets(root)
        raise ManifestError(f"{err}; bundled with scikit-learn: {', '.join(known['bundled'])}; "
                            f"synthetic: {', '.join(known['synthetic'])}") from None


def missing_raw_files(name: str, root=None) -> list[Path]:
    """The raw files of the real dataset ``name`` that are not on disk: empty when it loads without
    downloading anything (its files may still fail verification when loaded)."""
    manifest = read_dataset_manifest(name, root)
    folder = raw_dir(manifest, root)
    return [folder / f for f in manifest.files if not (folder / f).is_file()]


def checksum_summary(manifest: Manifest, root=None) -> str:
    statuses = {file_status(manifest, f, root)[0] for f in manifest.files}
    if statuses == {"verified"}:
        return "verified against published sha256"
    return "not verified against a published checksum (sha256 recorded locally at first use)"


def split_train_val(y: np.ndarray, val_fraction: float = 0.2, seed: int = 0,
                    groups: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (train, val) row indices, stratified by ``y`` for labels (and by ``groups``)."""
    y = np.asarray(y)
    idx = np.arange(len(y))
    strata = y if y.dtype.kind in "iub" else None
    if groups is not None:
        strata = groups if strata is None else groups.astype(np.int64) * (int(y.max()) + 1) + y
    tr, va = train_test_split(idx, test_size=val_fraction, random_state=seed, stratify=strata)
    return np.sort(tr), np.sort(va)


def _subsample(X, y, scale, seed, stratify: bool = True):
    keep, _ = train_test_split(np.arange(len(y)), train_size=scale, random_state=seed,
                               stratify=y if stratify else None)
    keep = np.sort(keep)
    return X[keep], y[keep]


def _file(val_fraction, seed, scale, root, kwargs) -> Dataset:
    """A data file (:func:`gbfs.data.reading.files.load`), subsampled by ``scale`` and split as real data;
    a ranking file (``task="ranking"``, or detected by :func:`gbfs.data.reading.files.file_task`) by
    :func:`gbfs.data.reading.ranking_files.load`, whole queries in each split."""
    if scale > 1:
        raise ValueError(f"scale must be in (0, 1] for a data file (a share of its rows), got {scale}")
    kwargs = dict(kwargs)
    query_path = kwargs.pop("query_path", None)
    test_query_path = kwargs.pop("test_query_path", None)
    task = kwargs.pop("task", "auto")
    if task == "auto":
        task = "ranking" if files.file_task(kwargs["path"], kwargs.get("target"), kwargs.get("test_path"),
                                            query_path) == "ranking" else task
    if task == "ranking":
        ranking = {k: kwargs[k] for k in ("test_path", "test_fraction") if k in kwargs}
        return ranking_files.load(kwargs["path"], query_path=query_path, test_query_path=test_query_path,
                                  val_fraction=val_fraction, seed=seed, **ranking)
    data = files.load(**kwargs, seed=seed, root=root, task=task)
    X_tr, y_tr, X_te, y_te = data.X_train, data.y_train, data.X_test, data.y_test
    classes = data.task != "regression"
    if scale < 1.0:
        X_tr, y_tr = _subsample(X_tr, y_tr, scale, seed, classes)
        X_te, y_te = _subsample(X_te, y_te, scale, seed + 1, classes)
    tr, va = split_train_val(y_tr, val_fraction, seed)
    return Dataset(name=files.NAME, X_train=X_tr[tr], y_train=y_tr[tr], X_val=X_tr[va], y_val=y_tr[va],
                   X_test=X_te, y_test=y_te, feature_names=data.feature_names, task=data.task,
                   checksum=data.checksum, source=data.source, class_names=data.class_names,
                   categorical=data.categorical, categories=data.categories)


def split_queries(sizes: np.ndarray, val_fraction: float = 0.2, seed: int = 0):
    """Seeded (train rows, val rows, train sizes, val sizes): whole queries held out, in order."""
    q_tr, q_va = train_test_split(np.arange(len(sizes)), test_size=val_fraction, random_state=seed)
    q_tr, q_va = np.sort(q_tr), np.sort(q_va)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    rows = [np.concatenate([np.arange(starts[q], starts[q + 1]) for q in qs]) for qs in (q_tr, q_va)]
    return rows[0], rows[1], np.asarray(sizes)[q_tr], np.asarray(sizes)[q_va]


def _synthetic(name, val_fraction, seed, scale, kwargs) -> Dataset:
    data = GENERATORS[name](scale=scale, random_state=seed, **kwargs)
    if data.group_train is not None:
        tr, va, g_tr, g_va = split_queries(data.group_train, val_fraction, seed)
        return Dataset(name=name, X_train=data.X_train[tr], y_train=data.y_train[tr], X_val=data.X_train[va],
                       y_val=data.y_train[va], X_test=data.X_test, y_test=data.y_test,
                       feature_names=list(data.feature_names), task=data.task, relevant=data.relevant,
                       group_train=g_tr, group_val=g_va, group_test=data.group_test)
    tr, va = split_train_val(data.y_train, val_fraction, seed, groups=data.task_train)
    task_ids = {}
    if data.task_train is not None:
        task_ids = dict(task_train=data.task_train[tr], task_val=data.task_train[va],
                        task_test=data.task_test, relevant_per_task=data.relevant_per_task,
                        task_names=tuple(f"T{t + 1}" for t in range(int(data.task_train.max()) + 1)))
    return Dataset(name=name, X_train=data.X_train[tr], y_train=data.y_train[tr], X_val=data.X_train[va],
                   y_val=data.y_train[va], X_test=data.X_test, y_test=data.y_test,
                   feature_names=list(data.feature_names), task=data.task, relevant=data.relevant,
                   categorical=data.categorical, categories=data.categories, **task_ids)


def _check_split(split):
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def _check_args(val_fraction, seed, scale) -> tuple[float, float]:
    """Each argument's own error, before any download or parsing (numpy numbers are accepted;
    strings such as ``dataset.scale=abc`` from a command line, bools, NaN and infinities are not)."""
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, Real) or not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be a number in (0, 1), got {val_fraction!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return float(val_fraction), check_positive("scale", scale)
