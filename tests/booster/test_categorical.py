"""Categorical features: the split search against exhaustive and naive references, binning, the
estimators' input handling, model files, and LightGBM with matched settings."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
from estimator_cases import every_method

from gbfs import GBFSClassifier, GBFSRegressor, load_model
from gbfs.booster.binning import BinMapper
from gbfs.booster.kernels.categorical import CAT_WORDS, bins_of, cat_settings, scan_categorical
from gbfs.booster.kernels.splitting import SplitRule

MISSING = 255


def _hist(rng, nb, missing_rows, newton=True):
    """A random categorical histogram: per bin (sum of -gradient, sum of hessian, count)."""
    counts = rng.integers(1, 60, nb + 1).astype(float)
    counts[nb] = missing_rows
    h = counts * (rng.uniform(0.1, 0.25, nb + 1) if newton else 1.0)
    g = rng.normal(0.0, 1.0, nb + 1) * counts
    return np.column_stack([g, h, counts])


def _gain(lg, lh, G, H, lam_children, lam_parent):
    return lg**2 / (lh + lam_children) + (G - lg) ** 2 / (H - lh + lam_children) - G**2 / (H + lam_parent)


def _scan(hf, nb, msl=1, mcw=0.0, lam=0.0, **cat):
    settings = cat_settings(**{"cat_smooth": 0.0, "cat_l2": 0.0, "max_cat_threshold": 255,
                               "min_data_per_group": 1, "max_cat_to_onehot": 1, **cat})
    bits = np.zeros(CAT_WORDS, dtype=np.uint32)
    G, H, C = hf[: nb + 1].sum(axis=0)
    res = scan_categorical(hf, nb, SplitRule(G, H, C, float(msl), 0.0, mcw, lam), settings, bits)
    return res, bins_of(bits), (G, H, C)


@pytest.mark.parametrize("seed", range(12))
def test_many_vs_many_finds_the_best_of_all_subsets(seed):
    # Fisher (1958): for G^2/H gains the best two-group partition is a cut of the categories
    # ordered by G/H, so the ordered search with no smoothing or grouping finds the exhaustive
    # optimum over every subset (missing rows absent, so left and right are symmetric)
    rng = np.random.default_rng(seed)
    nb = int(rng.integers(3, 10))
    hf = _hist(rng, nb, 0.0, newton=bool(seed % 2))
    (gain, lg, lh, lc), left, (G, H, C) = _scan(hf, nb)
    best = max(_gain(hf[list(s), 0].sum(), hf[list(s), 1].sum(), G, H, 0.0, 0.0)
               for k in range(1, nb) for s in itertools.combinations(range(nb), k))
    assert gain == pytest.approx(best, rel=1e-12)
    # the reported sums are those of the left set
    assert (lg, lh, lc) == pytest.approx(tuple(hf[left].sum(axis=0)))
    assert gain == pytest.approx(_gain(lg, lh, G, H, 0.0, 0.0))


def _naive_lightgbm(hf, nb, msl, mcw, lam, cat_smooth, cat_l2, max_cat_threshold, min_data_per_group,
                    max_cat_to_onehot):
    """LightGBM's FindBestThresholdCategorical written from its description, with lists: (gain, left)."""
    G, H, C = hf[: nb + 1].sum(axis=0)
    best, best_set = -np.inf, []
    if nb <= max_cat_to_onehot:
        for t in range(nb):
            g, h, c = hf[t]
            if c > 0 and c >= msl and h >= mcw and C - c >= msl and H - h >= mcw:
                gain = _gain(g, h, G, H, lam, lam)
                if gain > best:
                    best, best_set = gain, [t]
        return best, best_set
    est = [np.floor(hf[t, 1] * C / H + 0.5) for t in range(nb)]
    cands = [t for t in range(nb) if est[t] >= cat_smooth]
    cands.sort(key=lambda t: -hf[t, 0] / (hf[t, 1] + cat_smooth))  # stable
    max_num = min(max_cat_threshold, (len(cands) + 1) // 2)
    for order in (cands, cands[::-1]):
        left, group = [], 0.0
        for t in order[:max_num]:
            left.append(t)
            group += est[t]
            lg, lh, lc = hf[left].sum(axis=0)
            le = sum(est[u] for u in left)
            if lc < msl or lh < mcw:
                continue
            if C - lc < msl or C - le < min_data_per_group or H - lh < mcw:
                break
            if group < min_data_per_group:
                continue
            group = 0.0
            gain = _gain(lg, lh, G, H, lam + cat_l2, lam)
            if gain > best:
                best, best_set = gain, sorted(left)
    return best, best_set


@pytest.mark.parametrize("seed", range(20))
def test_the_search_matches_the_naive_lightgbm_algorithm(seed):
    rng = np.random.default_rng(100 + seed)
    nb = int(rng.choice([2, 3, 4, 8, 30, 120]))
    hf = _hist(rng, nb, float(rng.choice([0, 40])))
    settings = {"cat_smooth": float(rng.choice([0.0, 10.0])), "cat_l2": float(rng.choice([0.0, 10.0])),
                "max_cat_threshold": int(rng.choice([4, 32])),
                "min_data_per_group": int(rng.choice([1, 100])), "max_cat_to_onehot": 4}
    msl, lam = int(rng.choice([1, 20])), float(rng.choice([0.0, 1.0]))
    (gain, *_), left, _ = _scan(hf, nb, msl=msl, mcw=1e-3, lam=lam, **settings)
    want_gain, want_left = _naive_lightgbm(hf, nb, msl, 1e-3, lam, **settings)
    if want_left:
        assert gain == pytest.approx(want_gain, rel=1e-12)
        assert left.tolist() == want_left
    else:
        assert gain == -np.inf and left.size == 0


def test_the_missing_bin_always_goes_right():
    rng = np.random.default_rng(3)
    hf = _hist(rng, 6, 500.0)
    hf[MISSING if hf.shape[0] > MISSING else 6] = hf[6]
    (gain, lg, lh, lc), left, (G, H, C) = _scan(hf, 6)
    assert 6 not in left and lc == hf[left, 2].sum() and C - lc >= 500


# -- binning ------------------------------------------------------------------------------------
def test_bins_are_the_most_frequent_codes_and_the_rest_is_missing():
    codes = np.array([5, 5, 5, 9, 9, 2, 2, 7, np.nan, 1000])
    bm = BinMapper(max_bins=3, categorical=[True]).fit(codes[:, None])
    assert bm.category_codes_[0].tolist() == [5, 2, 9]  # by count, ties: the smaller code
    assert bm.n_bins_non_missing_.tolist() == [3]
    binned = bm.transform(np.array([[5], [2], [9], [7], [np.nan], [1000], [3]], dtype=float))
    assert binned[:, 0].tolist() == [0, 1, 2, MISSING, MISSING, MISSING, MISSING]


def test_sparse_categorical_columns_bin_like_dense():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 6, (300, 3)).astype(float)
    X[rng.random((300, 3)) < 0.5] = 0.0
    mask = [True, False, True]
    dense = BinMapper(categorical=mask).fit(X)
    sparse = BinMapper(categorical=mask).fit(scipy.sparse.csr_matrix(X))
    assert np.array_equal(dense.transform(X), sparse.transform(scipy.sparse.csr_matrix(X)))


