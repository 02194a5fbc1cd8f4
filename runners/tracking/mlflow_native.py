"""What a run records in MLflow's own terms: its data as dataset inputs, its fitted model as an
MLflow model (:mod:`runners.tracking.mlflow_model`), and the kind of its experiment for the MLflow UI.

**Datasets.** Every run that fits a model logs the splits it used as MLflow dataset inputs (the
"Dataset" column of the runs table, the run page's inputs): a fit or refit run ``train``,
``validation`` and ``test``, a tuning trial ``train`` and ``validation`` (it never sees test).  Each
is an ``mlflow.data`` NumPy dataset (schema: the feature and label tensors; profile: their shapes)
with

* ``name``: the dataset's name, or for ``dataset=file`` the file's name (:func:`dataset_label`);
* ``digest``: :func:`digest`, of the split's shape, labels and a sample of its rows (MLflow's own
  digest copies the whole array first: 0.7 s on 100 000 x 700 floats, this one 5 ms);
* ``source``: where the rows come from (:func:`split_source`): the file (``local``), the download
  URL of the split's raw file (``http``), or ``synthetic:<generator>(<arguments>)`` and
  ``sklearn.datasets:<loader>`` (type ``generated``, :class:`GeneratedSource`);
* the context tag ``mlflow.data.context``: the split.

**Model.** With ``tracking.log_model`` (default true) a run that logs ``model.json`` also logs it
as the MLflow model ``runs:/<run_id>/<method>-<dataset>`` (``agbm-gisette_like``;
:func:`runners.tracking.mlflow_model.log_model`), linked to the run's final metrics.

**The UI** (:func:`configure_ui`, every runner at start).  MLflow 3.17's UI opens an experiment in
the mode of its "GenAI | Model training" switch, which each browser keeps and which starts on GenAI
(traces, overview); earlier MLflow 3 UIs go by the experiment's tag ``mlflow.experimentKind``.  So
the experiment is tagged ``custom_model_development``, and the runs table's view (the columns of
:data:`RUN_COLUMNS`) is stored as MLflow's shared view :data:`VIEW_KEY`: the link of
:func:`runs_view_url`, which the runners print, opens the runs table in Model training mode with
those columns (MLflow has no API for a table's default columns; "Override saved view" in the UI
makes the shared view the browser's own).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
import warnings
import weakref
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
from mlflow.data.dataset_source import DatasetSource
from mlflow.entities import DatasetInput, InputTag
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from gbfs.data import BUNDLED, Dataset, read_dataset_manifest
from gbfs.data.ovr import OVR_DATASETS
from gbfs.data.reading import files
from gbfs.data.synthetic.generators import GENERATORS
from runners.tracking import mlflow_model

log = logging.getLogger(__name__)

#: MLflow's split names (the context tags) by the Dataset's
CONTEXTS = {"train": "train", "validation": "val", "test": "test"}
FIT_SPLITS = ("train", "validation", "test")
TRIAL_SPLITS = ("train", "validation")
#: rows of a split hashed by :func:`digest` (evenly spaced, the first and last included)
DIGEST_ROWS = 1024
#: the experiment tag MLflow 3's UI reads to choose between its GenAI pages and the runs table
KIND_TAG, KIND = "mlflow.experimentKind", "custom_model_development"
#: MLflow's UI keeps a shared view of the runs table in the experiment tag VIEW_TAG + key, opened by
#: the URL's ``viewStateShareKey=<key>``; the runners store theirs under VIEW_KEY
VIEW_TAG, VIEW_KEY = "mlflow.sharedViewState.", "gbfs-runs"
#: the columns of that view (MLflow's column keys): the data, the model, the method and its budget,
#: the test and validation scores, the number of features and the fit time
RUN_COLUMNS = ("tags.`method`", "attributes.`Dataset`", "metrics.`test_auc`", "metrics.`test_rmse`",
               "metrics.`val_auc`", "metrics.`n_selected_features`", "tags.`budget`", "metrics.`fit_seconds`",
               "attributes.`Models`")


class GeneratedSource(DatasetSource):
    """The source of rows a program generates (a synthetic stand-in) or ships (scikit-learn's
    bundled data): ``uri`` says which, e.g. ``synthetic:gisette_like(scale=0.1, random_state=0)``
    (also any source MLflow cannot parse, kept as it is)."""

    def __init__(self, uri: str):
        self.uri = uri

    @staticmethod
    def _get_source_type() -> str:
        return "generated"

    def load(self) -> str:
        return self.uri

    @staticmethod
    def _can_resolve(raw_source: Any) -> bool:
        return isinstance(raw_source, str) and raw_source.startswith(("synthetic:", "sklearn.datasets:"))

    @classmethod
    def _resolve(cls, raw_source: Any) -> GeneratedSource:
        return cls(str(raw_source))

    def to_dict(self) -> dict[str, Any]:
        return {"uri": self.uri}

    @classmethod
    def from_dict(cls, source_dict: dict[Any, Any]) -> GeneratedSource:
        return cls(str(source_dict["uri"]))


mlflow.data.dataset_source_registry.register_dataset_source(GeneratedSource)


def dataset_label(dataset: DictConfig) -> str:
    """How a run's data is called in tables and in MLflow: ``dataset.name``, or for a data file of
    one's own (``dataset=file``, ``dataset=ranking_file``) the name of the file ``dataset.path``
    (``my.csv``) rather than ``file``."""
    if "path" in dataset and not OmegaConf.is_missing(dataset, "path") and dataset.get("path"):
        return Path(str(dataset.path)).name
    return str(dataset.name)


def _kwargs(dataset: DictConfig) -> dict:
    kwargs = dataset.get("kwargs")
    return OmegaConf.to_container(kwargs, resolve=True) if kwargs else {}


def split_source(cfg: DictConfig, ds: Dataset, split: str) -> str:
    """Where the rows of ``split`` (``train``, ``validation``, ``test``) of ``cfg.dataset`` come from:
    a file path, a download URL, or ``synthetic:<generator>(<arguments>)`` /
    ``sklearn.datasets:<loader>``.

    Raises
    ------
    ValueError
        If ``split`` is not one of :data:`FIT_SPLITS`.
    """
    if split not in CONTEXTS:
        raise ValueError(f"split must be one of {list(CONTEXTS)}, got {split!r}")
    d = cfg.dataset
    if d.name in GENERATORS:
        args = {"scale": float(d.scale), "random_state": int(cfg.seed), **_kwargs(d)}
        return f"synthetic:{d.name}(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
    if d.name in BUNDLED:
        return f"sklearn.datasets:load_{d.name}"
    if d.name == files.NAME or "path" in d:     # a data file of one's own (dataset=file, ranking_file)
        test = d.get("test_path")
        return str(Path(str(test)).resolve()) if split == "test" and test is not None else ds.source
    if d.name in OVR_DATASETS:
        return ds.source
    try:   # a dataset with a manifest: the URL its split's raw file is downloaded from
        manifest = read_dataset_manifest(d.name, cfg.paths.get("data_dir"))
        spec = manifest.splits["test" if split == "test" else "train"]
        url = manifest.sources[0].url_for(spec.get("file") or spec["files"][0])
    except (ValueError, KeyError, IndexError, OSError):
        url = None
    return url or ds.source


def _source(uri: str) -> DatasetSource:
    if uri.startswith(("http://", "https://")):
        from mlflow.data.http_dataset_source import HTTPDatasetSource

        return HTTPDatasetSource(uri)
    if GeneratedSource._can_resolve(uri):
        return GeneratedSource(uri)
    from mlflow.data.dataset_source_registry import resolve_dataset_source

    with warnings.catch_warnings():   # a path matches MLflow's two local schemes ("" and file)
        warnings.simplefilter("ignore", UserWarning)
        try:
            return resolve_dataset_source(uri)
        except mlflow.exceptions.MlflowException:   # not a path MLflow knows: kept as it is
            return GeneratedSource(uri)


#: digests of arrays already hashed, by id (a weak reference tells a reused id apart): a study's
#: trials log the same splits again and again
_DIGESTS: dict[tuple[int, int], tuple[weakref.ref, weakref.ref, str]] = {}


def digest(X: np.ndarray, y: np.ndarray) -> str:
    """A 16-hex-digit digest of a split: its shape and dtypes, every label and :data:`DIGEST_ROWS`
    evenly spaced rows of ``X``.  Cheap on any size (5 ms for 100 000 x 700 floats); splits that
    differ only outside the sampled rows, with the same labels, share it."""
    key = (id(X), id(y))
    known = _DIGESTS.get(key)
    if known is not None and known[0]() is X and known[1]() is y:
        return known[2]
    X, y = np.asarray(X), np.asarray(y)
    h = hashlib.blake2b(digest_size=8)
    h.update(repr((X.shape, X.dtype.str, y.shape, y.dtype.str)).encode())
    rows = np.unique(np.linspace(0, len(X) - 1, min(len(X), DIGEST_ROWS)).astype(np.int64))
    h.update(np.ascontiguousarray(X[rows]).tobytes())
    h.update(np.ascontiguousarray(y).tobytes())
    found = h.hexdigest()
    try:
        _DIGESTS[key] = (weakref.ref(X), weakref.ref(y), found)
    except TypeError:   # an array type without weak references: not cached
        pass
    for stale in [k for k, (rx, ry, _) in _DIGESTS.items() if rx() is None or ry() is None]:
        del _DIGESTS[stale]
    return found


def split_datasets(cfg: DictConfig, ds: Dataset, splits=FIT_SPLITS) -> list[tuple[str, Any]]:
    """``(context, mlflow.data dataset)`` of each of ``splits`` (no array is copied)."""
    name = dataset_label(cfg.dataset)
    out = []
    for split in splits:
        source = _source(split_source(cfg, ds, split))   # checks the split's name
        X, y = ds.split(CONTEXTS[split])
        dataset = mlflow.data.from_numpy(X, source=source, targets=y, name=name, digest=digest(X, y))
        out.append((split, dataset))
    return out


#: attempts at logging a run's inputs while parallel runs insert the same dataset (see log_inputs)
INPUT_ATTEMPTS = 6


def log_inputs(run_id: str, cfg: DictConfig, ds: Dataset, splits=FIT_SPLITS) -> None:
    """Log ``splits`` of ``ds`` as the run's dataset inputs, in one call to the store (what
    ``mlflow.log_input`` does once per dataset).

    A dataset is stored once per experiment: the store looks for it, then inserts it, so parallel
    runs on the same data (a joblib sweep, a study's workers) race to insert it and all but one fail
    on the unique constraint ("UNIQUE constraint failed: datasets...").  The call is one transaction,
    rolled back on that failure; it is tried again, and then finds the dataset stored.
    """
    inputs = [DatasetInput(dataset._to_mlflow_entity(), tags=[InputTag("mlflow.data.context", split)])
              for split, dataset in split_datasets(cfg, ds, splits)]
    client = MlflowClient()
    for attempt in range(1, INPUT_ATTEMPTS + 1):
        try:
            client.log_inputs(run_id, datasets=inputs)
            return
        except mlflow.exceptions.MlflowException as err:
            text = str(err).lower()
            if attempt == INPUT_ATTEMPTS or not ("unique" in text or "duplicate" in text):
                raise
            time.sleep(0.05 * attempt * (1 + random.random()))   # apart from the other racers


def log_model(cfg: DictConfig, model, ds: Dataset, model_file: str | Path, step: int) -> None:
    """Log ``model`` (saved in ``model_file``) as the run's MLflow model when ``tracking.log_model``
    is true (:func:`runners.tracking.mlflow_model.log_model`), its metrics at ``step`` linked to it."""
    if not cfg.tracking.get("log_model", True):
        return
    meta = {"dataset": dataset_label(cfg.dataset), "method": str(cfg.method.name)}
    if ds.class_names is not None:
        meta["class_names"] = list(ds.class_names)
    categorical = getattr(ds, "categorical", ())
    if categorical and ds.categories is not None:   # such a column holds codes: say what each stands for
        meta["categories"] = {ds.feature_names[j]: list(c) for j, c in zip(categorical, ds.categories)}
    mlflow_model.log_model(model, model_file, ds.X_train, ds.feature_names, task_ids=ds.task_train,
                           metadata=meta, step=step,
                           name=mlflow_model.model_name(meta["method"], meta["dataset"]))


def runs_view_state(search: str | None = None) -> dict:
    """The runs table's view as MLflow's UI stores a shared view: :data:`RUN_COLUMNS` shown, the
    newest runs first, and the search filter ``search`` (MLflow's syntax), if any."""
    return {"selectedColumns": list(RUN_COLUMNS), "columnOrder": list(RUN_COLUMNS),
            "orderByKey": "attributes.start_time", "orderByAsc": False, "searchFilter": search or ""}


def runs_view_url(exp_id: str, key: str = VIEW_KEY) -> str:
    """The path (after the server's URL) of experiment ``exp_id``'s runs table in the shared view
    ``key`` (:func:`configure_ui` stores :data:`VIEW_KEY`), in the UI's machine-learning mode."""
    return f"#/experiments/{exp_id}/runs?viewStateShareKey={key}&workflowType=machine_learning"


def configure_ui(exp_id: str, client: MlflowClient | None = None,
                 views: dict[str, dict] | None = None) -> None:
    """Set experiment ``exp_id`` up for the MLflow UI: the kind tag (the runs table rather than the
    GenAI pages; a kind chosen in the UI is kept) and the shared view :data:`VIEW_KEY`
    (:func:`runs_view_state`, opened by :func:`runs_view_url`), with ``views`` as further shared
    views by key.  A failure is logged, never raised: a run must not fail for its UI."""
    client = client or MlflowClient()
    wanted = {VIEW_TAG + VIEW_KEY: json.dumps(runs_view_state())}
    wanted.update({VIEW_TAG + k: json.dumps(v) for k, v in (views or {}).items()})
    try:
        tags = client.get_experiment(exp_id).tags
        if KIND_TAG not in tags:
            client.set_experiment_tag(exp_id, KIND_TAG, KIND)
        for key, value in wanted.items():
            if tags.get(key) != value:
                client.set_experiment_tag(exp_id, key, value)
    except mlflow.exceptions.MlflowException as err:
        log.warning("could not set MLflow experiment %s up for the UI: %s", exp_id, err)
