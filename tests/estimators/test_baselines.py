"""LightGBM baselines (gbfs.baselines.lightgbm_baseline): parity with direct LightGBM, history records,
top-k, CEGB,
first-use order, callbacks, model files and argument checks.

Every fit uses one thread: these are tiny data sets, and LightGBM's OpenMP barriers slow down badly
when other processes share the cores.
"""

from __future__ import annotations

import json

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import log_loss, roc_auc_score

from gbfs.baselines.lightgbm_baseline import LightGBMBaseline
from gbfs.booster.callbacks import EarlyStopException, record_evaluation

N_TREES = 30


@pytest.fixture(scope="module")
def cancer():
    """Breast cancer (569 x 30, real data) split 400 / 169."""
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(X.shape[0])
    X, y = X[idx], y[idx]
    return X[:400], y[:400], X[400:], y[400:]


def _est(kind="full", **kw):
    kw = {"n_estimators": N_TREES, "random_state": 0, "n_threads": 1, **kw}
    return LightGBMBaseline(kind, **kw)


def _direct_params(random_state=0, **extra):
    """The LightGBM parameters LightGBMBaseline documents, written out independently."""
    seed = int(np.random.RandomState(random_state).randint(np.iinfo(np.int32).max))
    return {"objective": "binary", "verbosity": -1, "deterministic": True, "force_col_wise": True,
            "seed": seed, "learning_rate": 0.1, "num_leaves": 31, "max_depth": -1, "min_data_in_leaf": 20,
            "lambda_l2": 0.0, "max_bin": 255, "num_threads": 1, **extra}


def _direct(X, y, **extra):
    params = _direct_params(**extra)
    return lgb.train(params, lgb.Dataset(X, y.astype(float), params=params), num_boost_round=N_TREES)


def _sigmoid(raw):
    return 1.0 / (1.0 + np.exp(-raw))


@pytest.fixture(scope="module")
def full_fit(cancer):
    Xtr, ytr, Xv, yv = cancer
    return _est().fit(Xtr, ytr, eval_set=(Xv, yv))


def test_full_equals_direct_lightgbm_and_metrics_match_sklearn(cancer, full_fit):
    Xtr, ytr, Xv, yv = cancer
    booster = _direct(Xtr, ytr)
    np.testing.assert_array_equal(full_fit.decision_function(Xv), booster.predict(Xv, raw_score=True))
    p = booster.predict(Xv)
    np.testing.assert_array_equal(full_fit.predict_proba(Xv)[:, 1], p)
    np.testing.assert_array_equal(full_fit.predict(Xv), (p > 0.5).astype(int))
    assert full_fit.n_iter_ == len(full_fit.history_) == N_TREES and full_fit.best_iteration_ is None
    last = full_fit.history_[-1]
    assert last["val_auc"] == pytest.approx(roc_auc_score(yv, p), rel=1e-12)
    assert last["val_rmse"] == pytest.approx(np.sqrt(np.mean((yv - p) ** 2)), rel=1e-12)
    assert last["val_loss"] == pytest.approx(log_loss(yv, p), rel=1e-9)
    ptr = booster.predict(Xtr)
    assert last["train_loss"] == pytest.approx(log_loss(ytr, ptr), rel=1e-9)
    assert last["train_auc"] == pytest.approx(roc_auc_score(ytr, ptr), rel=1e-12)
    np.testing.assert_array_equal(full_fit.columns_, np.arange(30))
    np.testing.assert_array_equal(full_fit.feature_importances_, booster.feature_importance("split"))
    assert set(full_fit.timings_) >= {"boosting_seconds", "precompute_seconds"}
    assert "ranking_seconds" not in full_fit.timings_ and full_fit.timings_["precompute_seconds"] == 0.0


