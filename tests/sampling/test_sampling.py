"""Row samplers (gbfs.sampling.samplers): the O(N) MVS threshold against a sort-based reference, Theorem 2's
probabilities and their limits, unbiased weighted sums, GOSS/SGB counts and weights, seeding and
argument checks."""

from __future__ import annotations

import numpy as np
import pytest

from gbfs.sampling.samplers import (
    DEFAULTS,
    GOSS,
    MVS,
    N_PIVOTS,
    SAMPLERS,
    SGB,
    USED_BY,
    MVSAdaptive,
    RowSampler,
    adaptive_lambda,
    from_params,
    mvs_probabilities,
    mvs_threshold,
)


def naive_threshold(values, target):
    """O(N log N) reference (the paper's brute force, Section 4.3): with v sorted descending and the k
    largest values at p = 1, mu = sum_{i >= k} v_i / (target - k) must satisfy v_k <= mu <= v_{k-1}."""
    v = np.sort(np.asarray(values, dtype=np.float64))[::-1]
    n = v.size
    if target >= n:
        return v[-1]
    tail = np.concatenate([np.cumsum(v[::-1])[::-1], [0.0]])   # tail[k] = sum_{i >= k} v_i
    for k in range(int(np.ceil(target))):      # k < target: mu > 0
        mu = tail[k] / (target - k)
        if v[k] <= mu * (1 + 1e-12) and (k == 0 or v[k - 1] >= mu * (1 - 1e-12)):
            return mu
    return 0.0   # fewer than target positive values: no threshold


def _values(kind, n, rng):
    if kind == "uniform":
        return rng.random(n)
    if kind == "ties":
        return rng.integers(0, 4, n).astype(float)
    if kind == "zeros":
        return np.where(rng.random(n) < 0.7, 0.0, rng.exponential(size=n))
    if kind == "heavy":
        return rng.pareto(0.8, n)
    if kind == "lognormal":
        return rng.lognormal(0.0, 3.0, n)
    return np.full(n, 2.5)   # constant


KINDS = ["uniform", "ties", "zeros", "heavy", "lognormal", "constant"]


@pytest.mark.parametrize("kind", KINDS)
def test_threshold_equals_sort_based_reference(kind):
    for seed in range(25):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(1, 400))
        v = _values(kind, n, rng)
        for rate in (0.01, 0.1, 0.37, 0.5, 0.9, 1.0):
            target = rate * n
            mu = mvs_threshold(v, target, rng.random(int(rng.integers(1, 8))))  # short: pivots cycle
            ref = naive_threshold(v, target)
            assert mu == pytest.approx(ref, rel=1e-9, abs=0.0), (kind, seed, rate)
            n_pos = np.count_nonzero(v)
            if target < n and n_pos > target:
                assert np.minimum(1.0, v / mu).sum() == pytest.approx(target, rel=1e-9)


def test_threshold_leaves_values_untouched_and_validates():
    v = np.random.default_rng(0).random(1000)
    before = v.copy()
    mvs_threshold(v, 100.0, np.random.default_rng(1).random(N_PIVOTS))
    np.testing.assert_array_equal(v, before)
    with pytest.raises(ValueError, match="values"):
        mvs_threshold(np.array([1.0, -1.0]), 1.0, np.array([0.5]))
    with pytest.raises(ValueError, match="pivots"):
        mvs_threshold(v, 1.0, np.array([]))
    with pytest.raises(ValueError, match="sample_size"):
        mvs_threshold(v, 0.0, np.array([0.5]))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("lam", [0.0, 0.1, 10.0])
def test_probabilities_sum_to_the_sample_size(kind, lam):
    for seed in range(5):
        rng = np.random.default_rng(seed)
        n = 500
        g = _values(kind, n, rng) * rng.choice([-1.0, 1.0], n)
        h = rng.random(n) + 0.1
        for subsample in (0.05, 0.3, 0.8, 1.0):
            p = mvs_probabilities(g, h, lam, subsample, rng.random(N_PIVOTS))
            assert np.all((p >= 0.0) & (p <= 1.0))
            assert p.sum() == pytest.approx(subsample * n, rel=1e-9)