# -- estimators ----------------------------------------------------------------------------------
def _frame(n=4000, seed=0, k=40):
    effect = np.random.default_rng(k).normal(0.0, 1.5, k)  # the same label model for every seed
    rng = np.random.default_rng(seed)
    city = rng.integers(0, k, n)
    x = rng.standard_normal(n)
    noise = rng.integers(0, 12, n)
    logit = effect[city] + 0.8 * x
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    names = np.array([f"city{j:02d}" for j in range(k)])
    df = pd.DataFrame({"city": pd.Categorical(names[city]), "x": x,
                       "noise": pd.Categorical(noise)})
    return df, y


@pytest.mark.slow  # a few seconds: the default suite stays under 5 minutes
def test_category_columns_equal_their_integer_codes():
    df, y = _frame()
    a = GBFSClassifier(mu=0.0, n_estimators=15, random_state=0).fit(df, y)
    codes = pd.DataFrame({"city": df.city.cat.codes, "x": df.x, "noise": df.noise.cat.codes})
    b = GBFSClassifier(mu=0.0, n_estimators=15, random_state=0,
                       categorical_features=["city", "noise"]).fit(codes, y)
    c = GBFSClassifier(mu=0.0, n_estimators=15, random_state=0,
                       categorical_features=[True, False, True]).fit(codes.to_numpy(float), y)
    assert a.categorical_features_.tolist() == [0, 2]
    assert a.categories_[0][0] == "city00" and b.categories_ == [None, None]
    pa = a.predict_proba(df)
    assert np.array_equal(pa, b.predict_proba(codes))
    assert np.array_equal(pa, c.predict_proba(codes.to_numpy(float)))
    assert a.trees_[0].cat_left  # splits on categories, not on code thresholds


