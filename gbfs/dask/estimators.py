"""Dask estimators: :class:`DaskGBFSClassifier` and :class:`DaskGBFSRegressor`, in the manner of
``lightgbm.dask``.

Each is its local estimator (:class:`~gbfs.GBFSClassifier`, :class:`~gbfs.GBFSRegressor`) with the same
parameters plus ``client``, whose ``fit`` takes Dask arrays or DataFrames partitioned over the
workers of a ``distributed`` cluster.  The fit is data-parallel (:mod:`gbfs.dask.engine`): every
worker bins and keeps its own rows; the driver grows every tree from the summed histograms with
the library's own split search, Omega, penalty and budget.  GT-GBM's precompute runs per partition
and its group tests are summed on the driver (:mod:`gbfs.dask.group_tests`); GOSS draws the
single-process sample (:mod:`gbfs.dask.goss`).  With every method, with GOSS and without a
sampler, the model is the single-process model on the same rows up to the order of float
additions; SGB and MVS draw per partition, so their models agree in distribution only.  The
fitted model is an ordinary one: :meth:`to_local` returns the local estimator, which saves, loads
and predicts without Dask; ``predict`` on a Dask collection maps the local model over its
partitions.
"""

from __future__ import annotations

import dataclasses
import inspect
import time

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .. import validation as V
from ..booster.binning import BinMapper
from ..booster.callbacks import progress_bar
from ..estimators import fitting
from ..estimators._docs import PARAM_DOC
from ..estimators.model_io import model_from_dict
from ..estimators.single_task import GBFSClassifier, GBFSRegressor
from ..io.envelope import seal
from . import cluster, engine, parts

CLIENT_DOC = """
    client : distributed.Client or None, default=None
        The cluster to fit on (None: the current client).  Not part of the fitted model.
"""


def _is_dask(X) -> bool:
    return hasattr(X, "__dask_graph__")


def _with_client(local: type) -> inspect.Signature:
    """The local estimator's ``__init__`` signature plus ``client`` (scikit-learn reads the
    parameters from it, so ``get_params``, ``clone`` and ``repr`` see them all)."""
    sig = inspect.signature(local.__init__)
    client = inspect.Parameter("client", inspect.Parameter.KEYWORD_ONLY, default=None)
    return sig.replace(parameters=[*sig.parameters.values(), client])


def _refuse(est, params) -> None:
    """What a fit on Dask does not do yet, refused before any work (each names its parameter)."""
    if params.growth.split_search != "histogram":
        raise ValueError("split_search='exact' is not supported on Dask: use 'histogram'")
    if params.train_metrics == "all":
        raise ValueError("train_metrics='all' is not supported on Dask (AUC needs every row in one "
                         "place): use 'loss' or 'none'")
    if est.early_stopping_rounds is not None:
        raise ValueError("early_stopping_rounds needs eval_set, which a Dask fit does not take")
    if est.categorical_features not in ("auto", None) and len(np.atleast_1d(est.categorical_features)):
        raise ValueError("categorical_features are not supported on Dask: encode them as numbers")


def _predict_part(block, model, method: str):
    if hasattr(model, "feature_names_in_"):
        import pandas as pd

        block = pd.DataFrame(np.asarray(block), columns=model.feature_names_in_)
    return getattr(model, method)(block)


