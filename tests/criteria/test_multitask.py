"""Multitask A-GBM / GT-GBM (GT-GBM paper, Algorithm 1, Eq. 2) against references: the Eq. 2 split
choice by brute force, the special cases (one task, mu_t = 0, mu_G = 0), Omega_G / Omega_t
bookkeeping and the pending-leaf refresh, determinism and the baselines."""

from __future__ import annotations

import naive
import numpy as np
import pytest
from grower_cases import refresh_case

from gbfs import GBFSClassifier, GBFSMultitaskClassifier, GBFSMultitaskRegressor
from gbfs.baselines.multitask import IndependentTasks, PooledTasks
from gbfs.booster.binning import BinMapper
from gbfs.booster.growing.grower import GrowthParams, TreeGrower
from gbfs.booster.tree_step import TreeStep
from gbfs.criteria.multitask_usage import MultitaskUsage
from gbfs.criteria.penalty import FeatureUsage

BASE = dict(n_estimators=15, max_leaves=6, min_samples_leaf=5, random_state=0, n_threads=1)


def _tasks_data(n_tasks=3, n_per=300, d=12, seed=0):
    """Feature 0 matters for every task, feature 1 + t for task t only; the rest is noise."""
    rng = np.random.default_rng(seed)
    X = rng.random((n_tasks * n_per, d))
    task = np.repeat(np.arange(n_tasks), n_per)
    logit = 3 * (X[:, 0] - 0.5) + 3 * (X[np.arange(len(task)), 1 + task] - 0.5)
    y = (logit + 0.4 * rng.standard_normal(len(task)) > 0).astype(int)
    return X, y, task


def _same_trees(a, b):
    assert len(a) == len(b)
    for s, t in zip(a, b):
        np.testing.assert_array_equal(s.feature, t.feature)
        np.testing.assert_array_equal(s.bin_threshold, t.bin_threshold)
        np.testing.assert_array_equal(s.value, t.value)


# -- Eq. 2 ----------------------------------------------------------------------------------------
def test_eq2_penalty_vector_by_hand():
    costs = np.array([1.0, 2.0, 1.0, 0.5, 1.0])
    u = MultitaskUsage(5, 2, mu_group=0.1, mu_task=0.03, costs=costs, bags=np.array([0, 0, 1, 2, 3]))
    np.testing.assert_allclose(u.task(1).penalty(), 0.13 * costs)
    u.mark_used(0, 1)             # task 0 uses feature 1: bag 0 (features 0, 1) joins Omega_G, Omega_0
    np.testing.assert_allclose(u.task(0).penalty(), [0, 0, 0.13, 0.065, 0.13])
    np.testing.assert_allclose(u.task(1).penalty(), [0.03, 0.06, 0.13, 0.065, 0.13])
    assert u.order == [1] and u.task_order == [[1], []]
    v = u.version
    u.mark_used(1, 0)             # bag 0 joins Omega_1: its task price drops
    assert u.version > v
    np.testing.assert_allclose(u.task(1).penalty(), [0, 0, 0.13, 0.065, 0.13])
    assert u.order == [1, 0] and u.task_order == [[1], [0]]
    assert not u.mark_used(1, 0)  # nothing new: no version bump
    budget = MultitaskUsage(4, 2, 0.1, 0.05, max_features=1)
    budget.mark_used(0, 2)
    assert budget.task(1).full
    np.testing.assert_array_equal(budget.task(1).penalty(), [np.inf, np.inf, 0.05, np.inf])
    np.testing.assert_array_equal(budget.task(1).allowed_features(), [2])


