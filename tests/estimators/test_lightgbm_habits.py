"""What LightGBM users reach for after a fit: ``evals_result_``, ``plot_importance``, ``plot_metric``."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import lightgbm as lgb  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from gbfs import GBFSClassifier, plot_importance, plot_metric  # noqa: E402
from gbfs.booster.callbacks import evals_result  # noqa: E402


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, 6)), columns=[f"c{i}" for i in range(6)])
    y = (X.c0 + 0.5 * X.c1 > 0).astype(int).to_numpy()
    est = GBFSClassifier(n_estimators=12, min_samples_leaf=5, random_state=0)
    est.fit(X[:250], y[:250], eval_set=[(X[250:320], y[250:320]), (X[320:], y[320:])])
    return est, X, y


def test_evals_result_regroups_history_as_lightgbm_does(fitted):
    est, X, y = fitted
    res = est.evals_result_
    assert set(res) == {"training", "valid_0", "valid_1"}
    assert res["valid_0"]["auc"] == [r["val_auc"] for r in est.history_]
    assert res["valid_1"]["loss"] == [r["val1_loss"] for r in est.history_]
    assert res["training"]["loss"] == [r["train_loss"] for r in est.history_]
    assert len(res["valid_0"]["loss"]) == len(est.history_)
    # LightGBM's own layout: data set -> metric -> one value per round
    booster = lgb.LGBMClassifier(n_estimators=3, verbose=-1).fit(
        X[:250], y[:250], eval_set=[(X[250:], y[250:])], eval_metric="auc")
    assert set(booster.evals_result_) == {"valid_0"} and len(booster.evals_result_["valid_0"]["auc"]) == 3
    assert evals_result([{"iteration": 0, "root_variance": 1.0, "elapsed_seconds": 0.1}]) == {}


def test_plot_importance_orders_the_used_features(fitted):
    est, _, _ = fitted
    ax = plot_importance(est, max_num_features=2)
    by_height = sorted(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())), reverse=True)
    gain = est.feature_importance("gain")
    top = [f"c{i}" for i in np.argsort(-gain)[:2]]
    assert [name for _, name in by_height] == top      # largest on top
    widths = sorted((p.get_width() for p in ax.patches), reverse=True)
    np.testing.assert_allclose(widths, np.sort(gain)[::-1][:2])
    with pytest.raises(ValueError, match="max_num_features"):
        plot_importance(est, max_num_features=0)
    # names given for a model fitted on an array, as the harness passes its dataset's
    named = plot_importance(est, max_num_features=2, feature_names=[f"gene{i}" for i in range(len(gain))])
    assert {t.get_text() for t in named.get_yticklabels()} == {n.replace("c", "gene") for n in top}
    with pytest.raises(ValueError, match="feature_names has 1 names"):
        plot_importance(est, feature_names=["only"])


def test_plot_metric_draws_one_curve_per_data_set(fitted):
    est, _, _ = fitted
    ax = plot_metric(est, "auc")
    assert sorted(line.get_label() for line in ax.get_lines()) == ["valid_0", "valid_1"]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), est.evals_result_["valid_0"]["auc"])
    assert plot_metric(est).get_ylabel() == "loss"
    with pytest.raises(ValueError, match="metric 'ndcg' was not recorded"):
        plot_metric(est, "ndcg")


def test_best_iteration_is_set_whenever_early_stopping_watched_the_fit(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    # few small steps: the validation loss still falls at the last tree, so the patience never runs out
    est = GBFSClassifier(n_estimators=8, learning_rate=0.05, early_stopping_rounds=50, random_state=0)
    est.fit(X[:400], y[:400], eval_set=(X[400:], y[400:]))
    losses = est.evals_result_["valid_0"]["loss"]
    assert np.argmin(losses) == len(losses) - 1 == 7
    assert est.best_iteration_ == 7 and len(est.trees_) == 8       # as LightGBM's (1-based there: 8)
    booster = lgb.LGBMClassifier(n_estimators=8, learning_rate=0.05, verbose=-1).fit(
        X[:400], y[:400], eval_set=[(X[400:], y[400:])], callbacks=[lgb.early_stopping(50, verbose=False)])
    assert booster.best_iteration_ == 8
    est.save_model(tmp_path / "m.json")
    from gbfs import load_model
    assert load_model(tmp_path / "m.json").best_iteration_ == 7
    # without early stopping there is no best iteration to report (LightGBM says 0 there)
    assert GBFSClassifier(n_estimators=3).fit(X, y).best_iteration_ is None


def test_verbose_shows_one_closed_bar_per_fit_and_nothing_by_default(capsys):
    from sklearn.base import clone

    from gbfs import GBFSRegressor

    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 6))
    y = X[:, 0] - 2 * X[:, 1] + 0.1 * rng.normal(size=500)
    GBFSRegressor(n_estimators=5, random_state=0).fit(X, y)
    assert capsys.readouterr().err == ""
    # a refit: the selection fit ends once its budget is full, then the refit stops early;
    # each gets its own bar, closed (its last line ended) however the fit ended
    est = GBFSRegressor(n_estimators=60, max_features=2, refit=True, early_stopping_rounds=3,
                        learning_rate=0.5, random_state=0, verbose=True)
    est.fit(X[:350], y[:350], eval_set=(X[350:], y[350:]))
    err = capsys.readouterr().err
    assert err.count("GBFSRegressor:") >= 2 and "loss=" in err and err.endswith("\n")
    assert len(est.trees_) < 60  # early stopping ended the refit before its last tree
    assert clone(est).verbose is True
    with pytest.raises(TypeError, match="verbose"):
        GBFSRegressor(verbose="yes").fit(X, y)