class DaskGBFSMixin:
    """The Dask side of both estimators: ``fit`` on Dask collections, :meth:`to_local`, ``predict``
    on Dask collections."""

    _local: type = GBFSClassifier

    def __getstate__(self):
        state = dict(super().__getstate__())
        state["client"] = None  # a client is tied to this process
        return state

    def fit(self, X, y, eval_set=None, callbacks=None):
        """Fit on the cluster.

        Parameters
        ----------
        X : dask Array or DataFrame of shape (n_samples, n_features)
            Numeric features (NaN allowed), partitioned by rows over the workers; each worker
            keeps the partitions it holds.
        y : dask Array or Series of shape (n_samples,)
            Labels (two classes) or a regression target; rechunked to ``X``'s partitions.
        eval_set : None
            Not supported on Dask (refused).
        callbacks : list of callables, optional
            As the local estimator's (:class:`gbfs.booster.callbacks.CallbackEnv`).

        Returns
        -------
        self
        """
        if eval_set is not None:
            raise ValueError("eval_set is not supported on Dask: score a held-out collection with predict")
        params = self._validate_params()
        _refuse(self, params)
        callbacks = V.check_callbacks(callbacks)
        if self.verbose:
            callbacks = callbacks + [progress_bar(type(self).__name__)]
        client = cluster.default_client(self.client)
        xs, ys, names, lengths, d = cluster.partitions(client, X, y)
        costs, bags, callbacks = fitting.check_selection(self, d, [], callbacks)
        plan = None
        if params.method.group_tests:  # max_precompute_bytes bounds each worker's share of it
            rows = max(sum(lengths[k] for k in idx) for idx in cluster.placement(client, xs).values())
            plan = self._group_test_plan(rows, d)
        seed = fitting.fit_seed(self)
        t0 = time.perf_counter()
        k = len(xs)
        sizes = parts.sample_sizes(lengths, self.bin_subsample)
        infos = client.gather(client.map(parts.inspect, xs, ys, sizes, [seed] * k, list(range(k)),
                                         [self._is_classifier()] * k, pure=False))
        self._reset_fitted()
        self.n_features_in_ = d
        if names is not None:
            self.feature_names_in_ = names
        classes = self._fit_labels(infos, sum(lengths))
        mapper = BinMapper(self.max_bins, None, np.random.default_rng(seed), None, self.min_data_in_bin)
        mapper.fit(np.concatenate([i["sample"] for i in infos]))
        del infos
        ys = client.map(parts.encode, ys, [classes] * len(ys), pure=False)
        params = self._resolve(params)
        config = {"loss": params.loss, "hessian_weighted": params.criterion.hessian_weighted,
                  "leaf_newton": params.leaf_estimate.newton, "n_threads": self.n_threads}
        futures, hosts = cluster.start_hosts(client, xs, ys, mapper, config)
        del xs, ys
        t1 = time.perf_counter()
        try:
            group = cluster.SocketGroup(hosts, lengths)
            try:
                shard_bytes = group.host_bytes()
                fitted = engine.fit(self, group, mapper, params, costs, bags, callbacks, seed, plan)
            finally:
                group.close()
        finally:  # the shards go with their actors: nothing of the fit stays on the workers
            del hosts
            client.cancel(futures)
        t2 = time.perf_counter()
        self._install(fitted, mapper, bags)
        n_trees = max(len(fitted.result.trees), 1)
        self.timings_ = {"binning_seconds": t1 - t0, "boosting_seconds": t2 - t1, **fitted.comm,
                         "histogram_bytes_per_tree": fitted.comm["histogram_bytes"] / n_trees,
                         "n_partitions": len(lengths), "shard_bytes": shard_bytes}
        return self

    def _is_classifier(self) -> bool:
        return issubclass(self._local, GBFSClassifier)

    def _fit_labels(self, infos: list, n_rows: int):
        """``classes_`` of a classifier (two, from every partition's labels); None for a regressor."""
        if not self._is_classifier():
            parts.check_target_scale(max(i["max_abs_y"] for i in infos), n_rows)
            return None
        self.classes_ = V.binary_classes(np.concatenate([i["labels"] for i in infos]), "y")
        return self.classes_

    def _resolve(self, params):
        if params.growth.leaf_count == "auto":  # the loss's own count, as the local fit resolves it
            params = dataclasses.replace(params, growth=dataclasses.replace(
                params.growth, leaf_count=params.loss.leaf_count))
        return params

    def _install(self, fitted, mapper, bags) -> None:
        self._bin_mapper = mapper
        self.categorical_features_ = np.zeros(0, dtype=np.int64)
        self.categories_ = []
        if fitted.selection is not None:
            self.selection_history_ = fitted.selection_history
        r = fitted.result
        self._set_fitted(r.trees, r.init_score, r.history, r.best_iteration, fitted.selection)
        if bags is not None:
            from ..criteria.penalty import FeatureUsage

            bag_of = FeatureUsage(self.n_features_in_, 0.0, None, bags).bag_of
            self.n_bags_selected_ = int(np.unique(bag_of[self.selected_features_]).size)

    def _model_body(self) -> dict:
        body = super()._model_body()
        body["params"].pop("client", None)  # the local estimator's parameters
        return body

    def to_local(self):
        """The fitted model as the local estimator (:class:`~gbfs.GBFSClassifier` or
        :class:`~gbfs.GBFSRegressor`): the same trees, bins and selection, no Dask."""
        check_is_fitted(self, "_trees")
        local = model_from_dict(seal(self._local.__name__, self._model_body()), type(self).__name__)
        local.history_ = self.history_
        local.timings_ = self.timings_
        return local

    def save_model(self, path) -> None:
        """Write the model file of :meth:`to_local` (it loads as the local estimator)."""
        self.to_local().save_model(path)

    def _map(self, X, method: str, width: int | None, dtype):
        """``local.method`` over the partitions of a Dask collection (``width``: columns of the result)."""
        import dask.dataframe as dd

        if isinstance(X, dd.DataFrame):
            X = X.to_dask_array(lengths=True)
        X = X.rechunk({1: -1})
        local = self.to_local()
        if width is None:
            return X.map_blocks(_predict_part, local, method, drop_axis=1, dtype=dtype)
        return X.map_blocks(_predict_part, local, method, chunks=(X.chunks[0], (width,)), dtype=dtype)

    def predict(self, X):
        """Predictions; a Dask collection gives a Dask array computed partition by partition."""
        if _is_dask(X):
            check_is_fitted(self, "_trees")
            dtype = self.classes_.dtype if self._is_classifier() else np.float64
            return self._map(X, "predict", None, dtype)
        return super().predict(X)


