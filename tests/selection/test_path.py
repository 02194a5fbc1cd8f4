"""The selection path (:func:`gbfs.selection_path`): budgets hit, seeded, chosen on validation only."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402

from gbfs import GBFSClassifier, GBFSRegressor, selection_path  # noqa: E402
from gbfs.booster.losses.metrics import roc_auc  # noqa: E402

KW = dict(n_estimators=40, max_depth=3, max_leaves=8, min_samples_leaf=10, early_stopping_rounds=5,
          criterion="newton", leaf_estimate="newton", random_state=0)


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(900, 30, n_informative=6, n_redundant=4, random_state=0)
    return X[:500], y[:500], X[500:700], y[500:700], X[700:], y[700:]


@pytest.fixture(scope="module")
def path(data):
    Xt, yt, Xv, yv, Xs, ys = data
    return selection_path(GBFSClassifier(method="agbm", **KW), Xt, yt, eval_set=(Xv, yv), budgets=(2, 4, 8),
                          test_set=(Xs, ys))


def test_every_budget_is_hit_exactly(path):
    assert [r.budget for r in path.results] == [2, 4, 8]
    for r in path.results:
        assert r.n_features == r.budget and not r.note
        used = {int(f) for t in r.model.trees_ for f in t.feature if f >= 0}
        assert used <= set(r.features.tolist())
        assert r.model.selected_features_.tolist() == r.features.tolist()


def test_each_budget_takes_its_best_validated_candidate(path, data):
    Xv, yv = data[2], data[3]
    # probes, the unpenalised fit and GBDT-topK compete (the same feature set is refitted once)
    assert max(sum(c["budget"] == k for c in path.candidates) for k in (2, 4, 8)) >= 2
    for r in path.results:
        cands = [c for c in path.candidates if c["budget"] == r.budget]
        assert r.val_score == max(c["val_score"] for c in cands)
        assert r.val_score == pytest.approx(roc_auc(yv, r.model.decision_function(Xv)), abs=1e-12)


def test_probes_descend_from_mu_max(path):
    mus = [p["mu"] for p in path.probes]
    assert 0 < max(mus) < path.mu_max
    counts = [p["n_features"] for p in sorted(path.probes, key=lambda p: p["mu"])]
    assert counts[0] == 8  # the smallest mu fills the largest budget


def test_chosen_model_is_reproducible_alone(path, data):
    Xt, yt, Xv, yv = data[:4]
    for r in path.results:
        # whatever its source, the model is an unpenalised Newton fit on its features
        cols = r.features
        plain = GBFSClassifier(method="gbfs", mu=0.0, **KW).fit(Xt[:, cols], yt, eval_set=(Xv[:, cols], yv))
        np.testing.assert_array_equal(plain.decision_function(Xv[:, cols]), r.model.decision_function(Xv))
        if r.source in ("shrunk", "rfe", "reselect"):  # rankings of other models: their own tests
            continue
        est = GBFSClassifier(method="agbm", **KW)
        if r.source.startswith("topk"):
            est.set_params(method="topk", max_features=r.budget, importance_type=r.source[5:])
        else:
            est.set_params(mu=r.mu, max_features=r.budget, refit=True, selection_patience=5)
        est.fit(Xt, yt, eval_set=(Xv, yv))
        assert est.selected_features_.tolist() == r.features.tolist()
        np.testing.assert_array_equal(est.decision_function(Xv), r.model.decision_function(Xv))


def test_shrunk_candidate_is_the_larger_models_top_gain(path):
    big = path[8]
    gain = big.model.feature_importance("gain")[big.features]
    top = big.features[np.argsort(-gain, kind="stable")][:4]
    # refitted as a budget-4 candidate (under its own source, or another that found the same set)
    assert sorted(top.tolist()) in [sorted(c["features"]) for c in path.candidates if c["budget"] == 4]


def test_reselect_candidate_is_the_top_gain_of_a_penalised_selection_twice_the_budget(path, data):
    """Budget K's re-selection: the most selective probe filling 2K, its first 2K features refitted
    (the fit with max_features=2K at that mu), then the K of most gain in that refit."""
    Xt, yt, Xv, yv = data[:4]
    found = [c for c in path.candidates if "reselect" in [c["source"], *c["also"]]]
    assert {c["budget"] for c in found} == {2, 4}  # budget 8's 16 features: no probe fills them
    for k in (2, 4):
        fills = [p["mu"] for p in path.probes if p["n_features"] >= 2 * k]
        mu = max(fills)
        wide = GBFSClassifier(method="agbm", mu=mu, max_features=2 * k, refit=True, selection_patience=5,
                              **KW).fit(Xt, yt, eval_set=(Xv, yv))
        sel = wide.selected_features_
        assert sel.tolist() == [p for p in path.probes if p["mu"] == mu][0]["order"][:2 * k]
        top = sel[np.argsort(-wide.feature_importance("gain")[sel], kind="stable")][:k]
        (c,) = [c for c in found if c["budget"] == k]
        assert c["features"] == top.tolist()


def test_path_never_looks_at_test(data, path):
    """Scrambled test labels change the test scores, never a choice."""
    Xt, yt, Xv, yv, Xs, ys = data
    scrambled = selection_path(GBFSClassifier(method="agbm", **KW), Xt, yt, eval_set=(Xv, yv),
                               budgets=(2, 4, 8), test_set=(Xs, np.random.default_rng(0).permutation(ys)))
    for a, b in zip(path.results, scrambled.results):
        assert a.features.tolist() == b.features.tolist() and a.mu == b.mu and a.val_score == b.val_score
    assert [a.test_score for a in path.results] != [b.test_score for b in scrambled.results]


def test_path_is_reproducible_by_seed(data, path):
    Xt, yt, Xv, yv = data[:4]
    again = selection_path(GBFSClassifier(method="agbm", **KW), Xt, yt, eval_set=(Xv, yv), budgets=(8, 4, 2))
    assert [(r.mu, r.features.tolist()) for r in again.results] == [(r.mu, r.features.tolist())
                                                                    for r in path.results]


def test_frame_plot_and_unreachable_budget(data, path):
    frame = path.to_frame()
    assert frame["n_features"].tolist() == [2, 4, 8]
    json.dumps(frame.to_dict("records"))
    assert path.plot() is not None
    Xt, yt, Xv, yv = data[:4]
    tiny = selection_path(GBFSRegressor(method="gbfs", **KW), Xt[:, :3], Xt[:, 0] + 0.1 * Xt[:, 1], eval_set=(
        Xv[:, :3], Xv[:, 0] + 0.1 * Xv[:, 1]), budgets=(2, 5), exact=True)
    assert tiny[2].n_features == 2
    assert tiny[5].n_features == 3 and "at most 3 features" in tiny[5].note


def test_gtgbm_and_bags(data):
    Xt, yt, Xv, yv = data[:4]
    gt = selection_path(GBFSClassifier(method="gtgbm", n_target_features=3, group_test_scope="tree", **KW),
                        Xt, yt, eval_set=(Xv, yv), budgets=(3,))
    assert gt[3].n_features == 3
    bags = np.arange(30) // 3
    bagged = selection_path(GBFSClassifier(method="agbm", feature_bags=bags, **KW), Xt, yt, eval_set=(Xv, yv),
                            budgets=(2,))
    assert len({int(bags[f]) for f in bagged[2].features}) <= 2
    # GBDT-topK ranks features, not bags
    assert all(not c["source"].startswith("topk") for c in bagged.candidates)


@pytest.mark.parametrize("kwargs,err,match", [
    (dict(budgets=()), ValueError, "at least one budget"),
    (dict(budgets=5), TypeError, "budgets must be a sequence"),
    (dict(budgets=(0, 3)), ValueError, "budgets"),
    (dict(eval_set=None), ValueError, "eval_set is required"),
    (dict(patience=0), ValueError, "patience"),
])
def test_bad_arguments(data, kwargs, err, match):
    Xt, yt, Xv, yv = data[:4]
    args = dict(eval_set=(Xv, yv), budgets=(2,))
    args.update(kwargs)
    with pytest.raises(err, match=match):
        selection_path(GBFSClassifier(**KW), Xt, yt, **args)
    with pytest.raises(ValueError, match="estimator.method"):
        selection_path(clone(GBFSClassifier(method="topk", max_features=2)), Xt, yt, eval_set=(Xv, yv))


def test_verbose_path_counts_every_fit_on_stderr_and_quiet_prints_nothing(clf_split, capsys):
    X, y, Xv, yv = clf_split
    template = GBFSClassifier(n_estimators=15, max_leaves=8, min_samples_leaf=5, random_state=0,
                              early_stopping_rounds=5)
    quiet = selection_path(template, X, y, eval_set=(Xv, yv), budgets=(2, 4))
    assert capsys.readouterr().err == ""
    loud = selection_path(template, X, y, eval_set=(Xv, yv), budgets=(2, 4), rfe_step=None, verbose=True)
    err = capsys.readouterr().err
    n_fits = 1 + len(loud.probes) + len(loud.candidates)  # the unpenalised fit, probes, refits
    # the bar's last state (tqdm redraws at most every 0.1 s, so earlier states may not show)
    assert f"selection path: {n_fits}fit" in err and "refit on 2 features" in err
    assert [r.features.tolist() for r in loud.results] == [r.features.tolist() for r in quiet.results]
    with pytest.raises(TypeError, match="verbose must be True or False"):
        selection_path(template, X, y, eval_set=(Xv, yv), budgets=(2,), verbose="yes")


def test_at_most_k_takes_a_smaller_answer_that_validates_better_and_exact_still_fills(capsys):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 60))
    y = ((X[:, 0] + X[:, 1] + 0.5 * rng.standard_normal(300)) > 0).astype(int)  # two features suffice
    template = GBFSClassifier(method="agbm", criterion="newton", leaf_estimate="newton", n_estimators=60,
                              max_leaves=8, min_samples_leaf=5, early_stopping_rounds=10, random_state=0)
    fit = dict(eval_set=(X[200:], y[200:]), budgets=(2, 10, 30))
    exact = selection_path(template, X[:200], y[:200], exact=True, **fit)
    at_most = selection_path(template, X[:200], y[:200], **fit)  # at most K is the default
    assert [r.n_features for r in exact.results] == [2, 10, 30]  # exact mode still hits K
    assert exact[10].val_score < exact[2].val_score  # the case: ten features validate worse than two
    assert at_most[10].n_features == 2 and at_most[10].features.tolist() == exact[2].features.tolist()
    assert at_most[10].val_score == exact[2].val_score and "budget 2's answer" in at_most[10].note
    for r in at_most.results:  # never worse on validation than the exact answer, never over budget
        assert r.val_score >= exact[r.budget].val_score and r.n_features <= r.budget
    with pytest.raises(TypeError, match="exact must be True or False"):
        selection_path(template, X[:200], y[:200], exact="no", **fit)
