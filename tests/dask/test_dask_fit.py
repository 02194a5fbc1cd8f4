"""Dask fits on real local clusters (2 and 4 worker processes) against the single-process estimator on
the same rows with the same parameters: the same trees, selection and predictions."""

from __future__ import annotations

import numpy as np
import pytest
from dask_cases import wide

from gbfs import GBFSClassifier, GBFSRegressor, load_model
from gbfs.dask import DaskGBFSClassifier, DaskGBFSRegressor

da = pytest.importorskip("dask.array", reason="the dask extra is not installed")
pytestmark = pytest.mark.slow


def _data(n=800, d=8, seed=0, classify=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(X.shape) < 0.05] = np.nan
    Z = np.nan_to_num(X)
    z = Z[:, 0] - 2 * Z[:, 1] + np.sin(Z[:, 2]) + 0.5 * rng.normal(size=n)
    return X, ((z > 0).astype(float) if classify else z)


CASES = {
    "agbm": {"method": "agbm", "mu": 0.02},
    "gbfs": {"method": "gbfs", "mu": 2.0},
    "budget": {"method": "agbm", "mu": 0.0, "max_features": 3},
    "topk": {"method": "topk", "max_features": 3},
    "refit": {"method": "agbm", "mu": 0.05, "refit": True},
}


def _compare(local, dist, X):
    assert len(local.trees_) == len(dist.trees_)
    for a, b in zip(local.trees_, dist.trees_):
        np.testing.assert_array_equal(a.feature, b.feature)
        np.testing.assert_array_equal(a.threshold, b.threshold)
    np.testing.assert_array_equal(local.selected_features_, dist.selected_features_)
    np.testing.assert_allclose(dist.decision_function(X) if hasattr(dist, "decision_function")
                               else dist.predict(X),
                               local.decision_function(X) if hasattr(local, "decision_function")
                               else local.predict(X), rtol=0, atol=1e-10)


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_workers_grow_the_local_trees(client2, case):
    kw = {"n_estimators": 15, "max_leaves": 8, "min_samples_leaf": 10, "random_state": 0, **CASES[case]}
    X, y = _data()
    local = GBFSClassifier(**kw).fit(X, y)
    dist = DaskGBFSClassifier(client=client2, **kw).fit(da.from_array(X, chunks=(250, 8)),
                                                        da.from_array(y, chunks=250))
    _compare(local, dist, X)


def test_four_workers_regression_and_reproducible(client4):
    kw = {"method": "agbm", "mu": 0.01, "n_estimators": 15, "max_leaves": 8, "random_state": 0}
    X, y = _data(classify=False, seed=2)
    Xd, yd = da.from_array(X, chunks=(100, 8)), da.from_array(y, chunks=100)
    local = GBFSRegressor(**kw).fit(X, y)
    a = DaskGBFSRegressor(client=client4, **kw).fit(Xd, yd)
    b = DaskGBFSRegressor(client=client4, **kw).fit(Xd, yd)
    _compare(local, a, X)
    for s, t in zip(a.trees_, b.trees_):  # the partition-order fold: the same floats every time
        np.testing.assert_array_equal(s.value, t.value)


def test_to_local_saves_loads_and_predicts_without_dask(client2, tmp_path):
    X, y = _data(seed=4)
    dist = DaskGBFSClassifier(client=client2, n_estimators=8, max_leaves=6, random_state=0).fit(
        da.from_array(X, chunks=(300, 8)), da.from_array(y, chunks=300))
    local = dist.to_local()
    assert type(local) is GBFSClassifier
    local.save_model(tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    np.testing.assert_array_equal(back.predict_proba(X), dist.predict_proba(X))
    proba = dist.predict_proba(da.from_array(X, chunks=(300, 8))).compute()
    np.testing.assert_array_equal(proba, local.predict_proba(X))
    np.testing.assert_array_equal(dist.predict(da.from_array(X, chunks=(300, 8))).compute(), local.predict(X))


def test_the_same_partitions_give_the_same_model_on_two_and_four_workers(client2, client4):
    X, y = _data(seed=5)
    kw = {"method": "agbm", "mu": 0.01, "n_estimators": 10, "random_state": 0}
    Xd, yd = da.from_array(X, chunks=(200, 8)), da.from_array(y, chunks=200)
    a, b = (DaskGBFSClassifier(client=c, **kw).fit(Xd, yd) for c in (client2, client4))
    for s, t in zip(a.trees_, b.trees_):
        for name in ("feature", "threshold", "value", "gain", "count"):
            np.testing.assert_array_equal(getattr(s, name), getattr(t, name))


def test_dataframes_keep_their_column_names(client2):
    dd = pytest.importorskip("dask.dataframe", reason="the dask extra is not installed")
    import pandas as pd

    X, y = _data(seed=6, classify=False)
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])])
    kw = {"n_estimators": 6, "max_leaves": 6, "random_state": 0}
    dist = DaskGBFSRegressor(client=client2, **kw).fit(dd.from_pandas(frame, npartitions=3),
                                                       dd.from_pandas(pd.Series(y), npartitions=3))
    local = GBFSRegressor(**kw).fit(frame, y)
    assert list(dist.feature_names_in_) == list(frame.columns)
    np.testing.assert_allclose(dist.predict(dd.from_pandas(frame, npartitions=3)).compute(),
                               local.predict(frame), rtol=0, atol=1e-10)


