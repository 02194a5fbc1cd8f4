"""The labels of a data file of one's own (:mod:`gbfs.data.reading.files`) as 0 / 1.

The harness's methods are binary classifiers (and rankers, on ``dataset=ranking_file``), so the
target must hold two values; they are mapped to 0 / 1 in sorted order (the later value is the
positive class 1).  Any other target is refused saying what it is: a target of many discrete
values is a multiclass problem (the library's ``GBFSClassifier`` fits it, the harness does not), a
real-valued one a regression (the library's ``GBFSRegressor``; the harness has no regression task).
"""

from __future__ import annotations

import numpy as np

_SHOWN = 10


def encode_labels(labels: np.ndarray, test_labels: np.ndarray | None = None,
                  where: str = "the target") -> tuple[np.ndarray, np.ndarray | None, tuple[str, str]]:
    """Map two label values to 0 / 1 in sorted order; ``(y, y_test, class_names)``.

    Parameters
    ----------
    labels, test_labels : ndarray
        The labels of the train rows (and of a test file).
    where : str
        What the labels are, for the errors (e.g. "the target column 'label' of my.csv").

    Raises
    ------
    ValueError
        Other than two values among the labels (saying whether they look like classes or a
        real-valued target), or one value only among the train labels.
    """
    labels = label_values(labels)
    both = labels if test_labels is None else label_values(test_labels)
    if both.dtype.kind != labels.dtype.kind:
        labels, both = labels.astype(str), both.astype(str)
    classes = np.unique(np.concatenate([labels, both]))
    shown = ", ".join(repr(c.item()) for c in classes[:_SHOWN]) + (" ..." if len(classes) > _SHOWN else "")
    if len(classes) > 2:
        raise ValueError(not_binary(where, classes, shown))
    if len(np.unique(labels)) < 2:
        raise ValueError(f"{where} has one class only ({shown}) in the train rows; a binary "
                         f"classifier needs two")
    names = tuple(str(c.item()) for c in classes)
    y_test = None if test_labels is None else np.searchsorted(classes, both).astype(np.int64)
    return np.searchsorted(classes, labels).astype(np.int64), y_test, names


def not_binary(where: str, values: np.ndarray, shown: str) -> str:
    """The error for a target of more than two distinct ``values``: a regression when they are
    real numbers, else a multiclass problem."""
    n = len(values)
    if values.dtype.kind == "f":      # label_values left only non-integral (or non-finite) floats
        return (f"{where} holds real numbers ({n} distinct values, from {np.nanmin(values):.6g} to "
                f"{np.nanmax(values):.6g}): the harness's methods are "
                f"binary classification and ranking (dataset=ranking_file); it has no regression task. "
                f"The library's GBFSRegressor fits a real-valued target (from gbfs import GBFSRegressor); "
                f"for the harness, make a binary target first (e.g. the value above a threshold)")
    return (f"{where} has {n} classes ({shown}): {n} distinct values, where the harness's methods are "
            f"binary classification (two values) and ranking (dataset=ranking_file). Make a binary "
            f"target (e.g. one class against the rest), or use one-vs-rest tasks of an .npz "
            f"(load_dataset('ovr', path=...)); multiclass fits are the library's GBFSClassifier (any "
            f"number of classes), not the harness's")


def label_values(labels: np.ndarray) -> np.ndarray:
    """Labels as a sortable array: text stays text, integral floats become integers."""
    labels = np.asarray(labels)
    if labels.dtype.kind in "OSU":
        return labels.astype(str)
    if labels.dtype.kind == "f" and np.all(np.isfinite(labels)) and np.array_equal(labels, np.round(labels)):
        return labels.astype(np.int64)
    return labels