def test_history_has_gbfs_classifier_keys(cancer, full_fit):
    from gbfs import GBFSClassifier

    Xtr, ytr, Xv, yv = cancer
    # the baseline records every training metric, as train_metrics="all" does
    gbfs = GBFSClassifier(n_estimators=2, max_leaves=4, random_state=0, train_metrics="all").fit(
        Xtr, ytr, eval_set=(Xv, yv))
    assert list(full_fit.history_[0]) == list(gbfs.history_[0])
    assert [r["iteration"] for r in full_fit.history_] == list(range(N_TREES))
    elapsed = [r["elapsed_seconds"] for r in full_fit.history_]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0
    assert full_fit.history_[-1]["n_features_used"] == full_fit.n_features_selected_


def test_root_variance_matches_naive_recomputation(cancer, full_fit):
    Xtr, ytr, _, _ = cancer
    ybar = ytr.mean()
    for it in (0, 1, 2, 10, N_TREES - 1):
        if it == 0:  # the constant initial score of boost_from_average: log-odds of the mean label
            raw = np.full(ytr.shape[0], np.log(ybar / (1 - ybar)))
        else:  # the model before tree `it`: trees 0..it-1
            raw = full_fit.booster_.predict(Xtr, num_iteration=it, raw_score=True)
        naive = np.var(ytr - _sigmoid(raw))
        assert full_fit.history_[it]["root_variance"] == pytest.approx(naive, rel=1e-9, abs=1e-15), it
    roots = [r["root_variance"] for r in full_fit.history_]
    assert roots[-1] < roots[0]


def test_topk_uses_top_k_columns_by_split_importance(cancer):
    Xtr, ytr, Xv, yv = cancer
    k = 5
    est = _est("topk", k=k).fit(Xtr, ytr, eval_set=(Xv, yv))
    imp = _direct(Xtr, ytr).feature_importance("split")
    expected = sorted(range(Xtr.shape[1]), key=lambda j: (-imp[j], j))[:k]
    assert est.columns_.tolist() == expected
    assert set(est.selected_features_.tolist()) <= set(expected)
    assert est.booster_.num_feature() == k
    assert np.all(est.feature_importances_[np.setdiff1d(np.arange(30), expected)] == 0)
    assert est.timings_["ranking_seconds"] > 0 and "boosting_seconds" in est.timings_
    # the refit is LightGBM on exactly those columns
    direct = _direct(np.ascontiguousarray(Xtr[:, expected]), ytr)
    np.testing.assert_array_equal(est.decision_function(Xv), direct.predict(Xv[:, expected], raw_score=True))
    # the other columns do not matter
    rng = np.random.default_rng(1)
    Xp = Xv.copy()
    for j in np.setdiff1d(np.arange(30), expected):
        Xp[:, j] = rng.permutation(Xp[:, j])
    np.testing.assert_array_equal(est.predict_proba(Xp), est.predict_proba(Xv))


def test_topk_gain_ranking_equals_direct_lightgbm_gain_order(cancer):
    Xtr, ytr, Xv, yv = cancer
    k = 5
    est = _est("topk", k=k, importance_type="gain").fit(Xtr, ytr, eval_set=(Xv, yv))
    gain = _direct(Xtr, ytr).feature_importance("gain")
    expected = sorted(range(Xtr.shape[1]), key=lambda j: (-gain[j], j))[:k]
    assert est.columns_.tolist() == expected
    split = _direct(Xtr, ytr).feature_importance("split")
    assert expected != sorted(range(Xtr.shape[1]), key=lambda j: (-split[j], j))[:k]  # a different ranking
    direct = _direct(np.ascontiguousarray(Xtr[:, expected]), ytr)
    np.testing.assert_array_equal(est.decision_function(Xv), direct.predict(Xv[:, expected], raw_score=True))


def test_topk_gain_model_file_round_trip(tmp_path, cancer):
    Xtr, ytr, Xv, _ = cancer
    est = _est("topk", k=4, importance_type="gain").fit(Xtr, ytr)
    est.save_model(tmp_path / "model.json")
    same = LightGBMBaseline.load_model(tmp_path / "model.json")
    assert same.importance_type == "gain" and same.get_params() == est.get_params()
    np.testing.assert_array_equal(same.columns_, est.columns_)
    np.testing.assert_array_equal(same.predict_proba(Xv), est.predict_proba(Xv))