def _eq2_case(seed):
    """A stump per task on its own rows: the grower's feature is the brute-force argmax of
    gain / SSE_root - mu_G 1{j not in Omega_G} - mu_t 1{j not in Omega_t}.  Returns, per task, the
    penalised and the plain argmax."""
    rng = np.random.default_rng(seed)
    n, d = 200, 6
    X = rng.random((n, d))
    mapper = BinMapper(32, None, np.random.default_rng(0)).fit(X)
    Xb = mapper.transform(X)
    mu_g, mu_t = rng.uniform(0.0, 0.05, 2)
    usage = MultitaskUsage(d, 2, mu_g, mu_t)
    for f in rng.choice(d, 2, replace=False):  # a history: some features in Omega_G, some in Omega_0
        usage.mark_used(int(rng.integers(2)), int(f))
    params = GrowthParams(max_leaves=2, min_samples_leaf=5)
    winners = []
    for t in range(2):
        r = rng.standard_normal(n) + 0.8 * (X[:, t] - 0.5) + 0.6 * (X[:, 2 + t] - 0.5)
        rows, h = np.arange(n, dtype=np.int32), np.ones(n)
        norm = naive.sse(r)
        n_bins = mapper.n_bins_non_missing_
        gains = np.array([naive.best_split_feature(Xb[:, j], r, h, n_bins[j], 5, 1e-3, 0.0)[0]
                          for j in range(d)])
        pen = (mu_g * ~np.isin(np.arange(d), usage.order)
               + mu_t * ~np.isin(np.arange(d), usage.task_order[t]))
        expected = int(np.argmax(gains / norm - pen))
        assert gains[expected] / norm - pen[expected] > 0
        grown = TreeGrower(Xb, mapper, params).grow(rows, r, h, usage.task(t), norm, hw_is_one=True)
        tree = grown.builder.build(np.zeros(3))
        assert tree.feature[0] == expected
        assert usage.task_used[t, expected] and expected in usage.order
        winners.append((expected, int(np.argmax(gains))))
    return winners


def test_eq2_split_choice_matches_brute_force():
    cases = [w for seed in range(10) for w in _eq2_case(seed)]
    # not vacuous: the penalty changes the winner in some cases and not in others
    assert any(w != g for w, g in cases) and any(w == g for w, g in cases)


def test_pending_leaves_are_refreshed_within_a_task_tree():
    """The grower's hand-made refresh case, priced by Eq. 2 for task 1 (mu_G + mu_t = 100, nothing
    used yet): after L's split adds B to Omega_G and Omega_1, the pending R is re-scored and splits
    on B -- without the refresh (LightGBM CEGB's bug) it would split on A."""
    X, mapper, Xb, r, h = refresh_case()
    rows = np.arange(X.shape[0], dtype=np.int32)
    params = GrowthParams(max_leaves=4, min_samples_leaf=1)
    usage = MultitaskUsage(2, 2, 60.0, 40.0)
    grown = TreeGrower(Xb, mapper, params).grow(rows, r, h, usage.task(1), 1.0)
    tree = grown.builder.build(np.zeros(7))
    np.testing.assert_array_equal(tree.feature, [0, 1, 1, -1, -1, -1, -1])
    assert usage.task_order == [[], [0, 1]] and usage.order == [0, 1]
    # the next task's tree starts with both features in Omega_G: it pays mu_t = 40 only
    np.testing.assert_array_equal(usage.task(0).penalty(), [40.0, 40.0])
    fresh, _, _ = naive.grow(Xb, mapper.n_bins_non_missing_, rows, r, h, mu=100.0, max_leaves=4)
    stale, _, _ = naive.grow(Xb, mapper.n_bins_non_missing_, rows, r, h, mu=100.0, max_leaves=4,
                             refresh=False)
    assert fresh.feature == tree.feature.tolist() and stale.feature[2] == 0


# -- special cases --------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(method="agbm", mu=0.005),
                                dict(method="gtgbm", mu=0.005, n_target_features=2),
                                dict(method="gbfs", mu=1.0, sampler="mvs", subsample=0.4),
                                dict(method="agbm", mu=0.005, max_features=3,
                                     feature_bags=np.arange(12) // 2),
                                dict(method="agbm", mu=0.005, feature_costs=np.linspace(0.5, 2, 12),
                                     sampler="goss", criterion="newton", leaf_estimate="newton")],
                         ids=["agbm", "gtgbm", "gbfs-mvs", "budget-bags", "costs-goss-newton"])
def test_one_task_is_exactly_the_single_task_model(kw):
    X, y, _ = _tasks_data(1, 500)
    single = GBFSClassifier(**BASE, **kw).fit(X, y)
    # mu_t = 0: mu_G prices every first use; and mu_G + mu_t split in two halves (exact in binary)
    for split in ({"mu_task": 0.0}, {"mu": kw["mu"] / 2, "mu_task": kw["mu"] / 2}):
        multi = GBFSMultitaskClassifier(**BASE, **{**kw, **split}).fit(X, y, np.zeros(len(y), dtype=int))
        _same_trees(single.trees_, multi.trees_[0])
        np.testing.assert_array_equal(single.selected_features_, multi.selected_features_per_task_[0])
        np.testing.assert_array_equal(single.predict_proba(X), multi.predict_proba(X, np.zeros(len(y))))


