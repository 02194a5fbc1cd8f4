"""Learning to rank: LambdaRank's residuals against a naive pairwise reference, NDCG and MRR against
scikit-learn and by hand, GBFSRanker against LightGBM's lambdarank, its methods and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from estimator_cases import every_method

from gbfs import load_model
from gbfs.booster.losses.ranking import group_offsets, lambdarank_residuals, mrr, ndcg_at, precision_at
from gbfs.estimators.ranker import GBFSRanker


def _naive_lambdas(y, s, truncation=30, sigma=1.0, norm=True):
    """LambdaRank of one query written from its definition, pair by pair."""
    n = len(y)
    r, h = np.zeros(n), np.zeros(n)
    ideal = sorted(y, reverse=True)[:truncation]
    max_dcg = sum((2.0**v - 1) / math.log2(2 + i) for i, v in enumerate(ideal))
    if n < 2 or max_dcg == 0:
        return r, h
    order = sorted(range(n), key=lambda i: (-s[i], i))
    rank = {i: k for k, i in enumerate(order)}
    total = 0.0
    for i in range(n):
        for j in range(n):
            if y[i] <= y[j] or min(rank[i], rank[j]) >= truncation:
                continue   # each pair once, as (higher label, lower label)
            delta = abs(1 / math.log2(2 + rank[i]) - 1 / math.log2(2 + rank[j]))
            dndcg = (2.0 ** y[i] - 2.0 ** y[j]) * delta / max_dcg
            if norm and max(s) != min(s):
                dndcg /= 0.01 + abs(s[i] - s[j])
            p = 1 / (1 + math.exp(sigma * (s[i] - s[j])))
            r[i] += sigma * dndcg * p
            r[j] -= sigma * dndcg * p
            h[i] += sigma**2 * dndcg * p * (1 - p)
            h[j] += sigma**2 * dndcg * p * (1 - p)
            total += 2 * sigma * dndcg * p
    if norm and total > 0:
        r, h = r * math.log2(1 + total) / total, h * math.log2(1 + total) / total
    return r, h


@pytest.mark.parametrize("seed", range(8))
def test_lambdas_match_the_naive_pairwise_reference(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, 6)
    y = rng.integers(0, 4, sizes.sum()).astype(float)
    s = np.round(rng.normal(size=sizes.sum()), 1)            # some tied scores
    if seed == 0:
        s[:sizes[0]] = 0.3                                   # a query whose scores all tie
    offsets = group_offsets(sizes, len(y))
    trunc = 3 if seed % 2 else 30
    r, h = np.empty_like(y), np.empty_like(y)
    lambdarank_residuals(y, s, offsets, trunc, 1.0, True, r, h)
    for q in range(len(sizes)):
        a, b = offsets[q], offsets[q + 1]
        want_r, want_h = _naive_lambdas(list(y[a:b]), list(s[a:b]), trunc)
        np.testing.assert_allclose(r[a:b], want_r, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(h[a:b], want_h, rtol=1e-12, atol=1e-15)


def test_ndcg_and_mrr():
    from sklearn.metrics import ndcg_score

    rng = np.random.default_rng(0)
    sizes = rng.integers(3, 12, 20)
    y = rng.integers(0, 4, sizes.sum()).astype(float)
    y[np.cumsum(sizes)[:-1]] = 1.0                           # every query has a relevant row
    s = rng.normal(size=sizes.sum())
    offsets = group_offsets(sizes, len(y))
    for k in (1, 5, 10):
        want = np.mean([ndcg_score([2 ** y[a:b] - 1], [s[a:b]], k=k)
                        for a, b in zip(offsets[:-1], offsets[1:])])
        assert ndcg_at(y, s, offsets, k) == pytest.approx(want, rel=1e-12)
    # MRR by hand: first relevant row at ranks 2 and 1; a query without one is left out
    y2, s2 = np.array([0, 1, 0, 2, 0, 0, 0]), np.array([0.9, 0.5, 0.1, 0.7, 0.2, 0.3, 0.1])
    assert mrr(y2, s2, np.array([0, 3, 5, 7])) == pytest.approx((1 / 2 + 1) / 2)
    assert ndcg_at(np.zeros(4), np.arange(4.0), np.array([0, 4])) == 1.0   # LightGBM: no relevant row -> 1


def test_precision_at_k_by_hand_and_against_a_naive_reference():
    # query 1 top-2 by score: rows 0 (0) and 1 (1) -> 1/2; query 2 (two rows): rows 3 (2), 4 (0) -> 1/2;
    # query 3 (one row, relevant): 1/1
    y, s = np.array([0, 1, 0, 2, 0, 1]), np.array([0.9, 0.5, 0.1, 0.7, 0.2, 0.0])
    assert precision_at(y, s, np.array([0, 3, 5, 6]), 2) == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    # ties keep row order: the first two rows of an all-tied query
    assert precision_at(np.array([0, 1, 1]), np.zeros(3), np.array([0, 3]), 2) == 0.5
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 9, 30)
    y, s = rng.integers(0, 3, sizes.sum()), rng.normal(size=sizes.sum())
    offsets = group_offsets(sizes, len(y))
    for k in (1, 2, 5):
        want = np.mean([np.mean(sorted(zip(-s[a:b], y[a:b] > 0))[:k], axis=0)[1]
                        for a, b in zip(offsets[:-1], offsets[1:])])
        assert precision_at(y, s, offsets, k) == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match="k must be at least 1"):
        precision_at(y, s, offsets, 0)


def ranking_data(n_queries, seed, d=20):
    """Queries of 5-20 rows; relevance from a score on features 0-3 (ranks within the query)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(5, 21, n_queries)
    X = rng.standard_normal((sizes.sum(), d))
    score = X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 2] * X[:, 3] + 0.3 * rng.standard_normal(len(X))
    y = np.zeros(len(X), dtype=int)
    offsets = group_offsets(sizes, len(X))
    for a, b in zip(offsets[:-1], offsets[1:]):
        ranks = np.argsort(np.argsort(-score[a:b]))
        y[a:b] = np.select([ranks == 0, ranks < 3, ranks < 6], [3, 2, 1], 0)
    return X, y, sizes


