"""The Dask estimators' parameters and what they refuse, before any cluster work (no cluster needed)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.dask import DaskGBFSClassifier, DaskGBFSRegressor
from gbfs.dask.parts import sample_sizes


@pytest.mark.parametrize("dask_cls, local_cls", [(DaskGBFSClassifier, GBFSClassifier),
                                                 (DaskGBFSRegressor, GBFSRegressor)])
def test_the_local_parameters_and_client(dask_cls, local_cls):
    est = dask_cls(method="gbfs", mu=0.5, max_features=3)
    params = est.get_params()
    assert set(params) == set(local_cls().get_params()) | {"client"}
    assert clone(est).get_params() == params
    assert pickle.loads(pickle.dumps(dask_cls(client="a client object"))).client is None


@pytest.mark.parametrize("kw, fit_kw, match", [
    ({"split_search": "exact"}, {}, "split_search"),
    ({"train_metrics": "all"}, {}, "train_metrics"),
    ({}, {"eval_set": (np.zeros((2, 2)), np.zeros(2))}, "eval_set"),
    ({"mu": -1.0}, {}, "mu"),
])
def test_refused_before_any_work(kw, fit_kw, match):
    with pytest.raises(ValueError, match=match):
        DaskGBFSClassifier(**kw).fit(None, None, **fit_kw)


def test_no_client_is_named():
    da = pytest.importorskip("dask.array", reason="the dask extra is not installed")
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    try:
        distributed.default_client()
        pytest.skip("a client of another test is still running")
    except ValueError:
        pass
    with pytest.raises(ValueError, match="client"):
        DaskGBFSRegressor().fit(da.zeros((10, 2)), da.zeros(10))


def test_sample_sizes_are_fixed_by_the_partition_lengths():
    assert sample_sizes([100, 50], 200) == [100, 50]  # every row: the one-process bins
    sizes = sample_sizes([100, 50, 25], 70)
    assert sum(sizes) == 70 and sizes == sample_sizes([100, 50, 25], 70)
    assert sizes == [40, 20, 10]