def test_lambda_zero_is_importance_sampling_and_huge_lambda_is_uniform():
    rng = np.random.default_rng(3)
    g = rng.standard_normal(2000) * rng.lognormal(0.0, 1.5, 2000)   # heavy tails: some rows capped
    p = mvs_probabilities(g, None, 0.0, 0.2, rng.random(N_PIVOTS))
    below = p < 1.0
    assert below.sum() > 1000 and (~below).sum() > 0
    ratio = p[below] / np.abs(g[below])         # p proportional to |g| below the cap
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)
    assert np.all(np.abs(g[~below]) >= np.abs(g[below]).max())
    p = mvs_probabilities(g, np.full(2000, 0.7), 1e12, 0.2, rng.random(N_PIVOTS))
    np.testing.assert_allclose(p, 0.2, rtol=1e-6)


def test_mvs_degenerate_gradients():
    rng = np.random.default_rng(0)
    n = 400
    # all g_hat == 0: no threshold, uniform probabilities p = subsample
    p = mvs_probabilities(np.zeros(n), np.zeros(n), 0.1, 0.25, rng.random(N_PIVOTS))
    np.testing.assert_allclose(p, 0.25)
    # fewer positive rows than the budget: those are certain, the zeros share the rest uniformly
    g = np.zeros(n)
    g[:10] = rng.random(10) + 0.1
    p = mvs_probabilities(g, None, 0.0, 0.25, rng.random(N_PIVOTS))
    np.testing.assert_allclose(p[:10], 1.0)
    np.testing.assert_allclose(p[10:], (100 - 10) / (n - 10))
    # rows with g_hat == 0 under mu > 0 are never sampled
    g = np.where(rng.random(n) < 0.5, 0.0, rng.standard_normal(n))
    sampler = MVS(subsample=0.2, mvs_lambda=0.0)
    for seed in range(20):
        rows, w = sampler.sample(g, np.ones(n), 0, np.random.default_rng(seed))
        assert np.all(g[rows] != 0.0)
    # subsample 1: every row, weight 1
    rows, w = MVS(subsample=1.0).sample(g, np.ones(n), 0, rng)
    np.testing.assert_array_equal(rows, np.arange(n))
    np.testing.assert_array_equal(w, 1.0)
    # never empty, even when the expected size is far below one row
    rows, w = MVS(subsample=1e-6).sample(rng.random(50), None, 0, rng)
    assert rows.size >= 1 and np.all(w >= 1.0)


def test_mvs_sample_matches_its_probabilities():
    rng = np.random.default_rng(1)
    n = 300
    g, h = rng.standard_normal(n), rng.random(n) + 0.5
    sampler = MVS(subsample=0.3, mvs_lambda=0.5)
    counts = np.zeros(n)
    draws = 2000
    for seed in range(draws):
        rows, w = sampler.sample(g, h, 0, np.random.default_rng(seed))
        counts[rows] += 1
        # weights are 1 / p of Theorem 2 (the same pivots give the same mu)
        p = mvs_probabilities(g, h, 0.5, 0.3, np.random.default_rng(seed).random(N_PIVOTS))
        np.testing.assert_allclose(w, 1.0 / p[rows], rtol=1e-9)
    sd = np.sqrt(p * (1 - p) / draws) + 1e-12
    assert np.all(np.abs(counts / draws - p) < 5 * sd + 1e-9)


def test_adaptive_lambda_is_the_squared_root_newton_value():
    rng = np.random.default_rng(2)
    g, h = rng.standard_normal(100) + 0.3, rng.random(100) + 0.2
    assert adaptive_lambda(g, h) == pytest.approx((g.sum() / h.sum()) ** 2, rel=1e-12)
    assert adaptive_lambda(g, None) == pytest.approx(g.mean() ** 2, rel=1e-12)
    assert adaptive_lambda(g, np.zeros(100)) == 0.0
    lam = adaptive_lambda(g, h)
    a = MVSAdaptive(subsample=0.3).sample(g, h, 0, np.random.default_rng(5))
    b = MVS(subsample=0.3, mvs_lambda=lam).sample(g, h, 0, np.random.default_rng(5))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], rtol=1e-12)
    assert MVSAdaptive().lambda_for(g, h) == lam
    assert MVS(mvs_lambda=0.3).lambda_for(g, h) == 0.3
    assert GOSS().lambda_for(g, h) is None


UNBIASED = [SGB(subsample=0.2), GOSS(top_rate=0.1, other_rate=0.15),
            GOSS(top_rate=0.3, other_rate=0.05, goss_style="lightgbm"),
            MVS(subsample=0.2, mvs_lambda=0.1),
            MVS(subsample=0.2, mvs_lambda=0.0),
            MVSAdaptive(subsample=0.2)]


