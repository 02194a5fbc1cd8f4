"""LightGBM-style callbacks: recording, early stopping, logging, state reset between fits, pickling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.booster.callbacks import (
    CallbackEnv,
    EarlyStopException,
    early_stopping,
    log_evaluation,
    record_evaluation,
)

# overfits quickly, so validation loss has an interior minimum (around tree 20 on clf_split)
OVERFIT = dict(learning_rate=0.5, max_leaves=16, min_samples_leaf=2, mu=0.0, random_state=0)


def test_record_evaluation_collects_every_value(clf_split, fast_params):
    Xt, yt, Xv, yv = clf_split
    store = {}
    est = GBFSClassifier(**fast_params, train_metrics="all").fit(Xt, yt, eval_set=(Xv, yv),
                                                                 callbacks=[record_evaluation(store)])
    assert {"train_loss", "train_auc", "val_loss", "val_auc", "n_leaves"} <= set(store)
    for key, values in store.items():
        assert len(values) == est.n_iter_
        assert values == [rec[key] for rec in est.history_]


def test_record_evaluation_is_cleared_at_each_fit(clf_split, fast_params):
    Xt, yt, Xv, yv = clf_split
    store = {"stale": [1, 2, 3]}
    cb = record_evaluation(store)
    GBFSClassifier(**fast_params).fit(Xt, yt, eval_set=(Xv, yv), callbacks=[cb])
    assert "stale" not in store
    est = GBFSClassifier(**{**fast_params, "n_estimators": 4}).fit(Xt, yt, callbacks=[cb])
    assert store["train_loss"] == [rec["train_loss"] for rec in est.history_]
    assert "val_loss" not in store  # the second fit had no eval set


def test_callback_env_contents(reg_data, fast_params):
    X, y = reg_data
    seen = []

    def spy(env):
        assert isinstance(env, CallbackEnv)
        seen.append((env.model, env.iteration, env.record, len(env.history), env.history[-1]))

    est = GBFSRegressor(**fast_params)
    est.fit(X, y, callbacks=spy)  # a single callable is accepted
    assert [s[1] for s in seen] == list(range(est.n_iter_))
    for model, it, record, n_hist, last in seen:
        assert model is est
        assert n_hist == it + 1
        assert last is record
        assert record["iteration"] == it
    assert [s[2] for s in seen] == est.history_


def test_callbacks_run_in_order(reg_data, fast_params):
    X, y = reg_data
    calls = []
    GBFSRegressor(**{**fast_params, "n_estimators": 3}).fit(
        X, y, callbacks=[lambda env: calls.append(("a", env.iteration)),
                         lambda env: calls.append(("b", env.iteration))])
    assert calls == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]


# -- early stopping ------------------------------------------------------------------------------------

def test_early_stopping_callback_stops_at_best(clf_split):
    Xt, yt, Xv, yv = clf_split
    est = GBFSClassifier(n_estimators=200, **OVERFIT)
    est.fit(Xt, yt, eval_set=(Xv, yv), callbacks=[early_stopping(5)])
    val_loss = [r["val_loss"] for r in est.history_]
    assert est.best_iteration_ == int(np.argmin(val_loss))
    assert len(est.history_) == est.best_iteration_ + 1 + 5
    assert est.n_iter_ == est.best_iteration_ + 1


def test_early_stopping_on_a_higher_is_better_metric(clf_split):
    Xt, yt, Xv, yv = clf_split
    est = GBFSClassifier(n_estimators=200, **OVERFIT)
    est.fit(Xt, yt, eval_set=(Xv, yv), callbacks=[early_stopping(8, metric="val_auc")])
    auc = [r["val_auc"] for r in est.history_]
    assert est.best_iteration_ == int(np.argmax(auc))  # first maximum: ties do not count as improvement
    assert len(est.history_) == est.best_iteration_ + 1 + 8


def test_early_stopping_min_delta(reg_split):
    Xt, yt, Xv, yv = reg_split
    params = dict(n_estimators=300, learning_rate=0.3, max_leaves=8, min_samples_leaf=5, random_state=0)
    loose = GBFSRegressor(**params).fit(Xt, yt, eval_set=(Xv, yv), callbacks=[early_stopping(5)])
    strict = GBFSRegressor(**params).fit(Xt, yt, eval_set=(Xv, yv),
                                         callbacks=[early_stopping(5, min_delta=0.01)])
    assert strict.best_iteration_ < loose.best_iteration_
    # with min_delta, the kept iteration is one whose improvement over the previous best exceeded it
    losses = [r["val_loss"] for r in strict.history_]
    best = strict.best_iteration_
    assert all(losses[k] > losses[best] - 0.01 for k in range(best + 1, len(losses)))


def test_early_stopping_object_reused_across_fits(clf_split, reg_split):
    Xt, yt, Xv, yv = clf_split
    es = early_stopping(5)
    first = GBFSClassifier(n_estimators=200, **OVERFIT).fit(Xt, yt, eval_set=(Xv, yv), callbacks=[es])
    second = GBFSClassifier(n_estimators=200, **OVERFIT).fit(Xt, yt, eval_set=(Xv, yv), callbacks=[es])
    assert first.best_iteration_ == second.best_iteration_
    assert first.n_iter_ == second.n_iter_
    assert len(first.history_) == len(second.history_)
    np.testing.assert_array_equal(first.decision_function(Xv), second.decision_function(Xv))
    # reused on another problem (other loss scale), it behaves like a fresh callback there
    Rt, rt, Rv, rv = reg_split
    reused = GBFSRegressor(n_estimators=200, **OVERFIT).fit(Rt, rt, eval_set=(Rv, rv), callbacks=[es])
    fresh = GBFSRegressor(n_estimators=200, **OVERFIT).fit(Rt, rt, eval_set=(Rv, rv),
                                                           callbacks=[early_stopping(5)])
    assert reused.best_iteration_ == fresh.best_iteration_
    assert reused.n_iter_ == fresh.n_iter_


def test_early_stopping_without_the_metric_names_it(clf_data, fast_params):
    X, y = clf_data
    with pytest.raises(ValueError, match="val_loss"):
        GBFSClassifier(**fast_params).fit(X, y, callbacks=[early_stopping(3)])


@pytest.mark.parametrize("rounds", [0, -1, 2.5, "3"])
def test_early_stopping_factory_validates(rounds):
    with pytest.raises(ValueError, match="stopping_rounds"):
        early_stopping(rounds)


def test_record_evaluation_needs_a_dict():
    with pytest.raises(TypeError, match="dict"):
        record_evaluation([])


# -- custom stopping and errors -----------------------------------------------------------------------

class StopAt:
    """Stops the loop at ``stop`` and declares ``best`` the best iteration."""

    def __init__(self, stop, best):
        self.stop, self.best = stop, best

    def __call__(self, env):
        if env.iteration == self.stop:
            raise EarlyStopException(self.best, env.history[self.best]["train_loss"])


def test_early_stop_exception_from_a_custom_callback(reg_data, fast_params):
    X, y = reg_data
    est = GBFSRegressor(**{**fast_params, "n_estimators": 50}).fit(X, y, callbacks=[StopAt(stop=6, best=3)])
    assert len(est.history_) == 7
    assert est.best_iteration_ == 3
    assert est.n_iter_ == 4 == len(est.trees_)
    short = GBFSRegressor(**{**fast_params, "n_estimators": 4}).fit(X, y)
    np.testing.assert_array_equal(est.predict(X), short.predict(X))


def test_later_callbacks_are_not_called_after_a_stop(reg_data, fast_params):
    X, y = reg_data
    after = []
    GBFSRegressor(**{**fast_params, "n_estimators": 50}).fit(
        X, y, callbacks=[StopAt(stop=2, best=2), lambda env: after.append(env.iteration)])
    assert after == [0, 1]


def test_other_exceptions_propagate(reg_data, fast_params):
    X, y = reg_data

    def broken(env):
        if env.iteration == 2:
            raise RuntimeError("callback failed")

    est = GBFSRegressor(**fast_params)
    with pytest.raises(RuntimeError, match="callback failed"):
        est.fit(X, y, callbacks=[broken])
    # the estimator is still usable afterwards
    est.fit(X, y)
    assert est.n_iter_ == fast_params["n_estimators"]


# -- logging -----------------------------------------------------------------------------------------

def test_log_evaluation_prints_every_period(capsys, clf_split, fast_params):
    Xt, yt, Xv, yv = clf_split
    GBFSClassifier(**{**fast_params, "n_estimators": 7}).fit(
        Xt, yt, eval_set=(Xv, yv), callbacks=[log_evaluation(3)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("]")[0] for line in lines] == ["[3", "[6"]
    for line in lines:
        assert "train_loss=" in line and "val_auc=" in line
        assert "iteration=" not in line


def test_log_evaluation_period_zero_is_silent(capsys, reg_data, fast_params):
    X, y = reg_data
    GBFSRegressor(**fast_params).fit(X, y, callbacks=[log_evaluation(0)])
    assert capsys.readouterr().out == ""


def test_log_evaluation_values_match_history(capsys, reg_data, fast_params):
    X, y = reg_data
    est = GBFSRegressor(**{**fast_params, "n_estimators": 2, "train_metrics": "all"}).fit(
        X, y, callbacks=[log_evaluation()])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    rmse = float(lines[-1].split("train_rmse=")[1].split(",")[0])
    assert rmse == pytest.approx(est.history_[-1]["train_rmse"], rel=1e-5)


# -- pickling ----------------------------------------------------------------------------------------

def _env(iteration, val_loss):
    rec = {"iteration": iteration, "train_loss": 1.0, "val_loss": val_loss}
    return CallbackEnv(model=None, iteration=iteration, record=rec, history=[rec])


@pytest.mark.parametrize("make", [lambda: early_stopping(3, metric="val_loss", min_delta=0.1),
                                  lambda: log_evaluation(5),
                                  lambda: record_evaluation({"train_loss": [0.5]})],
                         ids=["early_stopping", "log_evaluation", "record_evaluation"])
def test_callbacks_pickle(make):
    cb = make()
    clone = pickle.loads(pickle.dumps(cb))
    assert type(clone) is type(cb)
    assert vars(clone) == vars(cb)
    clone(_env(0, 1.0))  # still works after the round trip


def test_pickled_early_stopping_keeps_its_state():
    cb = early_stopping(2)
    cb(_env(0, 1.0))
    cb(_env(1, 2.0))
    clone = pickle.loads(pickle.dumps(cb))
    with pytest.raises(EarlyStopException) as info:
        clone(_env(2, 3.0))
    assert info.value.best_iteration == 0
    assert info.value.best_score == 1.0
    # and reset() forgets it: without the reset, iteration 5 would be 5 rounds past the best (0)
    clone.reset()
    clone(_env(5, 5.0))


def test_early_stop_exception_pickles():
    exc = pickle.loads(pickle.dumps(EarlyStopException(4, 0.25)))
    assert (exc.best_iteration, exc.best_score) == (4, 0.25)


def test_progress_bar_counts_the_trees_of_each_fit_and_pickles(clf_data, capsys):
    from gbfs.booster.callbacks import progress_bar

    X, y = clf_data
    cb = progress_bar("demo")
    for n in (7, 4):  # a new bar per fit
        est = GBFSClassifier(n_estimators=n, max_leaves=8, min_samples_leaf=5, random_state=0)
        est.fit(X, y, callbacks=[cb])
        err = capsys.readouterr().err
        assert "demo: 100%" in err and f"{n}/{n}" in err and "loss=" in err
    assert cb.bar is None  # closed with the fit's last tree
    assert pickle.loads(pickle.dumps(cb)).desc == "demo"