def _reference_shared_omega(X, y, task, params_est):
    """GroupSparse by hand: Algorithm 1 with one FeatureUsage (Omega) shared by all tasks."""
    est = GBFSMultitaskClassifier(**params_est)
    params = est._validate_params()
    mapper = BinMapper(est.max_bins, est.bin_subsample, np.random.default_rng(
        np.random.RandomState(est.random_state).randint(np.iinfo(np.int32).max))).fit(X)
    Xb = mapper.transform(X)
    steps = [TreeStep(np.asfortranarray(Xb[task == t]), y[task == t].astype(float), mapper, params)
             for t in range(task.max() + 1)]
    usage = FeatureUsage(X.shape[1], est.mu)
    trees = [[] for _ in steps]
    for it in range(params.n_estimators):
        for t, step in enumerate(steps):
            trees[t].append(step.grow(it, usage)[0])
    return trees, usage.order


def test_mu_task_zero_is_group_sparse():
    X, y, task = _tasks_data()
    kw = dict(BASE, method="agbm", mu=0.01)
    ref, order = _reference_shared_omega(X, y, task, kw)
    multi = GBFSMultitaskClassifier(**kw, mu_task=0.0).fit(X, y, task)
    for t in range(3):
        _same_trees(ref[t], multi.trees_[t])
    assert multi.selected_features_.tolist() == order
    # a feature one task pays for is free for the others: task 2 uses feature 0 without paying
    assert all(0 in sel for sel in multi.selected_features_per_task_)


def test_mu_group_zero_is_independent_selection():
    """mu_G = 0: each task's trees are those of a single-task fit with mu = mu_t on its rows (the
    tasks share X here, so the bins are the same)."""
    rng = np.random.default_rng(1)
    X = rng.integers(0, 30, (400, 10)) / 30  # few distinct values: every task's bins are the same
    ys = [(X[:, t] + X[:, 5 + t] + 0.3 * rng.standard_normal(400) > 1).astype(int) for t in range(3)]
    Xs, y, task = np.vstack([X] * 3), np.concatenate(ys), np.repeat(np.arange(3), 400)
    kw = dict(BASE, method="agbm")
    multi = GBFSMultitaskClassifier(**kw, mu=0.0, mu_task=0.01).fit(Xs, y, task)
    for t in range(3):
        single = GBFSClassifier(**kw, mu=0.01).fit(X, ys[t])
        _same_trees(single.trees_, multi.trees_[t])
        np.testing.assert_array_equal(single.selected_features_, multi.selected_features_per_task_[t])
    assert len({tuple(s) for s in multi.selected_features_per_task_}) > 1


# -- bookkeeping, budget, determinism -----------------------------------------------------------------
def test_omega_bookkeeping_matches_the_trees():
    X, y, task = _tasks_data()
    m = GBFSMultitaskClassifier(**BASE, method="agbm", mu=0.01, mu_task=0.02).fit(X, y, task)
    per = [set(s.tolist()) for s in m.selected_features_per_task_]
    for t in range(3):
        used = {int(f) for tr in m.trees_[t] for f in tr.used_features()}
        assert per[t] == used
        assert {0, 1 + t} <= per[t], "each task finds the shared feature and its own"
    assert set(m.selected_features_.tolist()) == set().union(*per)
    assert m.history_[-1]["n_features_used"] == len(m.selected_features_)
    assert [m.history_[-1][f"n_features_used_task{t}"] for t in range(3)] == [len(p) for p in per]
    assert m.get_support(indices=True).tolist() == sorted(m.selected_features_.tolist())


def test_budget_caps_omega_g_across_tasks():
    X, y, task = _tasks_data()
    m = GBFSMultitaskClassifier(**BASE, method="agbm", mu=0.0, mu_task=0.0, max_features=2).fit(X, y, task)
    assert len(m.selected_features_) <= 2
    assert all(set(s.tolist()) <= set(m.selected_features_.tolist()) for s in m.selected_features_per_task_)


@pytest.mark.parametrize("kw", [dict(method="gtgbm", n_target_features=2, group_test_scope="tree"),
                                dict(method="agbm", sampler="sgb", subsample=0.5)])