def test_prediction_maps_values_not_codes():
    df, y = _frame()
    m = GBFSClassifier(mu=0.0, n_estimators=10, random_state=0).fit(df, y)
    p = m.predict_proba(df)
    # another frame's categories in another order, or plain strings: the same values, the same scores
    reordered = sorted(set(df.city), reverse=True)
    shuffled = df.assign(city=pd.Categorical(df.city.astype(str), categories=reordered))
    assert np.array_equal(m.predict_proba(shuffled), p)
    assert np.array_equal(m.predict_proba(df.assign(city=df.city.astype(str))), p)
    # an unseen category is predicted as a missing value
    unseen = df.head(5).assign(city=pd.Categorical(["nowhere"] * 5))
    missing = df.head(5).assign(city=pd.Categorical([np.nan] * 5, categories=df.city.cat.categories))
    assert np.array_equal(m.predict_proba(unseen), m.predict_proba(missing))


def test_text_columns_listed_as_categorical():
    df, y = _frame()
    text = df.assign(city=df.city.astype(str))
    with pytest.raises(TypeError, match="non-numeric columns \\['city'\\]"):
        GBFSClassifier(n_estimators=2).fit(text, y)
    m = GBFSClassifier(mu=0.0, n_estimators=10, random_state=0, categorical_features=["city", "noise"])
    auto = GBFSClassifier(mu=0.0, n_estimators=10, random_state=0).fit(df, y)
    assert np.array_equal(m.fit(text, y).predict_proba(text), auto.predict_proba(df))


@pytest.mark.parametrize("spec, error, match", [
    (["nope"], ValueError, "names column 'nope'"),
    ([7], ValueError, "column index 7"),
    ([True, False], ValueError, "3 entries"),
    ("yes", ValueError, "'auto', None"),
    (["x", "x"], ValueError, "twice"),
    (3.5, TypeError, "categorical_features must be"),
    ([1.5], TypeError, "indices or names"),
])
def test_bad_categorical_features_are_refused(spec, error, match):
    df, y = _frame(n=200)
    with pytest.raises(error, match=match):
        GBFSClassifier(n_estimators=2, categorical_features=spec).fit(df, y)