def test_ranker_matches_lightgbm_lambdarank():
    lgb = pytest.importorskip("lightgbm")
    X, y, g = ranking_data(300, 1)
    Xt, yt, gt = ranking_data(200, 2)
    ot = group_offsets(gt, len(yt))
    ours = GBFSRanker(mu=0.0, n_estimators=40, random_state=0).fit(X, y, g)
    ref = lgb.train({"objective": "lambdarank", "num_leaves": 31, "min_data_in_leaf": 20, "lambda_l2": 0.0,
                     "min_sum_hessian_in_leaf": 1e-3, "learning_rate": 0.1, "verbose": -1, "num_threads": 2,
                     "deterministic": True}, lgb.Dataset(X, y, group=g), 40)
    gap = ndcg_at(yt, ref.predict(Xt), ot) - ndcg_at(yt, ours.predict(Xt), ot)
    assert abs(gap) < 0.01
    assert ours.score(Xt, yt, gt) == pytest.approx(ndcg_at(yt, ours.predict(Xt), ot))


@pytest.mark.parametrize("params", every_method(3))
def test_every_method_ranks_and_round_trips(params, tmp_path):
    X, y, g = ranking_data(150, 3)
    Xv, yv, gv = ranking_data(60, 4)
    m = GBFSRanker(n_estimators=15, random_state=0, early_stopping_rounds=5, train_metrics="all", **params)
    m.fit(X, y, g, eval_set=(Xv, yv, gv))
    rec = m.history_[-1]
    assert {"train_ndcg@10", "train_mrr", "val_ndcg@10", "val_mrr"} <= set(rec)
    assert rec["val_loss"] == pytest.approx(1 - rec["val_ndcg@10"])
    assert set(m.selected_features_[:2]) <= {0, 1, 2, 3} and m.score(Xv, yv, gv) > 0.5
    m.save_model(tmp_path / "r.json")
    assert np.array_equal(load_model(tmp_path / "r.json").predict(Xv), m.predict(Xv))


def test_ranker_errors_name_the_argument():
    X, y, g = ranking_data(20, 0)
    with pytest.raises(ValueError, match="group sizes sum to"):
        GBFSRanker(n_estimators=2).fit(X, y, g[:-1])
    with pytest.raises(ValueError, match="group is required"):
        GBFSRanker(n_estimators=2).fit(X, y, None)
    with pytest.raises(ValueError, match="relevance grades"):
        GBFSRanker(n_estimators=2).fit(X, y - 1, g)
    with pytest.raises(ValueError, match=r"eval_set\[0\] group sizes sum"):
        GBFSRanker(n_estimators=2).fit(X, y, g, eval_set=(X, y, g[:-1]))
    with pytest.raises(ValueError, match="eval_at"):
        GBFSRanker(n_estimators=2, eval_at=0).fit(X, y, g)
    assert GBFSRanker().get_params()["criterion"] == "newton" and "eval_at" in GBFSRanker().get_params()


@pytest.mark.slow
def test_the_ranking_benchmark_runs(tmp_path):
    from runners.bench import main

    out = tmp_path / "ranking.json"
    assert main(["ranking", "--scale", "0.05", "--trees", "10", "--mu-grid", "0.01", "--gbfs-mu-grid", "10",
                 "--out", str(out)]) == 0
    import json

    result = json.loads(out.read_text())
    assert set(result["rows"]) == {"lightgbm", "ours", "gbfs", "agbm", "gtgbm", "gbdt_topk"}
    assert {"ndcg@10_gap_pt", "mrr_gap_pt", "agbm"} <= set(result["verdicts"])
