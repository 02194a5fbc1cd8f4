"""The labels of a data file of one's own (:mod:`gbfs.data.reading.files`) and the task they make.

A target is one of :data:`TASKS` (ranking files are :mod:`gbfs.data.reading.ranking_files`'):

* ``binary``: two values, mapped to 0 / 1 in sorted order (the later value is the positive class 1);
* ``multiclass``: more than two classes, text or integers, mapped to the codes ``0 .. K-1`` of the
  sorted values;
* ``regression``: real numbers, kept as float64.

``task="auto"`` (:func:`detect_task`) takes two values for binary, at most :data:`MAX_CLASSES`
distinct integers or texts for multiclass, and any other numbers for regression.  A task given
explicitly is checked against the labels (:func:`encode_labels`), its error naming ``task``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_SHOWN = 10
#: ``task="auto"``: the task is detected from the labels
AUTO = "auto"
#: the most distinct integer (or text) values a detected multiclass target may have; more is a
#: regression when they are numbers (text labels are always classes)
MAX_CLASSES = 100
#: the tasks of a labelled table, by name (the encoder of each: :data:`ENCODERS`)
TASKS = ("binary", "multiclass", "regression")


def detect_task(labels: np.ndarray) -> str:
    """The task of a target: ``binary`` for two values, ``multiclass`` for at most
    :data:`MAX_CLASSES` integers or any number of texts, ``regression`` for other numbers."""
    values = np.unique(label_values(labels))
    if len(values) <= 2:
        return "binary"
    if values.dtype.kind in "OSU" or (values.dtype.kind in "iub" and len(values) <= MAX_CLASSES):
        return "multiclass"
    return "regression"


def encode_labels(labels: np.ndarray, test_labels: np.ndarray | None = None, where: str = "the target",
                  task: str = "binary", argument: str = "task"
                  ) -> tuple[np.ndarray, np.ndarray | None, tuple[str, ...], str]:
    """The labels as the arrays a model of ``task`` fits: ``(y, y_test, class_names, task)``.

    Parameters
    ----------
    labels, test_labels : ndarray
        The labels of the train rows (and of a test file).
    where : str
        What the labels are, for the errors (e.g. "the target column 'label' of my.csv").
    task : {"auto", "binary", "multiclass", "regression"}
        The task; ``"auto"`` detects it (:func:`detect_task`) from the train and test labels.
    argument : str
        The name of ``task`` in the errors (``dataset.task`` in the harness).

    Raises
    ------
    ValueError
        Labels the task cannot fit (saying what they look like and which task they make), one class
        only among the train labels, an unknown task.
    """
    if task != AUTO and task not in ENCODERS:
        raise ValueError(f"{argument} must be one of {(AUTO, *TASKS, 'ranking')}, got {task!r}")
    labels = label_values(labels)
    both = labels if test_labels is None else label_values(test_labels)
    if both.dtype.kind != labels.dtype.kind and (labels.dtype.kind in "OSU" or both.dtype.kind in "OSU"):
        labels, both = labels.astype(str), both.astype(str)
    if task == AUTO:
        task = detect_task(np.concatenate([labels, both]))
    y, y_test, names = ENCODERS[task](labels, None if test_labels is None else both, where, argument)
    return y, y_test, names, task


def _classes(labels, both, where: str, argument: str, task: str):
    classes = np.unique(np.concatenate([labels, labels if both is None else both]))
    shown = ", ".join(repr(c.item()) for c in classes[:_SHOWN]) + (" ..." if len(classes) > _SHOWN else "")
    if classes.dtype.kind == "f":
        raise ValueError(f"{argument}={task!r}: {where} holds real numbers ({len(classes)} distinct values, "
                         f"from {classes.min():.6g} to {classes.max():.6g}), not classes; "
                         f"{argument}=regression fits them (or auto detects it)")
    if len(np.unique(labels)) < 2:
        raise ValueError(f"{where} has one class only ({shown}) in the train rows; a classifier needs two")
    y_test = None if both is None else np.searchsorted(classes, both).astype(np.int64)
    return np.searchsorted(classes, labels).astype(np.int64), y_test, tuple(str(c.item()) for c in classes)


def _binary(labels, both, where: str, argument: str):
    classes = np.unique(np.concatenate([labels, labels if both is None else both]))
    if len(classes) > 2:
        more = " ..." if len(classes) > _SHOWN else ""
        shown = ", ".join(repr(c.item()) for c in classes[:_SHOWN]) + more
        raise ValueError(not_binary(where, classes, shown, argument))
    return _classes(labels, both, where, argument, "binary")


def _multiclass(labels, both, where: str, argument: str):
    return _classes(labels, both, where, argument, "multiclass")


def _regression(labels, both, where: str, argument: str):
    if labels.dtype.kind not in "iubf" or (both is not None and both.dtype.kind not in "iubf"):
        raise ValueError(f"{argument}='regression': {where} holds text, not numbers; "
                         f"{argument}=multiclass (or auto) fits text labels as classes")
    y = labels.astype(np.float64)
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{where} holds NaN or infinite values; a regression target must be finite")
    return y, None if both is None else both.astype(np.float64), ()


#: task -> ``(labels, test labels, where, argument) -> (y, y_test, class_names)``
ENCODERS: dict[str, Callable] = {"binary": _binary, "multiclass": _multiclass, "regression": _regression}


def not_binary(where: str, values: np.ndarray, shown: str, argument: str = "task") -> str:
    """The error for ``task="binary"`` on a target of more than two distinct ``values``, naming the
    task they make."""
    n = len(values)
    if values.dtype.kind == "f":      # label_values left only non-integral (or non-finite) floats
        return (f"{argument}='binary': {where} holds real numbers ({n} distinct values, from "
                f"{np.nanmin(values):.6g} to {np.nanmax(values):.6g}): a regression target; "
                f"{argument}=regression (or auto) fits it, with the methods of the regression task")
    return (f"{argument}='binary': {where} has {n} classes ({shown}), not two; {argument}=multiclass "
            f"(or auto) fits them, with the methods of the multiclass task")


def label_values(labels: np.ndarray) -> np.ndarray:
    """Labels as a sortable array: text stays text, integral floats become integers."""
    labels = np.asarray(labels)
    if labels.dtype.kind in "OSU":
        return labels.astype(str)
    if labels.dtype.kind == "f" and np.all(np.isfinite(labels)) and np.array_equal(labels, np.round(labels)):
        return labels.astype(np.int64)
    return labels