def test_category_columns_left_out_and_bad_codes_are_refused():
    df, y = _frame(n=200)
    with pytest.raises(TypeError, match="category columns \\['noise'\\]"):
        GBFSClassifier(n_estimators=2, categorical_features=["city"]).fit(df, y)
    X = np.column_stack([np.arange(200) % 5, np.ones(200)]).astype(float)
    for bad in (-1.0, 2.5):
        Xb = X.copy()
        Xb[3, 0] = bad
        with pytest.raises(ValueError, match="column 0 is categorical"):
            GBFSClassifier(n_estimators=2, categorical_features=[0]).fit(Xb, y)
    m = GBFSClassifier(n_estimators=2, categorical_features=[0]).fit(X, y)
    with pytest.raises(ValueError, match="column 0 is categorical"):
        m.predict(np.array([[-3.0, 1.0]]))


def test_sparse_input_with_categorical_codes_equals_dense():
    df, y = _frame(n=1500)
    X = np.column_stack([df.city.cat.codes, df.x.clip(0, None), df.noise.cat.codes]).astype(float)
    kw = {"mu": 0.0, "n_estimators": 8, "random_state": 0, "categorical_features": [0, 2]}
    dense = GBFSClassifier(**kw).fit(X, y)
    sparse = GBFSClassifier(**kw).fit(scipy.sparse.csc_matrix(X), y)
    assert np.array_equal(dense.predict_proba(X), sparse.predict_proba(scipy.sparse.csr_matrix(X)))


@pytest.mark.parametrize("params", [
    *every_method(2),
    {"method": "agbm", "mu": 0.0, "criterion": "newton", "leaf_estimate": "newton", "sampler": "mvs"},
])
def test_every_method_predicts_its_training_scores_and_round_trips(params, tmp_path):
    df, y = _frame(n=2500)
    m = GBFSClassifier(n_estimators=12, random_state=0, **params).fit(df, y, eval_set=(df, y))
    # history_ scores the training rows from their bins, predict_proba from the raw frame
    p = m.predict_proba(df)[:, 1]
    loss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert loss == pytest.approx(m.history_[m.n_iter_ - 1]["val_loss"], rel=1e-9)
    m.save_model(tmp_path / "m.json")
    assert np.array_equal(load_model(tmp_path / "m.json").predict_proba(df)[:, 1], p)


def test_the_penalty_counts_a_categorical_feature_once():
    # the city's effect needs many one-hot columns but one categorical feature: under the same
    # first-use penalty the categorical model uses the city, the one-hot model few of its levels
    df, y = _frame(n=6000, k=60)
    kw = {"method": "agbm", "mu": 0.02, "n_estimators": 60, "random_state": 0}
    cat = GBFSClassifier(**kw).fit(df, y)
    onehot = pd.get_dummies(df, columns=["city", "noise"]).astype(float)
    hot = GBFSClassifier(**kw).fit(onehot, y)
    assert "city" in cat.selected_feature_names_ and cat.n_features_selected_ <= 2
    levels = [n for n in hot.selected_feature_names_ if n.startswith("city_")]
    assert len(levels) < 30
    Xt, yt = _frame(n=6000, seed=1, k=60)
    from sklearn.metrics import roc_auc_score

    auc_cat = roc_auc_score(yt, cat.predict_proba(Xt)[:, 1])
    auc_hot = roc_auc_score(yt, hot.predict_proba(pd.get_dummies(Xt, columns=["city", "noise"]).astype(float)
                                                  .reindex(columns=onehot.columns, fill_value=0.0))[:, 1])
    assert auc_cat > auc_hot


def test_regressor_and_model_file_refusals(tmp_path):
    df, y = _frame(n=800)
    r = GBFSRegressor(mu=0.0, n_estimators=5, random_state=0).fit(df, y.astype(float))
    r.save_model(tmp_path / "r.json")
    assert np.array_equal(load_model(tmp_path / "r.json").predict(df), r.predict(df))
    import json

    from gbfs.io.envelope import seal

    body = json.loads((tmp_path / "r.json").read_text())
    for key in ("checksum", "format", "format_version", "estimator"):
        body.pop(key)
    tree = body["trees"][0]
    numeric = next(k for k, f in enumerate(tree["feature"]) if f == 1)  # a split on x
    for changed, match in ((dict(tree, cat_left=[]), "NaN thresholds"),
                           (dict(tree, cat_left=tree["cat_left"] + [[numeric, [0]]]), "by categories")):
        (tmp_path / "bad.json").write_text(json.dumps(seal("GBFSRegressor", dict(body, trees=[changed]))))
        with pytest.raises(ValueError, match=match):
            load_model(tmp_path / "bad.json")