@pytest.mark.parametrize("sampler", UNBIASED, ids=lambda s: f"{s.kind}-{getattr(s, 'goss_style', '')}")
def test_weighted_node_sums_are_unbiased(sampler):
    rng = np.random.default_rng(7)
    n = 257
    g = rng.standard_normal(n) * rng.lognormal(0, 1, n) + 0.2
    h = rng.random(n) + 0.05
    node = rng.random(n) < 0.3                    # a fixed "node": a subset of the rows
    draws = 2000
    sums = np.empty((draws, 2))
    gen = np.random.default_rng(11)
    for t in range(draws):
        rows, w = sampler.sample(g, h, 100, gen)
        inside = node[rows]
        sums[t] = (w[inside] * g[rows][inside]).sum(), (w[inside] * h[rows][inside]).sum()
    true = np.array([g[node].sum(), h[node].sum()])
    se = sums.std(axis=0, ddof=1) / np.sqrt(draws)
    assert np.all(se > 0)
    assert np.all(np.abs(sums.mean(axis=0) - true) < 4 * se), (sums.mean(axis=0), true, se)


def test_goss_counts_and_weights():
    rng = np.random.default_rng(4)
    n = 1003
    g, h = rng.standard_normal(n), rng.random(n) + 0.1
    sampler = GOSS(top_rate=0.2, other_rate=0.1)
    rows, w = sampler.sample(g, h, 0, rng)
    a, b = round(0.2 * n), round(0.1 * n)
    assert rows.size == a + b
    top = np.argsort(-np.abs(g))[:a]
    assert set(top) <= set(rows.tolist())
    np.testing.assert_array_equal(w[np.isin(rows, top)], 1.0)
    np.testing.assert_allclose(w[~np.isin(rows, top)], (n - a) / b, rtol=1e-15)
    # LightGBM style: ranked by |g h|, nothing sampled during the first floor(1 / learning_rate) iterations
    lgb = GOSS(top_rate=0.2, other_rate=0.1, goss_style="lightgbm", learning_rate=0.3)
    for it in range(3):
        rows, w = lgb.sample(g, h, it, rng)
        np.testing.assert_array_equal(rows, np.arange(n))
        np.testing.assert_array_equal(w, 1.0)
    rows, w = lgb.sample(g, h, 3, rng)
    assert rows.size == a + b
    top_gh = np.argsort(-np.abs(g * h))[:a]
    np.testing.assert_array_equal(np.sort(rows[w == 1.0]), np.sort(top_gh))
    assert not set(top) <= set(rows.tolist())     # a different ranking than |g|
    # rounding can make a + b exceed N: b is clipped, never more rows than N
    rows, w = GOSS(top_rate=1 / 6, other_rate=5 / 6).sample(rng.random(9), None, 0, rng)
    np.testing.assert_array_equal(rows, np.arange(9))


def test_sgb_count_weights_and_determinism():
    g = np.random.default_rng(0).standard_normal(1001)
    for kind, kw in [("sgb", {"subsample": 0.3}), ("goss", {}), ("mvs", {}), ("mvs_adaptive", {})]:
        sampler = SAMPLERS[kind](**kw)
        rows, w = sampler.sample(g, None, 0, np.random.default_rng(42))
        assert rows.dtype == np.int32 and w.dtype == np.float64 and rows.shape == w.shape
        assert np.all(np.diff(rows) > 0) and rows[0] >= 0 and rows[-1] < g.size
        again = sampler.sample(g, None, 0, np.random.default_rng(42))
        np.testing.assert_array_equal(again[0], rows)
        np.testing.assert_array_equal(again[1], w)
        other = sampler.sample(g, None, 0, np.random.default_rng(43))
        assert not np.array_equal(other[0], rows)
        if kind == "sgb":
            k = round(0.3 * g.size)
            assert rows.size == k
            np.testing.assert_allclose(w, g.size / k, rtol=1e-15)
    rows, w = SGB(subsample=1e-9).sample(g, None, 0, np.random.default_rng(0))
    assert rows.size == 1


def test_from_params_builds_with_defaults():
    assert from_params(None) is None
    assert from_params("sgb") == SGB(subsample=0.5)
    s = from_params("goss", top_rate=0.3, goss_style="lightgbm", learning_rate=0.05)
    assert (s.top_rate, s.other_rate, s.goss_style, s.learning_rate) == (0.3, 0.1, "lightgbm", 0.05)
    assert from_params("mvs").mvs_lambda == 0.1
    assert {from_params(k).kind for k in SAMPLERS} == set(SAMPLERS)