def test_same_seed_same_model(kw):
    X, y, task = _tasks_data()
    a = GBFSMultitaskClassifier(**BASE, mu=0.01, mu_task=0.01, **kw).fit(X, y, task)
    b = GBFSMultitaskClassifier(**BASE, mu=0.01, mu_task=0.01, **kw).fit(X, y, task)
    for t in range(3):
        _same_trees(a.trees_[t], b.trees_[t])
    c = GBFSMultitaskClassifier(**{**BASE, "random_state": 5}, mu=0.01, mu_task=0.01, **kw).fit(X, y, task)
    assert any(not np.array_equal(p.value, q.value)
               for t in range(3) for p, q in zip(a.trees_[t], c.trees_[t]))


def test_eval_set_history_and_early_stopping():
    X, y, task = _tasks_data()
    Xv, yv, tv = _tasks_data(seed=1)
    m = GBFSMultitaskClassifier(**{**BASE, "n_estimators": 200}, mu=0.01, mu_task=0.01, learning_rate=0.3,
                                early_stopping_rounds=5).fit(X, y, task, eval_set=(Xv, yv, tv))
    assert m.best_iteration_ is not None and len(m.trees_[0]) == m.best_iteration_ + 1
    rec = m.history_[m.best_iteration_]
    for t in range(3):
        assert 0.5 < rec[f"val_auc_task{t}"] <= 1.0
    # Total: task-size weighted (equal sizes here: the mean)
    assert rec["val_auc"] == pytest.approx(np.mean([rec[f"val_auc_task{t}"] for t in range(3)]))
    p = m.predict_proba(Xv, tv)[:, 1]
    assert rec["val_loss"] == pytest.approx(-np.mean(yv * np.log(p) + (1 - yv) * np.log(1 - p)), rel=1e-9)


def test_string_task_labels_and_regressor():
    X, y, task = _tasks_data()
    names = np.array(["de", "fr", "us"])[task]
    noise = 0.1 * np.random.default_rng(0).standard_normal(len(task))
    yr = X[:, 0] + X[np.arange(len(task)), 1 + task] + noise
    m = GBFSMultitaskRegressor(**BASE, mu=0.01, mu_task=0.01).fit(X, yr, names)
    assert m.tasks_.tolist() == ["de", "fr", "us"]
    assert m.score(X, yr, names) > 0.5
    # a row's prediction depends on its task label only through that task's trees
    Xf = X[task == 1][:5]
    np.testing.assert_array_equal(m.predict(Xf, ["fr"] * 5), m.predict(X, names)[task == 1][:5])
    assert not np.array_equal(m.predict(Xf, ["fr"] * 5), m.predict(Xf, ["de"] * 5))


# -- bad input ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, fit_kw, match", [
    (dict(mu=0.6, mu_task=0.6), {}, "mu \\+ mu_task"),
    (dict(mu_task=-1), {}, "mu_task"),
    (dict(refit=True), {}, "refit"),
    (dict(method="topk", max_features=3), {}, "topk"),
    ({}, dict(task=np.zeros(5)), "task"),
    ({}, dict(task=np.full(900, 0.5)), "task"),
    ({}, dict(eval_set=(np.zeros((3, 12)), np.zeros(3))), "eval_set"),
])
def test_bad_input_names_the_argument(kw, fit_kw, match):
    X, y, task = _tasks_data()
    args = {"task": task, **fit_kw}
    with pytest.raises((ValueError, TypeError), match=match):
        GBFSMultitaskClassifier(**BASE, **kw).fit(X, y, **args)


def test_unknown_task_at_predict():
    X, y, task = _tasks_data()
    m = GBFSMultitaskClassifier(**BASE).fit(X, y, task)
    with pytest.raises(ValueError, match="task has labels \\[7\\] not seen in fit"):
        m.predict(X[:3], [0, 7, 1])


def test_clone_and_params():
    from sklearn.base import clone

    m = GBFSMultitaskClassifier(mu=0.02, mu_task=0.003)
    assert clone(m).get_params()["mu_task"] == 0.003
    assert "mu_task" in repr(m)
    assert set(GBFSClassifier().get_params()) | {"mu_task"} == set(m.get_params())


