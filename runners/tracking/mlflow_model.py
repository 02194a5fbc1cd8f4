"""A run's fitted model as an MLflow model, ``runs:/<run_id>/<method>-<dataset>``, loadable with
``mlflow.pyfunc.load_model`` and servable with ``mlflow models serve``.

A gbfs model is logged in the ``python_function`` flavour around the library's own JSON model file
(``data/model/model.json`` in the MLflow model, what ``gbfs.load_model`` reads), with this module as
its loader: MLflow copies this file into the model (``code/mlflow_model.py``), so loading the model
needs ``gbfs``, numpy, pandas and MLflow, not the harness (``runners``).  The library itself never
imports MLflow.  A LightGBM baseline (``method.estimator: lightgbm``) is logged through MLflow's
``lightgbm`` flavour: its booster, which needs only ``lightgbm``.

Both answer alike: ``predict(df)`` returns the probability of the positive class (``classes_[1]``,
label 1 of the harness's data) as a 1-D float64 array, exactly ``predict_proba(X)[:, 1]`` of the
model file (a binary LightGBM booster's own pyfunc output).  ``df`` has a column per feature the
model reads, named as the dataset's features (the signature; MLflow converts other numeric types to
double and ignores extra columns, so a frame of every feature works too): a gbfs model reads only its
selected features (:func:`input_columns`; the other columns of its file's ``X`` cannot change a
prediction and are set to 0), a LightGBM booster the columns it was trained on (all of them, or
GBDT-topK's k).  A multitask model also takes the task of each row in a column ``task``
(:data:`TASK_COLUMN`).  A regressor's pyfunc returns its predictions.

Logging sets the requirements explicitly (the installed versions, :func:`requirements`), so MLflow
does not spend seconds inferring them, and keeps its input example to :data:`EXAMPLE_ROWS` rows.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import shutil
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

#: the column holding a multitask model's task ids (a feature of that name moves it aside, see
#: :func:`task_column`)
TASK_COLUMN = "task"
#: rows of the input example stored with every logged model
EXAMPLE_ROWS = 2
#: the name of a logged model without a method and a dataset: ``runs:/<run_id>/model``
NAME = "model"
#: characters MLflow refuses in a logged model's name
_NOT_IN_NAMES = ("/", ":", ".", "%", '"', "'")


def model_name(method: str, dataset: str) -> str:
    """The logged model's name, ``<method>-<dataset>`` (``agbm-gisette_like``; a data file ``my.csv``:
    ``agbm-my_csv``), so that MLflow's Models tab tells the models apart; the run's model is then
    ``runs:/<run_id>/<name>``."""
    name = f"{method}-{dataset}"
    for c in _NOT_IN_NAMES:
        name = name.replace(c, "_")
    return name
#: the side-car of the model file: the input columns (name: column of the model's X), the task column
_COLUMNS = "columns.json"
#: what a logged gbfs model needs besides the ``gbfs`` library itself (not on a package index:
#: install it from its checkout, ``pip install -e .``, where the model is loaded or served)
GBFS_REQUIREMENTS = ("mlflow", "numpy", "pandas", "numba", "scikit-learn", "scipy", "tqdm")
LIGHTGBM_REQUIREMENTS = ("mlflow", "numpy", "pandas", "scikit-learn", "scipy", "lightgbm")


class GBFSPyfunc:
    """The pyfunc model of a gbfs model file: ``predict(df)`` is the model's probability of
    ``classes_[1]`` (more than two classes: of every class, a column each in the order of
    ``classes_``; a regressor or ranker: its prediction) for the rows of ``df``.

    Parameters
    ----------
    model : estimator
        A fitted gbfs model (``gbfs.load_model``'s result).
    columns : dict of str to int
        The input columns by name: the model's column (in its ``X``) each one fills.
    task : str or None
        The column of the task ids of a multitask model; None for a single-task model.
    """

    def __init__(self, model, columns: dict[str, int], task: str | None = None):
        self.model, self.columns, self.task = model, dict(columns), task

    def predict(self, model_input, params: dict | None = None) -> np.ndarray:
        """The positive class's probability (a regressor: the prediction), shape (n_rows,); with
        more than two classes the probability of each, shape (n_rows, n_classes), as a LightGBM
        multiclass booster's pyfunc returns.

        ``model_input`` is a DataFrame with the input columns (and the task column); the model's
        other columns are 0.  Or an array of every column of the model's ``X`` (a multitask model
        then needs a DataFrame).

        Raises
        ------
        ValueError
            If ``model_input`` lacks an input or task column, naming it.
        """
        if isinstance(model_input, pd.DataFrame):
            missing = [c for c in [*self.columns, *([self.task] if self.task else [])]
                       if c not in model_input.columns]
            if missing:
                raise ValueError(f"model_input lacks the columns {missing[:10]} (of {len(missing)} missing)")
            X = np.zeros((len(model_input), int(self.model.n_features_in_)), dtype=np.float64)
            X[:, list(self.columns.values())] = model_input[list(self.columns)].to_numpy(dtype=np.float64)
            task = model_input[self.task].to_numpy() if self.task else None
        else:
            if self.task:
                raise ValueError(f"model_input must be a DataFrame with a {self.task!r} column: this "
                                 f"multitask model predicts per task")
            X, task = np.asarray(model_input, dtype=np.float64), None
        args = (X,) if task is None else (X, task)
        if hasattr(self.model, "predict_proba"):
            proba = self.model.predict_proba(*args)
            return proba[:, 1] if proba.shape[1] == 2 else proba
        return np.asarray(self.model.predict(*args), dtype=np.float64)


class ShortExtraInputs(logging.Filter):
    """MLflow's warning about the columns of a frame that a model's signature does not name lists
    every one of them: ~45 KB for a frame of every feature of a 5000-column data set, most of whose
    columns a selecting model never reads.  The record keeps its level and logger; its message says
    how many columns were ignored and names the first :attr:`SHOWN`."""

    SHOWN = 5
    PREFIX = "Found extra inputs in the model input"

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(self.PREFIX) and "`[" in message:
            names = message[message.index("`[") + 2:message.rindex("]`")]
            names = [n.strip() for n in names.split(",") if n.strip()]
            if len(names) > self.SHOWN:
                shown = ", ".join(names[:self.SHOWN])
                record.msg, record.args = (f"{len(names)} input columns are not in the model's signature "
                                           f"and are ignored ({shown}, ...)"), ()
        return True


#: where MLflow logs that warning (:func:`mlflow.models.utils._enforce_schema`'s module)
_SCHEMA_LOGGER = "mlflow.models.utils"


def shorten_extra_input_warnings() -> None:
    """Install :class:`ShortExtraInputs` on MLflow's schema logger, once per process."""
    log = logging.getLogger(_SCHEMA_LOGGER)
    if not any(isinstance(f, ShortExtraInputs) for f in log.filters):
        log.addFilter(ShortExtraInputs())