def test_registry_of_the_built_in_samplers():
    assert list(SAMPLERS) == ["sgb", "goss", "mvs", "mvs_adaptive"]
    assert [cls.kind for cls in SAMPLERS.values()] == list(SAMPLERS)
    assert all(issubclass(cls, RowSampler) for cls in SAMPLERS.values())
    # each sampler declares exactly the estimator arguments it reads
    assert SGB.arguments() == ("subsample",)
    assert GOSS.arguments() == ("top_rate", "other_rate", "goss_style")
    assert MVS.arguments() == ("subsample", "mvs_lambda")
    assert MVSAdaptive.arguments() == ("subsample",)
    assert dict(USED_BY) == {"subsample": ("sgb", "mvs", "mvs_adaptive"), "top_rate": ("goss",),
                             "other_rate": ("goss",), "mvs_lambda": ("mvs",), "goss_style": ("goss",)}
    assert dict(DEFAULTS) == {"subsample": 0.5, "top_rate": 0.2, "other_rate": 0.1, "mvs_lambda": 0.1,
                              "goss_style": "paper"}
    # built directly, a sampler checks its own parameters and has no others
    with pytest.raises(ValueError, match="top_rate \\+ other_rate"):
        GOSS(top_rate=0.7, other_rate=0.4)
    with pytest.raises(ValueError, match="subsample"):
        MVSAdaptive(subsample=0.0)
    with pytest.raises(TypeError):
        MVS(goss_style="lightgbm")
    with pytest.raises(TypeError):
        RowSampler()          # abstract


@pytest.mark.parametrize("kwargs, name", [
    (dict(sampler="bogus"), "sampler"),
    (dict(sampler="sgb", subsample=0.0), "subsample"),
    (dict(sampler="mvs", subsample=1.5), "subsample"),
    (dict(sampler="goss", top_rate=0.6, other_rate=0.5), "top_rate \\+ other_rate"),
    (dict(sampler="goss", top_rate=1.0), "top_rate"),
    (dict(sampler="goss", other_rate=0.0), "other_rate"),
    (dict(sampler="mvs", mvs_lambda=-0.1), "mvs_lambda"),
    (dict(sampler="mvs", mvs_lambda=float("inf")), "mvs_lambda"),
    (dict(sampler=None, subsample=1.5), "subsample"),        # checked even where not read
    (dict(sampler="sgb", mvs_lambda=-1.0), "mvs_lambda"),
    (dict(sampler=None, goss_style="catboost"), "goss_style"),
    (dict(sampler="goss", goss_style="catboost"), "goss_style"),
    (dict(sampler="goss", goss_style="lightgbm", learning_rate=0.0), "learning_rate"),
])
def test_from_params_refuses_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        from_params(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(sampler="goss", subsample=0.3),
     'subsample ignored with sampler="goss" \\(read subsample by sampler in \\(sgb, mvs, mvs_adaptive\\)\\)'),
    (dict(sampler=None, top_rate=0.1), "top_rate ignored with sampler=None"),
    (dict(sampler="mvs_adaptive", mvs_lambda=0.3), 'mvs_lambda ignored with sampler="mvs_adaptive"'),
    (dict(sampler="sgb", other_rate=0.3, top_rate=0.1), "top_rate, other_rate ignored"),
    (dict(sampler="mvs", goss_style="lightgbm"), 'goss_style ignored with sampler="mvs"'),
])
def test_from_params_warns_and_ignores_unused_arguments(kwargs, message):
    with pytest.warns(UserWarning, match=message):
        got = from_params(**kwargs)
    plain = from_params(kwargs["sampler"])       # the same sampler as without the unused arguments
    assert got == plain


def test_selection_passes_over_the_parts_of_the_rows_are_one_pass():
    """Algorithm S continued part after part (a Dask fit's shards) draws what one pass draws."""
    from gbfs.sampling.kernels import selection_pass, sequential_select

    rng = np.random.default_rng(12)
    n, k = 1000, 150
    top = rng.random(n) < 0.2
    u = rng.random(n)
    rows, w = sequential_select(top, int(top.sum()), k, u, 3.5)
    need, left, got, weights = k, n - int(top.sum()), [], []
    for a, b in [(0, 0), (0, 317), (317, 318), (318, 600), (600, 1000)]:
        t = top[a:b]
        r, ww = selection_pass(t, int(t.sum()), need, left, u[a:b], 3.5)
        need, left = need - (r.size - int(t.sum())), left - (b - a - int(t.sum()))
        got.append(r + a)
        weights.append(ww)
    assert need == 0 and left == 0 and rows.size == int(top.sum()) + k
    np.testing.assert_array_equal(np.concatenate(got), rows)
    np.testing.assert_array_equal(np.concatenate(weights), w)