def test_topk_with_all_columns_keeps_rank_order(cancer):
    Xtr, ytr, Xv, _ = cancer
    est = _est("topk", k=30).fit(Xtr, ytr)
    assert sorted(est.columns_.tolist()) == list(range(30)) and est.columns_.tolist() != list(range(30))
    direct = _direct(np.ascontiguousarray(Xtr[:, est.columns_]), ytr)
    expected = direct.predict(Xv[:, est.columns_], raw_score=True)
    np.testing.assert_array_equal(est.decision_function(Xv), expected)


def test_no_possible_split_stops_with_one_constant_tree(cancer):
    Xtr, ytr, Xv, _ = cancer
    est = _est(min_child_samples=300).fit(Xtr, ytr)  # 400 rows: no split leaves 300 on both sides
    assert est.n_iter_ == 1 and len(est.history_) == 1 and est.best_iteration_ is None
    assert est.n_features_selected_ == 0 and est.history_[0]["n_leaves"] == 1
    np.testing.assert_allclose(est.predict_proba(Xv)[:, 1], ytr.mean())


def test_cegb_penalty_reduces_features_and_mu_zero_is_full(cancer, full_fit):
    Xtr, ytr, Xv, yv = cancer
    sparse = _est("cegb", mu=0.05).fit(Xtr, ytr)
    assert 1 <= sparse.n_features_selected_ < full_fit.n_features_selected_
    text = sparse.booster_.model_to_string()
    penalty = next(line for line in text.splitlines() if line.startswith("[cegb_penalty_feature_coupled:"))
    values = [float(v) for v in penalty.split(":")[1].strip(" ]").split(",")]
    assert values == pytest.approx([0.05 * Xtr.shape[0]] * 30)  # mu scaled by the number of train rows
    assert "[cegb_tradeoff: 1]" in text
    free = _est("cegb", mu=0.0).fit(Xtr, ytr)
    np.testing.assert_array_equal(free.decision_function(Xv), full_fit.decision_function(Xv))


def _naive_first_use(est):
    df = est.booster_.trees_to_dataframe()  # rows of each tree in pre-order
    df = df.iloc[np.argsort(df["tree_index"].to_numpy(), kind="stable")]
    order = []
    for name in df["split_feature"].dropna():
        f = int(est.columns_[int(name.removeprefix("Column_"))])
        if f not in order:
            order.append(f)
    return order


def test_selected_features_in_order_of_first_use(cancer, full_fit):
    Xtr, ytr, _, _ = cancer
    assert full_fit.selected_features_.dtype == np.int64
    assert full_fit.selected_features_.tolist() == _naive_first_use(full_fit)
    assert full_fit.selected_features_.tolist() != sorted(full_fit.selected_features_.tolist())
    assert full_fit.n_features_selected_ == len(full_fit.selected_features_)
    topk = _est("topk", k=8).fit(Xtr, ytr)
    assert topk.selected_features_.tolist() == _naive_first_use(topk)
    np.testing.assert_array_equal(topk.get_support(indices=True), np.sort(topk.selected_features_))


def test_dataframe_names(cancer):
    Xtr, ytr, Xv, _ = cancer
    names = [f"f{j}" for j in range(30)]
    est = _est("topk", k=4).fit(pd.DataFrame(Xtr, columns=names), ytr)
    assert list(est.feature_names_in_) == names
    assert est.selected_feature_names_ == [names[j] for j in est.selected_features_]
    with pytest.warns(UserWarning, match="feature names"):  # scikit-learn's, as for GBFSClassifier
        np.testing.assert_array_equal(est.predict_proba(pd.DataFrame(Xv, columns=names)),
                                      est.predict_proba(Xv))
    with pytest.raises(ValueError, match="X"):
        est.predict(pd.DataFrame(Xv[:, :29], columns=names[:29]))