def _load_pyfunc(data_path: str) -> GBFSPyfunc:
    """MLflow's entry point (``loader_module``): the pyfunc model of the folder ``data_path``,
    which holds ``model.json`` and the columns side-car."""
    import gbfs

    shorten_extra_input_warnings()
    folder = Path(data_path)
    columns = json.loads((folder / _COLUMNS).read_text())
    return GBFSPyfunc(gbfs.load_model(folder / "model.json"), columns["columns"], columns.get("task"))


# ------------------------------------------------------------------------------------------ logging

@functools.cache
def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def requirements(packages: Sequence[str]) -> list[str]:
    """``package==version`` of each installed one of ``packages`` (those not installed are left out;
    versions are looked up once per process)."""
    return [f"{name}=={_version(name)}" for name in packages if _version(name) is not None]


@contextlib.contextmanager
def _quiet(logger: str = "mlflow"):
    """MLflow's INFO lines while it logs a model ("Validating input example ...", once per run)
    are hidden; its warnings are not."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        log.setLevel(level)


def feature_columns(names: Sequence[str], n_features: int) -> list[str]:
    """The model's input column names: the dataset's feature names, or ``x0, x1, ...`` when they are
    missing, of the wrong length or not unique (a signature names each column once)."""
    names = [str(n) for n in names]
    if len(names) != n_features or len(set(names)) != n_features:
        return [f"x{j}" for j in range(n_features)]
    return names


def task_column(features: Sequence[str]) -> str:
    """:data:`TASK_COLUMN`, with underscores in front while a feature has that name."""
    name = TASK_COLUMN
    while name in features:
        name = "_" + name
    return name


def input_columns(model) -> list[int]:
    """The columns of ``model``'s ``X`` its predictions read, in column order: a gbfs model's
    selected features (its trees split on no other), a LightGBM booster's own columns; a model that
    reads none (no split) still takes its first column, so that its input has rows."""
    if hasattr(model, "booster_"):
        return [int(j) for j in model.columns_]
    return sorted(int(j) for j in model.selected_features_) or [0]


def takes_task(model) -> bool:
    """Whether ``model`` predicts per task (a multitask model: ``predict(X, task)``)."""
    return "task" in inspect.signature(model.predict).parameters


def _signature(features: Sequence[str], task: str | None):
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema, TensorSpec

    inputs = [ColSpec("double", f) for f in features] + ([ColSpec("long", task)] if task else [])
    return ModelSignature(inputs=Schema(inputs), outputs=Schema([TensorSpec(np.dtype(np.float64), (-1,))]))


def _example(X: np.ndarray, features: Sequence[str], task_ids=None, task: str | None = None) -> pd.DataFrame:
    frame = pd.DataFrame(np.asarray(X[:EXAMPLE_ROWS], dtype=np.float64), columns=list(features))
    if task:
        frame[task] = np.asarray(task_ids[:EXAMPLE_ROWS], dtype=np.int64)
    return frame


def log_model(model, model_file: str | Path, X: np.ndarray, feature_names: Sequence[str], *,
              task_ids: np.ndarray | None = None, metadata: dict | None = None, step: int = 0,
              name: str = NAME):
    """Log ``model`` to the active run as the MLflow model ``name`` (:func:`model_name`); return
    MLflow's ``ModelInfo``.

    Parameters
    ----------
    model : estimator
        The fitted model: a gbfs estimator (pyfunc around ``model_file``) or a
        ``gbfs.baselines.lightgbm_baseline.LightGBMBaseline`` (MLflow's lightgbm flavour, its booster).
    model_file : path
        ``model``'s JSON model file (``model.save_model``), copied into the MLflow model.
    X : array of shape (n_rows, n_features)
        Rows of the data the model was fitted on: the first :data:`EXAMPLE_ROWS`, in the columns
        the model reads (:func:`input_columns`), are the input example.
    feature_names : sequence of str
        The dataset's feature names (the signature's column names, :func:`feature_columns`).
    task_ids : array, optional
        The task of each row of ``X``: required by a multitask model (``predict_proba(X, task)``,
        :func:`takes_task`), ignored otherwise.
    metadata : dict, optional
        Stored in the ``MLmodel`` file (e.g. the class names).
    step : int
        The step of the run's metrics to link to the model (the final metrics' step).
    name : str
        The logged model's name: ``runs:/<run_id>/<name>`` (default :data:`NAME`).

    Raises
    ------
    ValueError
        If ``X`` does not have the model's number of columns, or a multitask model has no
        ``task_ids``.
    """
    import mlflow

    n_features = int(model.n_features_in_)
    if np.ndim(X) != 2 or np.shape(X)[1] != n_features:
        raise ValueError(f"X must have the model's {n_features} columns, got shape {np.shape(X)}")
    names = feature_columns(feature_names, n_features)
    used = input_columns(model)
    features = [names[j] for j in used]
    example = np.asarray(X)[:EXAMPLE_ROWS][:, used]
    classes = len(getattr(model, "classes_", ()))
    output = ("prediction" if not hasattr(model, "predict_proba") else "probability of classes[1], 1-D"
              if classes <= 2 else f"probability of each of the {classes} classes, (n_rows, {classes})")
    info = {"output": output,
            **({"classes": [str(c) for c in model.classes_]} if hasattr(model, "classes_") else {}),
            **(metadata or {})}
    if hasattr(model, "booster_"):      # a LightGBM baseline: MLflow's flavour of its booster
        with _quiet():
            # no serving-input check: it loads the model and scores the example, seconds for a
            # booster on thousands of columns, and MLflow would only warn on a failure
            return mlflow.lightgbm.log_model(
                model.booster_, name=name, signature=_signature(features, None),
                input_example=_example(example, features), metadata=info, step=step,
                pip_requirements=requirements(LIGHTGBM_REQUIREMENTS), validate_serving_input=False)
    task = task_column(names) if takes_task(model) else None
    if task and task_ids is None:
        raise ValueError(f"task_ids must give the task of each row of X: {type(model).__name__} predicts "
                         f"per task")
    with tempfile.TemporaryDirectory() as tmp, _quiet():
        folder = Path(tmp) / "model"
        folder.mkdir()
        shutil.copyfile(model_file, folder / "model.json")
        (folder / _COLUMNS).write_text(json.dumps({"columns": dict(zip(features, used)), "task": task}))
        return mlflow.pyfunc.log_model(
            name=name, loader_module="mlflow_model", data_path=str(folder), code_paths=[__file__],
            signature=_signature(features, task), input_example=_example(example, features, task_ids, task),
            pip_requirements=requirements(GBFS_REQUIREMENTS), metadata=info, step=step)