# -- against LightGBM -------------------------------------------------------------------------------
def test_first_tree_equals_lightgbm_on_categorical_data():
    lgb = pytest.importorskip("lightgbm")
    df, y = _frame(n=5000, k=60)
    kw = {"n_estimators": 1, "learning_rate": 0.1}
    ours = GBFSClassifier(mu=0.0, criterion="newton", leaf_estimate="newton", max_leaves=4,
                          random_state=0, **kw).fit(df[["city", "noise"]], y)
    ref = lgb.LGBMClassifier(num_leaves=4, min_child_samples=20, reg_lambda=0.0, min_child_weight=1e-3,
                             verbose=-1, **kw).fit(df[["city", "noise"]], y)
    root = ref.booster_.dump_model()["tree_info"][0]["tree_structure"]
    t = ours.trees_[0]
    codes = ours._bin_mapper.category_codes_[int(t.feature[0])]
    assert int(t.feature[0]) == root["split_feature"]
    assert t.gain[0] == pytest.approx(root["split_gain"], rel=1e-5)
    assert sorted(codes[t.cat_left[0]].tolist()) == [int(c) for c in str(root["threshold"]).split("||")]
    assert np.allclose(ours.predict_proba(df[["city", "noise"]])[:, 1],
                       ref.predict_proba(df[["city", "noise"]])[:, 1], atol=1e-6)


@pytest.mark.parametrize("kind, kw", [("full", {}), ("topk", {"k": 2}), ("cegb", {"mu": 0.01})])
def test_the_lightgbm_baselines_split_on_categories(kind, kw, tmp_path):
    pytest.importorskip("lightgbm")
    from gbfs.baselines.lightgbm_baseline import LightGBMBaseline

    df, y = _frame(n=3000, k=60)
    b = LightGBMBaseline(kind, n_estimators=15, random_state=0, **kw).fit(df, y)
    assert b.categorical_features_.tolist() == [0, 2] and "city" in b.selected_feature_names_
    assert "num_cat=0" not in b.booster_.model_to_string().split("Tree=0")[1].split("Tree=1")[0]
    b.save_model(tmp_path / "b.json")
    # the file keeps the categories: values, not another frame's codes, reach the booster
    text = df.assign(city=df.city.astype(str))
    assert np.array_equal(load_model(tmp_path / "b.json").predict_proba(text), b.predict_proba(df))


@pytest.mark.slow  # 2-3 s: the default suite stays under 5 minutes (CI runs the slow tests too)
@pytest.mark.parametrize("method", ["agbm", "lgbm_cegb"])
def test_the_harness_splits_a_datasets_categorical_columns(tmp_path, method, monkeypatch):
    from harness_utils import compose_cfg

    from runners import run
    from runners.core import experiment

    seen = []
    build = experiment.build_estimator

    def spy(*args, **kwargs):
        est = build(*args, **kwargs)
        seen.append(est)
        return est

    monkeypatch.setattr(experiment, "build_estimator", spy)
    cfg = compose_cfg(tmp_path, ["dataset=flight_like_categorical", "dataset.scale=0.02", f"method={method}",
                                 "method.params.n_estimators=5", "print_summary=false",
                                 "tracking.log_model=false"])
    metrics = run.run(cfg)
    assert 0.5 < metrics["test_auc"] <= 1.0
    (est,) = seen
    assert est.categorical_features_.tolist() == [0, 1, 2, 3, 4, 5]