# -- baselines ----------------------------------------------------------------------------------------
def test_baselines_fit_predict_and_selection():
    X, y, task = _tasks_data()
    pooled = PooledTasks(GBFSClassifier(**BASE, mu=0.005)).fit(X, y, task)
    assert pooled.estimator_.n_features_in_ == X.shape[1] + 3  # one-hot task columns
    assert pooled.selected_features_.max() < X.shape[1]        # never counted as selected
    assert pooled.predict_proba(X, task).shape == (len(y), 2)
    indep = IndependentTasks(GBFSClassifier(**BASE, mu=0.005)).fit(X, y, task)
    for t in range(3):
        single = GBFSClassifier(**BASE, mu=0.005).fit(X[task == t], y[task == t])
        np.testing.assert_array_equal(indep.predict_proba(X[task == t], task[task == t]),
                                      single.predict_proba(X[task == t]))
        assert indep.selected_features_per_task_[t].tolist() == single.selected_features_.tolist()


@pytest.mark.slow
def test_multitask_beats_groupsparse_and_pooled_on_synthetic_tasks():
    """Tasks with their own features: Eq. 2's task penalty keeps each task's set small and finds
    its own features; GroupSparse gives every task the union, the pooled model mixes tasks."""
    from gbfs.booster.losses.metrics import average_precision, task_weighted
    from gbfs.data.synthetic.multitask import multitask

    d = multitask(scale=0.25, n_tasks=3, n_features=60, n_shared=3, n_specific=2, random_state=0)
    kw = dict(n_estimators=80, max_depth=3, max_leaves=None, min_samples_leaf=10, random_state=0)

    def total(model):
        p = model.predict_proba(d.X_test, d.task_test)[:, 1]
        per_task = [average_precision(d.y_test[d.task_test == t], p[d.task_test == t]) for t in range(3)]
        return task_weighted(per_task, np.bincount(d.task_test))

    multi = GBFSMultitaskClassifier(**kw, mu=0.01, mu_task=0.01).fit(d.X_train, d.y_train, d.task_train)
    group = GBFSMultitaskClassifier(**kw, mu=0.01, mu_task=0.0).fit(d.X_train, d.y_train, d.task_train)
    pooled = PooledTasks(GBFSClassifier(**kw, mu=0.01)).fit(d.X_train, d.y_train, d.task_train)
    for t in range(3):
        own = set(d.relevant_per_task[t].tolist())
        assert own <= set(multi.selected_features_per_task_[t].tolist())
    assert total(multi) > total(group) - 0.005 and total(multi) > total(pooled)


def test_dataclass_params_untouched():
    # the estimator's validation must not alter what the user passed
    costs = np.linspace(1, 2, 12)
    m = GBFSMultitaskClassifier(**BASE, feature_costs=costs)
    X, y, task = _tasks_data()
    m.fit(X, y, task)
    np.testing.assert_array_equal(m.feature_costs, np.linspace(1, 2, 12))


# -- model files ----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, labels", [(GBFSMultitaskClassifier, None),
                                         (GBFSMultitaskRegressor, ["b", "a", "c"])])
def test_save_load_round_trip(tmp_path, cls, labels):
    from gbfs import load_model

    X, y, task = _tasks_data()
    task = task if labels is None else np.asarray(labels)[task]
    target = y if cls is GBFSMultitaskClassifier else X[:, 0] + y
    m = cls(**BASE, method="gtgbm", n_target_features=2, mu=0.01, mu_task=0.01).fit(X, target, task)
    m.save_model(tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    assert type(back) is cls and back.get_params()["mu_task"] == 0.01
    np.testing.assert_array_equal(back.predict(X, task), m.predict(X, task))
    assert [s.tolist() for s in back.selected_features_per_task_] == \
        [s.tolist() for s in m.selected_features_per_task_]
    np.testing.assert_array_equal(back.tasks_, m.tasks_)
    back.save_model(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "m.json").read_bytes()


def test_tampered_multitask_file_is_refused(tmp_path):
    import json

    from gbfs import load_model
    from gbfs.io.envelope import checksum

    X, y, task = _tasks_data()
    GBFSMultitaskClassifier(**BASE).fit(X, y, task).save_model(tmp_path / "m.json")
    body = json.loads((tmp_path / "m.json").read_text())
    body["task_trees"] = body["task_trees"][:2]  # a task lost, re-signed
    body["checksum"] = checksum({k: v for k, v in body.items() if k != "checksum"})
    (tmp_path / "bad.json").write_text(json.dumps(body))
    with pytest.raises(ValueError, match="bad.json: task_trees must hold one list of trees per task"):
        load_model(tmp_path / "bad.json")