class DaskGBFSClassifier(DaskGBFSMixin, GBFSClassifier):
    __doc__ = ("Gradient boosted feature selection for binary classification, fitted data-parallel on a\n"
               "    Dask cluster (:mod:`gbfs.dask`); parameters as :class:`~gbfs.GBFSClassifier`.\n"
               + PARAM_DOC + CLIENT_DOC)
    _local = GBFSClassifier

    def __init__(self, *, client=None, **params):
        super().__init__(**params)
        self.client = client

    __init__.__signature__ = _with_client(GBFSClassifier)

    def predict_proba(self, X):
        """Probabilities of both classes; a Dask collection gives a Dask array."""
        if _is_dask(X):
            check_is_fitted(self, "_trees")
            return self._map(X, "predict_proba", 2, np.float64)
        return super().predict_proba(X)

    def decision_function(self, X):
        """Raw log-odds of ``classes_[1]``; a Dask collection gives a Dask array."""
        if _is_dask(X):
            check_is_fitted(self, "_trees")
            return self._map(X, "decision_function", None, np.float64)
        return super().decision_function(X)


class DaskGBFSRegressor(DaskGBFSMixin, GBFSRegressor):
    __doc__ = ("Gradient boosted feature selection for regression, fitted data-parallel on a Dask\n"
               "    cluster (:mod:`gbfs.dask`); parameters as :class:`~gbfs.GBFSRegressor`.\n"
               + PARAM_DOC + CLIENT_DOC)
    _local = GBFSRegressor

    def __init__(self, *, client=None, **params):
        super().__init__(**params)
        self.client = client

    __init__.__signature__ = _with_client(GBFSRegressor)