class _Boom(Exception):
    pass


def test_callback_exception_propagates(cancer):
    Xtr, ytr, Xv, yv = cancer

    def cb(env):
        if env.iteration == 3:
            raise _Boom(env.record["val_auc"])

    with pytest.raises(_Boom):
        _est().fit(Xtr, ytr, eval_set=(Xv, yv), callbacks=[cb])


def test_early_stop_exception_keeps_best_iteration(cancer, full_fit):
    Xtr, ytr, Xv, yv = cancer
    seen = []

    def cb(env):
        seen.append((env.iteration, env.end_iteration, env.model))
        if env.iteration == 7:
            raise EarlyStopException(4, env.history[4]["val_loss"])

    store = {"stale": [1]}
    est = _est().fit(Xtr, ytr, eval_set=(Xv, yv), callbacks=[cb, record_evaluation(store)])
    assert est.best_iteration_ == 4 and est.n_iter_ == 5 and len(est.history_) == 8
    assert seen[-1][:2] == (7, N_TREES) and seen[-1][2] is est
    assert "stale" not in store and len(store["val_auc"]) == 7  # reset at fit; the stopping call is last
    np.testing.assert_array_equal(est.decision_function(Xv),
                                  full_fit.booster_.predict(Xv, num_iteration=5, raw_score=True))


def test_early_stopping_rounds_on_val_loss(cancer):
    Xtr, ytr, Xv, yv = cancer
    est = _est(n_estimators=300, learning_rate=0.3, early_stopping_rounds=5)
    est.fit(Xtr, ytr, eval_set=[(Xv, yv)])
    losses = [r["val_loss"] for r in est.history_]
    best = int(np.argmin(losses))
    assert est.best_iteration_ == best and est.n_iter_ == best + 1 and len(losses) == best + 6 < 300
    p = est.predict_proba(Xv)[:, 1]
    assert log_loss(yv, p) == pytest.approx(losses[best], rel=1e-9)
    with pytest.raises(ValueError, match="early_stopping_rounds"):
        _est(early_stopping_rounds=5).fit(Xtr, ytr)


def test_same_seed_same_model(cancer):
    Xtr, ytr, Xv, _ = cancer
    extra = {"feature_fraction": 0.5}  # makes the seed matter
    a = _est(random_state=3, lgb_params=extra).fit(Xtr, ytr).decision_function(Xv)
    b = _est(random_state=3, lgb_params=extra).fit(Xtr, ytr).decision_function(Xv)
    c = _est(random_state=4, lgb_params=extra).fit(Xtr, ytr).decision_function(Xv)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_labels_are_mapped(cancer):
    Xtr, ytr, Xv, _ = cancer
    labels = np.array(["benign", "malignant"])
    est = _est().fit(Xtr, labels[ytr])
    np.testing.assert_array_equal(est.classes_, labels)
    assert set(est.predict(Xv)) <= set(labels)


def test_save_load_round_trip(tmp_path, cancer):
    Xtr, ytr, Xv, yv = cancer
    est = _est("topk", k=6, early_stopping_rounds=3, learning_rate=0.5).fit(Xtr, ytr, eval_set=(Xv, yv))
    path = tmp_path / "model.json"
    est.save_model(path)
    body = json.loads(path.read_text())
    assert body["format"] == "gbfs-model" and body["format_version"] == 1
    assert body["estimator"] == "LightGBMBaseline"
    assert body["columns"] == est.columns_.tolist() and body["params"]["k"] == 6
    same = LightGBMBaseline.load_model(path)
    np.testing.assert_array_equal(same.predict_proba(Xv), est.predict_proba(Xv))
    np.testing.assert_array_equal(same.selected_features_, est.selected_features_)
    assert same.get_params() == est.get_params() and same.best_iteration_ == est.best_iteration_


