"""gbfs.selection.feature_utility (Koepke & Bilenko, Algorithm 1) and its runner, runners.feature_utility
(the test's run: runners.paper.utility_kb.held_back)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from harness_utils import CONF, TINY
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from scipy.special import expit
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression

from gbfs import GBFSClassifier, GBFSRegressor, feature_utility
from gbfs.selection.feature_utility import DEFAULT_REGRESSOR_PARAMS, gradient_signal, utility_statistic

REPO = Path(__file__).resolve().parents[2]
MODEL = dict(method="gbfs", mu=0.0, n_estimators=60, learning_rate=0.2, max_depth=2, max_leaves=4,
             min_samples_leaf=20, n_threads=1, random_state=0)


def _draw(n: int, seed: int, strength: float = 1.0, task: str = "regression"):
    """``y`` from a step in x0 and a line in x1 (what the model can fit) plus ``strength * cos(2 pi u)``
    of a held-back ``u``; candidates: noise, a copy of x0 (used), ``u`` (useful)."""
    rng = np.random.default_rng(seed)
    X, u, noise = rng.random((n, 3)), rng.random(n), rng.random(n)
    f = 2.0 * (X[:, 0] > 0.5) + X[:, 1] + strength * np.cos(2 * np.pi * u)
    if task == "regression":
        y = f + 0.5 * rng.standard_normal(n)
    else:
        y = (rng.random(n) < expit(2.0 * (f - f.mean()))).astype(np.int64)
    return X, y, np.column_stack([noise, X[:, 0], u])


@pytest.fixture(scope="module")
def fitted():
    """A regressor fitted on 3000 rows without ``u``, and 400 fresh rows to test on."""
    X, y, C = _draw(3400, 0)
    model = GBFSRegressor(**MODEL).fit(X[:3000], y[:3000])
    return model, X[3000:], y[3000:], C[3000:]


class _Spy(LinearRegression):
    """A regressor counting its fits (class-level: ``clone`` makes new instances)."""

    fits = 0

    def fit(self, X, y):
        type(self).fits += 1
        return super().fit(X, y)


# ------------------------------------------------------------------------------ the statistic

def test_statistic_and_null_match_a_hand_computation(fitted):
    """With least squares on a line, Eq. 7 is sqrt(n) corr(x', Lambda)^2 (Lambda has unit standard
    deviation); the null of Algorithm 1 is rebuilt here from its two independent resamples."""
    model, X, y, C = fitted
    X, y, x = X[:60], y[:60], C[:60, 2]
    n, B, seed = 60, 25, 11
    r = y - model.predict(X)                          # -dL/dF of the half squared error
    lam = (r - r.mean()) / r.std()
    stat = math.sqrt(n) * np.corrcoef(x, lam)[0, 1] ** 2
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1, 0)))
    null = []
    for _ in range(B):
        xb, lb = x[rng.integers(0, n, n)], lam[rng.integers(0, n, n)]
        null.append(math.sqrt(n) * np.corrcoef(xb, lb)[0, 1] ** 2)
    null = np.array(null)
    res = feature_utility(model, X, y, x, n_bootstrap=B, random_state=seed, regressor=LinearRegression())
    assert res.statistic[0] == pytest.approx(stat, rel=1e-9)
    np.testing.assert_allclose(res.null[0], null, rtol=1e-9)
    assert res.n_exceed[0] == np.sum(null >= stat)
    assert res.p_value[0] == pytest.approx((1 + np.sum(null >= stat)) / (B + 1))
    assert res.z[0] == pytest.approx((stat - null.mean()) / null.std(ddof=1))
    assert (res.n_samples, res.n_bootstrap, res.features) == (n, B, ["x0"])


def test_default_statistic_is_the_covariance_of_the_boosted_fit(fitted):
    """Eq. 7 with the default regressor: sqrt(n) times the covariance of the trees' in-sample fit
    and Lambda."""
    model, X, y, C = fitted
    lam = gradient_signal(model, X, y)
    g = GBFSRegressor(**DEFAULT_REGRESSOR_PARAMS).fit(C[:, 2:], lam).predict(C[:, 2:])
    hand = math.sqrt(len(lam)) * float(np.mean(g * lam) - g.mean() * lam.mean())
    assert utility_statistic(C[:, 2], lam, GBFSRegressor(**DEFAULT_REGRESSOR_PARAMS)) == pytest.approx(hand)
    assert hand > 0


def test_classifier_gradient_is_the_logistic_residual_in_log_odds():
    X, y, _ = _draw(500, 1, task="binary")
    model = GBFSClassifier(**MODEL).fit(X[:400], y[:400])
    r = y[400:] - expit(model.decision_function(X[400:]))
    lam = gradient_signal(model, X[400:], y[400:])
    np.testing.assert_allclose(lam, (r - r.mean()) / r.std(), atol=1e-12)
    assert lam.std() == pytest.approx(1.0) and abs(lam.mean()) < 1e-12


# ------------------------------------------------------------------------------ behaviour

@pytest.mark.slow  # a few seconds: the default suite stays under 5 minutes
def test_useful_feature_is_found_noise_and_copy_are_not(fitted):
    model, X, y, C = fitted
    res = feature_utility(model, X, y, pd.DataFrame(C, columns=["noise", "copy_x0", "u"]), n_bootstrap=50,
                          random_state=0)
    table = res.to_frame().set_index("feature")
    assert list(table.index) == ["noise", "copy_x0", "u"]
    assert table.loc["u", "p_value"] == pytest.approx(1 / 51) and table.loc["u", "z"] > 5
    for name in ("noise", "copy_x0"):
        assert table.loc[name, "p_value"] > 0.05 and table.loc[name, "z"] < 2


def test_verbose_shows_a_bar_over_the_candidates_and_changes_nothing(fitted, capsys):
    model, X, y, C = fitted
    quiet = feature_utility(model, X, y, C[:, :2], n_bootstrap=5, random_state=1)
    assert capsys.readouterr().err == ""
    loud = feature_utility(model, X, y, C[:, :2], n_bootstrap=5, random_state=1, verbose=True)
    err = capsys.readouterr().err
    assert "utility test" in err and "2/2" in err
    np.testing.assert_array_equal(quiet.z, loud.z)
    with pytest.raises(TypeError, match="verbose"):
        feature_utility(model, X, y, C[:, :1], verbose="yes")


def test_classifier_finds_the_useful_feature():
    X, y, C = _draw(2400, 2, strength=1.5, task="binary")
    model = GBFSClassifier(**MODEL).fit(X[:2000], y[:2000])
    res = feature_utility(model, X[2000:], y[2000:], C[2000:, [0, 2]], n_bootstrap=40, random_state=1)
    assert res.p_value[1] == pytest.approx(1 / 41) and res.z[1] > 4
    assert res.p_value[0] > 0.05


def test_same_seed_same_result_and_each_candidate_has_its_own_stream(fitted):
    model, X, y, C = fitted
    X, y, C = X[:150], y[:150], C[:150]
    a = feature_utility(model, X, y, C, n_bootstrap=10, random_state=3)
    b = feature_utility(model, X, y, C, n_bootstrap=10, random_state=3)
    c = feature_utility(model, X, y, C, n_bootstrap=10, random_state=4)
    np.testing.assert_array_equal(a.null, b.null)
    np.testing.assert_array_equal(a.p_value, b.p_value)
    assert not np.array_equal(a.null, c.null)
    np.testing.assert_array_equal(a.statistic, c.statistic)       # the statistic draws nothing
    # a candidate's result depends on its position and the seed, not on the other candidates
    alone = feature_utility(model, X, y, C[:, 0], n_bootstrap=10, random_state=3)
    np.testing.assert_array_equal(alone.null[0], a.null[0])
    gen = [feature_utility(model, X, y, C[:, 2], n_bootstrap=5, random_state=np.random.default_rng(9)).null
           for _ in range(2)]
    np.testing.assert_array_equal(*gen)


def test_input_shapes_names_joint_and_a_constant_candidate(fitted):
    model, X, y, C = fitted
    X, y, C = X[:120], y[:120], C[:120]
    series = feature_utility(model, X, y, pd.Series(C[:, 2], name="u"), n_bootstrap=5, random_state=0)
    assert series.features == ["u"]
    named = feature_utility(model, X, y, C[:, :2], n_bootstrap=5, random_state=0, feature_names=["a", "b"])
    assert named.features == ["a", "b"] and named.null.shape == (2, 5)
    joint = feature_utility(model, X, y, C[:, :2], n_bootstrap=5, random_state=0, joint=True,
                            feature_names=["a", "b"])
    assert joint.features == ["a+b"] and joint.statistic.shape == (1,)
    const = feature_utility(model, X, y, np.ones(120), n_bootstrap=5, random_state=0)
    assert (const.statistic[0], const.p_value[0], const.z[0]) == (0.0, 1.0, 0.0)
    with_nan = C[:, 2].copy()
    with_nan[::7] = np.nan                    # a missing value is allowed: the trees bin it apart
    assert np.isfinite(feature_utility(model, X, y, with_nan, n_bootstrap=5, random_state=0).z).all()


# ------------------------------------------------------------------------------ argument errors

def _bad(fitted):
    model, X, y, C = fitted
    X, y, C = X[:50], y[:50], C[:50]
    return [
        (dict(model=GBFSRegressor()), NotFittedError, "model is not fitted"),
        (dict(model=LinearRegression().fit(X, y)), TypeError, "model must be a fitted GBFS"),
        (dict(X=X[:, :2]), ValueError, "X: "),
        (dict(y=y[:-1]), ValueError, "y has 49 entries"),
        (dict(y=np.full(50, np.nan)), ValueError, "y contains NaN"),
        (dict(X_new=C[:-1]), ValueError, "X_new has 49 rows"),
        (dict(X_new=np.full((50, 1), np.inf)), ValueError, "X_new contains infinity"),
        (dict(X_new=np.zeros((50, 1, 1))), ValueError, "X_new must be 1-D or 2-D"),
        (dict(X_new=np.zeros((50, 0))), ValueError, "X_new has no columns"),
        (dict(X_new=np.array(["a"] * 50)), TypeError, "X_new has dtype"),
        (dict(X_new=None), ValueError, "X_new must hold"),
        (dict(n_bootstrap=0), ValueError, "n_bootstrap must be >= 1"),
        (dict(n_bootstrap=2.5), TypeError, "n_bootstrap must be an int"),
        (dict(random_state="seed"), TypeError, "random_state must be"),
        (dict(random_state=-1), ValueError, "random_state must be a non-negative"),
        (dict(regressor=object()), TypeError, "regressor must be"),
        (dict(joint="yes"), TypeError, "joint must be"),
        (dict(feature_names=["a"]), ValueError, "feature_names must be a sequence of 3"),
        (dict(X=X[:1], y=y[:1], X_new=C[:1]), ValueError, "at least 2 rows"),
        (dict(y=model.predict(X)), ValueError, "gradient is constant"),
    ]


def test_every_argument_is_checked_before_any_regressor_fit(fitted):
    model, X, y, C = fitted
    good = dict(model=model, X=X[:50], y=y[:50], X_new=C[:50], n_bootstrap=3, random_state=0)
    for change, error, message in _bad(fitted):
        _Spy.fits = 0
        args = {**good, "regressor": _Spy(), **change}
        with pytest.raises(error, match=message):
            feature_utility(args.pop("model"), args.pop("X"), args.pop("y"), args.pop("X_new"), **args)
        assert _Spy.fits == 0, change


def test_classifier_refuses_labels_it_does_not_know():
    X, y, C = _draw(300, 3, task="binary")
    model = GBFSClassifier(**MODEL).fit(X, y)
    with pytest.raises(ValueError, match="labels"):
        feature_utility(model, X, np.where(y == 1, 7, 0), C, n_bootstrap=2)


# ------------------------------------------------------------------------------ the runner

def _utility_cfg(root: Path, overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="feature_utility",
                       overrides=[f"paths.root_dir={root}", *TINY, "utility.n_bootstrap=20", *overrides])


def test_runner_tests_the_held_back_features(tmp_path):
    from gbfs.data import load_dataset
    from runners.paper.utility_kb import held_back as runner

    cfg = _utility_cfg(tmp_path, ["seed=2"])
    ds = load_dataset("gisette_like", scale=0.05, feature_scale=0.02, seed=2)
    held = runner.held_back(cfg.utility, ds, 2)
    assert held == sorted(held) and len(held) == 6 and len(set(held) & set(ds.relevant.tolist())) == 3
    assert held == runner.held_back(cfg.utility, ds, 2)                     # seeded
    table, metrics = runner.evaluate_held_back(cfg, ds, held)
    assert table["index"].tolist() == held and table.feature.tolist() == [f"f{j}" for j in held]
    assert table.relevant.sum() == 3 == metrics["n_relevant_held_back"]
    assert metrics["n_rows_tested"] == len(ds.y_test) and 0 <= metrics["test_auc"] <= 1
    assert ((table.p_value > 0) & (table.p_value <= 1)).all()
    text = runner.format_table(table)
    assert text.splitlines()[0] == "| feature | index | z | p | significant | truly relevant |"
    assert len(text.splitlines()) == 2 + len(held)
    chosen = runner.held_back(_utility_cfg(tmp_path, ["utility.features=[f5,3,f5]"]).utility, ds, 0)
    assert chosen == [5, 3]


@pytest.mark.slow
@pytest.mark.usefixtures("restore_mlflow")
def test_runner_logs_the_table_to_mlflow(tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    from gbfs.data import load_dataset
    from runners import feature_utility as runner

    cfg = _utility_cfg(tmp_path, ["seed=1"])
    metrics = runner.run(cfg)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    (r,) = client.search_runs([client.get_experiment_by_name("feature-utility").experiment_id])
    assert r.info.status == "FINISHED" and r.data.tags["role"] == "feature_utility"
    assert r.data.params["utility.n_bootstrap"] == "20" and r.data.params["dataset.name"] == "gisette_like"
    assert r.data.metrics["n_held_back"] == metrics["n_held_back"] == 6
    assert r.data.metrics["n_relevant_held_back"] == 3
    local = Path(client.download_artifacts(r.info.run_id, "feature_utility.csv", str(tmp_path / "dl")))
    table = pd.read_csv(local)
    assert list(table.columns) == ["feature", "index", "z", "p_value", "n_exceed", "statistic",
                                   "significant", "relevant"]
    relevant = set(load_dataset("gisette_like", scale=0.05, feature_scale=0.02, seed=1).relevant.tolist())
    assert table.relevant.tolist() == [j in relevant for j in table["index"]]
    assert ((table.p_value > 0) & (table.p_value <= 1)).all()
    assert r.data.metrics[f"z.{table.feature[0]}"] == pytest.approx(table.z[0])
    assert r.data.metrics["n_significant"] == table.significant.sum()
    out = capsys.readouterr().out
    assert "| feature | index | z | p | significant | truly relevant |" in out and table.feature[0] in out


def test_runner_settings_fail_before_any_run(tmp_path):
    from runners import feature_utility as runner

    base = _utility_cfg(tmp_path, [])
    for key, value, message in (("utility.rows", "train", "utility.rows"),
                                ("utility.alpha", 2, "utility.alpha"),
                                ("utility.progress", "yes", "utility.progress must be true or false"),
                                ("utility.n_bootstrap", 0, "utility.n_bootstrap"),
                                ("utility.n_relevant", -1, "utility.n_relevant"),
                                ("utility.features", [9999], "utility.features"),
                                ("utility.features", ["nope"], "utility.features")):
        cfg = base.copy()
        OmegaConf.update(cfg, key, value)
        with pytest.raises(ValueError, match=message):
            runner.run(cfg)
    with pytest.raises(ValueError, match="needs a gbfs one"):
        runner.run(_utility_cfg(tmp_path, ["method=gbdt_full"]))
    assert not (tmp_path / "mlflow.db").exists()          # no MLflow store, let alone a run


@pytest.mark.slow
def test_runner_command_line(tmp_path):
    """``python -m runners.feature_utility`` end to end, with names as the held-back features."""
    proc = subprocess.run([sys.executable, "-m", "runners.feature_utility", f"paths.root_dir={tmp_path}",
                           *TINY, "utility.n_bootstrap=10", "utility.features=[f0,f99]"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| f0 | 0 |" in proc.stdout and "| f99 | 99 |" in proc.stdout
