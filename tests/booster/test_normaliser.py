"""A-GBM's divisor of the gain in both criteria (:func:`gbfs.booster.normaliser.gain_normaliser`).

``N = sum w g^2/h - G^2/(H + lambda)``: SSE_root for the first-order criterion, its Newton
counterpart with hessians.  Every split gain of every tree is at most ``N``, so normalised gains lie
in [0, 1]; ``N`` is reached by the finest partition of the root's rows.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.booster.normaliser import gain_normaliser


def _set_partitions(items):
    """Every partition of ``items`` into non-empty blocks (Bell(n) of them)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _set_partitions(rest):
        for i in range(len(part)):
            yield part[:i] + [[first] + part[i]] + part[i + 1:]
        yield [[first]] + part


@pytest.mark.parametrize("lam", [0.0, 0.7])
def test_normaliser_is_the_brute_force_maximum_gain(lam):
    """Over all 4140 partitions of 8 rows, the largest Newton gain ``sum_k G_k^2/(H_k+lam) - G^2/(H+lam)``
    never exceeds N, and with lam = 0 the finest partition reaches it exactly."""
    rng = np.random.default_rng(0)
    g = rng.standard_normal(8)
    h = rng.uniform(0.05, 1.0, 8)
    w = rng.uniform(0.5, 2.0, 8)  # sampler weights: channels w g and w h
    wg, wh = w * g, w * h
    n = gain_normaliser(wg.sum(), wh.sum(), float(np.sum(w * g * g / h)), lam)
    parent = wg.sum() ** 2 / (wh.sum() + lam)
    best = -np.inf
    for part in _set_partitions(list(range(8))):
        gain = sum(wg[b].sum() ** 2 / (wh[b].sum() + lam) for b in part) - parent
        best = max(best, gain)
    assert best <= n * (1 + 1e-12)
    if lam == 0.0:
        assert best == pytest.approx(n, rel=1e-12)
    # any two-way split of any subset (a node's split) is bounded too
    for size in range(2, 9):
        for node in itertools.combinations(range(8), size):
            node = list(node)
            for cut in range(1, size):
                left, right = node[:cut], node[cut:]
                gain = (wg[left].sum() ** 2 / (wh[left].sum() + lam) + wg[right].sum() ** 2
                        / (wh[right].sum() + lam) - wg[node].sum() ** 2 / (wh[node].sum() + lam))
                assert gain <= n * (1 + 1e-12)


def test_first_order_normaliser_is_sse_root():
    rng = np.random.default_rng(1)
    r = rng.standard_normal(50)
    n = gain_normaliser(r.sum(), 50.0, float(np.dot(r, r)), 0.0)
    assert n == pytest.approx(np.sum((r - r.mean()) ** 2), rel=1e-12)


@pytest.mark.parametrize("criterion,sampler", [("newton", None), ("sse", None), ("newton", "mvs")])
def test_every_normalised_gain_is_at_most_one(criterion, sampler):
    """In fitted models (real data, many trees, sampled rows): every node's gain / N <= 1."""
    X, y = load_breast_cancer(return_X_y=True)
    est = GBFSClassifier(method="agbm", mu=0.0, criterion=criterion, leaf_estimate="newton",
                         n_estimators=60, max_leaves=16, min_samples_leaf=3, reg_lambda=0.5,
                         sampler=sampler, random_state=0).fit(X, y)
    worst = 0.0
    for tree, rec in zip(est.trees_, est.history_):
        inner = tree.feature >= 0
        if inner.any():
            worst = max(worst, float(np.max(tree.gain[inner])) / rec["gain_normaliser"])
    assert 0.0 < worst <= 1.0 + 1e-9


def test_newton_selection_is_invariant_to_the_scale_of_y(reg_data):
    X, y = reg_data
    kw = dict(method="agbm", mu=0.02, criterion="newton", leaf_estimate="newton", n_estimators=30,
              max_leaves=8, min_samples_leaf=5, random_state=0)
    a = GBFSRegressor(**kw).fit(X, y)
    b = GBFSRegressor(**kw).fit(X, 1000.0 * y)
    assert a.selected_features_.tolist() == b.selected_features_.tolist()
    np.testing.assert_allclose(1000.0 * a.predict(X), b.predict(X), rtol=1e-9, atol=1e-9)


def test_newton_feature_count_falls_with_mu():
    """The count is non-increasing in mu over a grid, and a large mu keeps few features for the whole
    fit (dividing by SSE_root, 80 trees at mu = 0.1 kept adding features on every kind of data)."""
    X, y = load_breast_cancer(return_X_y=True)
    counts = []
    for mu in (1e-4, 1e-3, 0.01, 0.05, 0.2):
        est = GBFSClassifier(method="agbm", mu=mu, criterion="newton", leaf_estimate="newton",
                             n_estimators=80, max_depth=5, min_samples_leaf=20, random_state=0).fit(X, y)
        counts.append(est.history_[-1]["n_features_used"])
    assert counts == sorted(counts, reverse=True), counts
    assert counts[-1] <= 5 < counts[0]  # 30 features


def test_lightgbm_split_gains_are_bounded_by_the_normaliser():
    """LightGBM's own Newton split gains (a second implementation of the gain) never exceed N of
    their tree, computed by the baseline from LightGBM's probabilities."""
    from gbfs.baselines.lightgbm_baseline import LightGBMBaseline

    X, y = load_breast_cancer(return_X_y=True)
    est = LightGBMBaseline(n_estimators=40, num_leaves=16, min_child_samples=3, reg_lambda=0.5,
                           random_state=0).fit(X, y)
    worst = 0.0
    for info, rec in zip(est.booster_.dump_model()["tree_info"], est.history_):
        stack = [info["tree_structure"]]
        while stack:
            node = stack.pop()
            if "split_gain" in node:
                worst = max(worst, node["split_gain"] / rec["gain_normaliser"])
                stack.extend((node["left_child"], node["right_child"]))
    assert 0.1 < worst <= 1.0