def test_tampered_or_malformed_file_is_refused(tmp_path, cancer):
    Xtr, ytr, _, _ = cancer
    path = tmp_path / "model.json"
    _est(n_estimators=3).fit(Xtr, ytr).save_model(path)
    body = json.loads(path.read_text())
    bad = tmp_path / "bad.json"
    tampered = dict(body, booster=body["booster"].replace("leaf_value=", "leaf_value=1", 1))
    bad.write_text(json.dumps(tampered))
    with pytest.raises(ValueError, match="checksum"):
        LightGBMBaseline.load_model(bad)
    bad.write_text(json.dumps(dict(body, columns=[0, 1])))
    with pytest.raises(ValueError, match="checksum"):
        LightGBMBaseline.load_model(bad)
    bad.write_text(path.read_text()[:-10])
    with pytest.raises(ValueError, match="JSON"):
        LightGBMBaseline.load_model(bad)
    bad.write_text(json.dumps(dict(body, format="other-model")))
    with pytest.raises(ValueError, match="format"):
        LightGBMBaseline.load_model(bad)


@pytest.mark.parametrize("kw, match", [
    ({"kind": "bogus"}, "kind"),
    ({"kind": "topk"}, "k is required"),
    ({"kind": "topk", "k": 31}, "k=31 exceeds"),
    ({"kind": "topk", "k": 0}, "k must be >= 1"),
    ({"kind": "full", "k": 3}, "k only applies"),
    ({"kind": "cegb", "mu": -0.1}, "mu"),
    ({"kind": "topk", "k": 3, "importance_type": "cover"}, "importance_type"),
    ({"lgb_params": {"n_estimators": 5}}, "lgb_params key 'n_estimators'"),
    ({"lgb_params": {"lambda": 1.0}}, "reg_lambda"),
    ({"lgb_params": {"metric": "auc"}}, "lgb_params key 'metric'"),
    ({"max_depth": 0}, "max_depth"),
    ({"learning_rate": 0.0}, "learning_rate"),
])
def test_bad_arguments_are_refused_before_lightgbm(monkeypatch, cancer, kw, match):
    Xtr, ytr, _, _ = cancer

    def boom(*args, **kwargs):
        raise AssertionError("LightGBM was called")

    monkeypatch.setattr(lgb, "train", boom)
    monkeypatch.setattr(lgb, "Dataset", boom)
    kw = {"n_threads": 1, **kw}
    with pytest.raises(ValueError, match=match):
        LightGBMBaseline(**kw).fit(Xtr, ytr)


def test_bad_data_is_refused(cancer):
    Xtr, ytr, Xv, yv = cancer
    y3 = ytr.copy()
    y3[:5] = 2
    with pytest.raises(ValueError, match="y must hold exactly two classes"):
        _est().fit(Xtr, y3)
    with pytest.raises(ValueError, match="eval_set"):
        _est().fit(Xtr, ytr, eval_set=[(Xv, yv), (Xv, yv)])
    with pytest.raises(ValueError, match="eval_set y"):
        _est().fit(Xtr, ytr, eval_set=(Xv, yv + 5))
    with pytest.raises(ValueError, match="X"):
        _est().fit(Xtr[:, :5] * np.inf, ytr)


def test_feature_importance_per_input_column_as_lightgbm_reports_it(cancer):
    Xtr, ytr, Xv, yv = cancer
    est = _est("topk", k=5).fit(Xtr, ytr, eval_set=(Xv, yv))
    direct = _direct(np.ascontiguousarray(Xtr[:, est.columns_]), ytr)
    gain = est.feature_importance("gain")
    assert gain.shape == (30,) and np.all(gain[np.setdiff1d(np.arange(30), est.columns_)] == 0)
    np.testing.assert_allclose(gain[est.columns_], direct.feature_importance("gain"), rtol=1e-12)
    np.testing.assert_array_equal(est.feature_importance("split"), est.feature_importances_)
    with pytest.raises(ValueError, match="importance_type"):
        est.feature_importance("shap")