def test_sgb_draws_on_every_partition(client2):
    X, y = _data(seed=9)
    Xd, yd = da.from_array(X, chunks=(200, 8)), da.from_array(y, chunks=200)
    kw = {"sampler": "sgb", "subsample": 0.5, "n_estimators": 5, "random_state": 0}
    dist = DaskGBFSClassifier(client=client2, **kw).fit(Xd, yd)
    assert [r["n_rows_sampled"] for r in dist.history_] == [400] * 5  # half of each 200-row partition
    again = DaskGBFSClassifier(client=client2, **kw).fit(Xd, yd)
    for a, b in zip(dist.trees_, again.trees_):  # seeded by the fit, the partition and the tree
        np.testing.assert_array_equal(a.value, b.value)


def test_mvs_on_the_cluster(client2):
    X, y = _data(seed=10)
    Xd, yd = da.from_array(X, chunks=(200, 8)), da.from_array(y, chunks=200)
    dist = DaskGBFSClassifier(client=client2, sampler="mvs", subsample=0.5, n_estimators=5,
                              random_state=0).fit(Xd, yd)
    sizes = [r["n_rows_sampled"] for r in dist.history_]
    assert all(250 < s < 550 for s in sizes), sizes  # about s N = 400 rows of 800


def test_one_partition_is_the_local_fit_bit_for_bit(client2):
    X, y = _data(seed=11)
    kw = {"method": "agbm", "mu": 0.01, "n_estimators": 10, "max_leaves": 8, "random_state": 0}
    local = GBFSClassifier(**kw).fit(X, y)
    dist = DaskGBFSClassifier(client=client2, **kw).fit(da.from_array(X, chunks=(800, 8)),
                                                        da.from_array(y, chunks=800))
    for a, b in zip(local.trees_, dist.trees_):
        for name in ("feature", "threshold", "value", "gain", "count"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(local.predict_proba(X), dist.predict_proba(X))


@pytest.mark.parametrize("scope", ["node", "tree"])
def test_gtgbm_on_two_and_four_workers_is_the_local_model(client2, client4, scope):
    kw = {"method": "gtgbm", "mu": 0.01, "n_estimators": 10, "max_leaves": 8, "min_samples_leaf": 10,
          "random_state": 0, "group_test_scope": scope, "n_target_features": 1 if scope == "node" else 2}
    X, y = wide()
    local = GBFSClassifier(**kw).fit(X, y)
    for client, rows in ((client2, 250), (client4, 100)):
        dist = DaskGBFSClassifier(client=client, **kw).fit(da.from_array(X, chunks=(rows, X.shape[1])),
                                                           da.from_array(y, chunks=rows))
        _compare(local, dist, X)


@pytest.mark.parametrize("style", ["paper", "lightgbm"])
def test_goss_on_two_and_four_workers_is_the_local_model(client2, client4, style):
    kw = {"method": "agbm", "mu": 0.01, "n_estimators": 12, "max_leaves": 8, "random_state": 0,
          "sampler": "goss", "top_rate": 0.2, "other_rate": 0.3, "goss_style": style, "learning_rate": 0.25}
    X, y = _data(seed=12, classify=False)
    local = GBFSRegressor(**kw).fit(X, y)
    for client, rows in ((client2, 250), (client4, 100)):
        dist = DaskGBFSRegressor(client=client, **kw).fit(da.from_array(X, chunks=(rows, 8)),
                                                          da.from_array(y, chunks=rows))
        _compare(local, dist, X)
        assert [r["n_rows_sampled"] for r in dist.history_] == [r["n_rows_sampled"] for r in local.history_]


def test_gtgbm_memory_budget_is_per_worker(client2):
    """max_precompute_bytes bounds the precompute of the worker holding most rows (refused before
    any binning, naming the parameter); a budget for half the rows fits on two workers."""
    from distributed import wait

    X, y = wide(n=400, d=20)
    workers = sorted(client2.scheduler_info()["workers"])
    # one partition on each worker
    parts = [client2.scatter(X[k * 200:(k + 1) * 200], workers=[w]) for k, w in enumerate(workers)]
    labels = [client2.scatter(y[k * 200:(k + 1) * 200], workers=[w]) for k, w in enumerate(workers)]
    wait(parts + labels)
    Xd = da.concatenate([da.from_delayed(p, shape=(200, 20), dtype=float) for p in parts])
    yd = da.concatenate([da.from_delayed(p, shape=(200,), dtype=float) for p in labels])
    kw = {"method": "gtgbm", "n_target_features": 2, "n_subsets": 3, "n_estimators": 2, "random_state": 0}
    half = GBFSClassifier(**kw)._group_test_plan(200, 20).nbytes
    with pytest.raises(ValueError, match="max_precompute_bytes"):
        DaskGBFSClassifier(client=client2, max_precompute_bytes=half - 1, **kw).fit(Xd, yd)
    est = DaskGBFSClassifier(client=client2, max_precompute_bytes=half, **kw).fit(Xd, yd)
    assert len(est.trees_) == 2 and est.timings_["n_partitions"] == 2
    with pytest.raises(ValueError, match="max_precompute_bytes"):  # one process needs both halves
        GBFSClassifier(max_precompute_bytes=half, **kw).fit(X, y)
