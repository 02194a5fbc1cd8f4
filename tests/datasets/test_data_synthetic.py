"""Synthetic stand-ins of the papers' data sets (``gbfs.data.synthetic.generators``): shapes, seeding,
signal."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import rankdata
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import roc_auc_score

from gbfs.data.synthetic.generators import (
    GENERATORS,
    SyntheticData,
    epsilon_like,
    figure1,
    flight_frames,
    flight_like,
    gisette_like,
    make_figure1_regression,
    multitask,
)

CATEGORICAL = ("Month", "DayofMonth", "DayOfWeek", "UniqueCarrier", "Origin", "Dest")


def _univariate_auc_gap(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``|AUC - 0.5|`` of each column as a score for ``y`` (Mann-Whitney with tied ranks)."""
    ranks = rankdata(X, axis=0)
    n1 = y.sum()
    auc = (ranks[y == 1].sum(0) - n1 * (n1 + 1) / 2) / (n1 * (len(y) - n1))
    return np.abs(auc - 0.5)


def _check_layout(data: SyntheticData) -> None:
    for X, y in ((data.X_train, data.y_train), (data.X_test, data.y_test)):
        assert X.dtype == np.float32 and X.flags.c_contiguous
        assert X.shape == (len(y), len(data.feature_names))
        assert y.dtype == (np.int64 if data.task in ("binary", "ranking") else np.float64)
    assert data.relevant.dtype == np.int64
    assert np.all(np.diff(data.relevant) > 0)


@pytest.fixture(scope="module")
def gisette():
    return gisette_like()


def test_registry():
    assert set(GENERATORS) == {"gisette_like", "epsilon_like", "flight_like", "flight_like_categorical",
                               "figure1", "multitask", "ranking_like"}
    assert GENERATORS["gisette_like"] is gisette_like


def test_gisette_like_shape_and_values(gisette):
    _check_layout(gisette)
    assert gisette.X_train.shape == (6000, 5000) and gisette.X_test.shape == (1000, 5000)
    assert gisette.feature_names[0] == "f0" and gisette.feature_names[-1] == "f4999"
    X = gisette.X_test
    assert np.array_equal(X, np.round(X)) and X.min() == 0 and X.max() == 999
    assert 0.84 < np.mean(X == 0) < 0.90
    assert abs(gisette.y_train.mean() - 0.5) < 0.03 and gisette.task == "binary"
    assert 20 <= len(gisette.relevant) <= 50


@pytest.mark.parametrize("make", [gisette_like, epsilon_like])
def test_relevant_columns_carry_the_univariate_signal(make, gisette):
    data = gisette if make is gisette_like else epsilon_like(scale=0.1, feature_scale=0.25)
    X, y = data.X_train, data.y_train
    # pure noise: neither relevant nor a noisy copy of a relevant column
    irrelevant = np.setdiff1d(np.flatnonzero(data.copy_of < 0), data.relevant)
    sample = np.random.default_rng(0).choice(irrelevant, 200, replace=False)
    gap_rel = _univariate_auc_gap(X[:, data.relevant], y)
    gap_irr = _univariate_auc_gap(X[:, sample], y)
    assert gap_rel.mean() > 1.3 * gap_irr.max()
    # the 10 strongest columns of relevant + sampled ones are all relevant
    top = np.argsort(-np.concatenate([gap_rel, gap_irr]))[:10]
    assert np.all(top < len(gap_rel))


# about 17 s for the three: run with the slow tests, so the default suite stays under 5 minutes
@pytest.mark.slow
@pytest.mark.parametrize("make, kwargs", [
    (gisette_like, dict(scale=0.3, feature_scale=0.1)),
    (epsilon_like, dict(scale=0.05, feature_scale=0.1)),
    (flight_like, dict(scale=0.05)),
])
def test_relevant_columns_suffice(make, kwargs):
    data = make(**kwargs)
    aucs = []
    for cols in (slice(None), data.relevant):
        model = HistGradientBoostingClassifier(max_iter=100, random_state=0)
        model.fit(data.X_train[:, cols], data.y_train)
        aucs.append(roc_auc_score(data.y_test, model.predict_proba(data.X_test[:, cols])[:, 1]))
    auc_all, auc_relevant = aucs
    assert auc_all > 0.6
    assert auc_relevant > auc_all - 0.02


@pytest.mark.parametrize("make, kwargs, n_copies, bound", [
    (gisette_like, dict(scale=0.1), 240, 0.4),
    (epsilon_like, dict(scale=0.02), 240, 0.45),
    (flight_like, dict(scale=0.1), 8, 0.3),
])
def test_copies_are_correlated_with_their_sources(make, kwargs, n_copies, bound, gisette):
    data = gisette if make is gisette_like else make(**kwargs)
    X = data.X_train.astype(np.float64)
    copies = np.flatnonzero(data.copy_of >= 0)
    assert data.copy_of.shape == (X.shape[1],) and data.copy_of.dtype == np.int64
    assert len(copies) == n_copies and not set(copies) & set(data.relevant.tolist())

    def corr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        za, zb = ((X[:, c] - X[:, c].mean(0)) / X[:, c].std(0) for c in (a, b))
        return (za * zb).mean(0)

    assert corr(copies, data.copy_of[copies]).min() > bound
    if make is not flight_like:   # copies of every relevant column; other columns are independent noise
        assert set(data.copy_of[copies].tolist()) == set(data.relevant.tolist())
        noise = np.setdiff1d(np.flatnonzero(data.copy_of < 0), data.relevant)[:200]
        assert np.abs(corr(noise, np.full(len(noise), data.relevant[0]))).max() < bound / 2


def test_copies_keep_the_marginals(gisette):
    # a gisette copy takes the density of its source; an epsilon copy is Gaussian before the scaling
    X = gisette.X_train
    copies = np.flatnonzero(gisette.copy_of >= 0)
    zeros = (X == 0).mean(0)
    assert np.abs(zeros[copies] - zeros[gisette.copy_of[copies]]).max() < 0.05
    eps = epsilon_like(scale=0.05)
    sd = eps.X_train.std(0)
    assert abs(np.median(sd[eps.copy_of >= 0]) / np.median(sd[eps.copy_of < 0]) - 1) < 0.02
    assert eps.copy_of[eps.relevant].max() == -1
    # narrow widths keep as many noise columns as relevant ones: 100 columns, one copy each; 60, none
    assert (epsilon_like(scale=0.02, feature_scale=0.05).copy_of >= 0).sum() == 30
    assert epsilon_like(scale=0.02, feature_scale=0.01).copy_of.max() == -1


def test_epsilon_like_shape_and_rows():
    small, larger = epsilon_like(scale=0.02), epsilon_like(scale=0.04)
    _check_layout(small)
    assert small.X_train.shape == (1600, 2000) and small.X_test.shape == (400, 2000)
    assert larger.X_train.shape == (3200, 2000) and larger.X_test.shape == (800, 2000)
    assert np.allclose(np.linalg.norm(small.X_train, axis=1), 1.0, atol=1e-5)
    assert abs(small.y_train.mean() - 0.5) < 0.05
    assert 20 <= len(small.relevant) <= 40
    assert np.array_equal(small.relevant, larger.relevant)
    assert epsilon_like(scale=0.02, feature_scale=0.5).X_train.shape == (1600, 1000)


@pytest.mark.parametrize("make, kwargs", [
    (gisette_like, dict(feature_scale=0.05)), (epsilon_like, dict(feature_scale=0.1)),
    (flight_like, {}), (figure1, {}), (multitask, {}),
])
def test_scale_changes_rows_only_and_rows_are_prefixes(make, kwargs):
    small, large = make(scale=0.1, **kwargs), make(scale=0.25, **kwargs)
    n_tr, n_te = len(small.y_train), len(small.y_test)
    assert len(large.y_train) > n_tr and len(large.y_test) > n_te
    if make is flight_like:
        # one-hot columns are the levels present, and the small sample's rows are among the large one's
        assert set(small.feature_names) <= set(large.feature_names)
        cols = [large.feature_names.index(name) for name in small.feature_names]
        large_X_train, large_X_test = large.X_train[:, cols], large.X_test[:, cols]
    else:
        assert small.feature_names == large.feature_names
        assert np.array_equal(small.relevant, large.relevant)
        large_X_train, large_X_test = large.X_train, large.X_test
    # row i depends only on (seed, split, i): the test split is independent of the train size
    assert np.array_equal(small.X_train, large_X_train[:n_tr])
    assert np.array_equal(small.y_train, large.y_train[:n_tr])
    assert np.array_equal(small.X_test, large_X_test[:n_te])
    assert np.array_equal(small.y_test, large.y_test[:n_te])


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_seeding(name):
    kwargs = {"feature_scale": 0.05} if name in ("gisette_like", "epsilon_like") else {}
    a, b, c = (GENERATORS[name](scale=0.01, random_state=seed, **kwargs) for seed in (3, 3, 4))
    _check_layout(a)
    for field in ("X_train", "y_train", "X_test", "y_test"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
    assert a.feature_names == b.feature_names and np.array_equal(a.relevant, b.relevant)
    assert not np.array_equal(a.X_train, c.X_train) and not np.array_equal(a.X_test, c.X_test)


def test_flight_like_columns():
    data = flight_like(scale=0.02)
    _check_layout(data)
    names = data.feature_names
    assert len(data.y_train) == len(data.y_test) == 2000
    assert names[-2:] == ["DepTime", "Distance"]
    for col, n_levels in (("Month", 12), ("DayofMonth", 31), ("DayOfWeek", 7), ("UniqueCarrier", 22)):
        assert sum(n.startswith(col + "=") for n in names) == n_levels
    assert "Month=c-12" in names and "DayOfWeek=c-7" in names
    n_airports = sum(n.startswith(("Origin=", "Dest=")) for n in names)
    assert len(names) == 74 + n_airports <= 634
    onehot = data.X_train[:, :-2]
    assert np.array_equal(onehot.sum(1), np.full(len(onehot), len(CATEGORICAL), dtype=np.float32))
    dep, dist = data.X_train[:, -2], data.X_train[:, -1]
    assert dep.min() >= 1 and dep.max() <= 2400 and np.all(dep % 100 < 60)
    assert np.array_equal(dep, np.round(dep))
    assert dist.min() >= 30 and np.array_equal(dist, np.round(dist))
    rate = np.concatenate([data.y_train, data.y_test]).mean()
    assert 0.16 < rate < 0.22
    relevant = [names[j] for j in data.relevant]
    assert "DepTime" in relevant and "Distance" not in relevant
    prefixes = ("UniqueCarrier=", "Origin=", "Month=", "DayOfWeek=")
    assert all(n == "DepTime" or n.startswith(prefixes) for n in relevant)
    assert sum(n.startswith("UniqueCarrier=") for n in relevant) == 3
    assert sum(n.startswith("Origin=") for n in relevant) == 3


def test_flight_frames_are_benchm_ml_columns():
    train, test = flight_frames(scale=0.01, random_state=5)
    columns = ["Month", "DayofMonth", "DayOfWeek", "DepTime", "UniqueCarrier", "Origin", "Dest", "Distance",
               "dep_delayed_15min"]
    assert list(train.columns) == list(test.columns) == columns and len(train) == len(test) == 1000
    assert train["Month"].str.fullmatch(r"c-([1-9]|1[0-2])").all()
    assert train["Origin"].str.fullmatch("[A-Z]{3}").all() and train["UniqueCarrier"].str.len().eq(2).all()
    assert set(train["dep_delayed_15min"]) == {"Y", "N"}
    assert np.array_equal(flight_like(scale=0.01, random_state=5).y_test,
                          (test["dep_delayed_15min"] == "Y").to_numpy())


def test_flight_like_width_near_paper():
    data = flight_like(scale=0.25)
    assert data.X_train.shape == (25_000, 634) and data.X_test.shape == (25_000, 634)
    # DepTime, the 12 months, the 7 weekdays, 3 carriers and 3 origins
    assert len(data.relevant) == 26


def test_flight_like_label_uses_its_relevant_columns():
    data = flight_like(scale=0.5)
    names, X, y = data.feature_names, data.X_train, data.y_train
    late = X[:, names.index("DepTime")] >= 1800
    early = X[:, names.index("DepTime")] < 900
    assert y[late].mean() > y[early].mean() + 0.1
    # Delay-rate shift of each carrier's one-hot level: the 3 with an effect shift it most
    carriers = [j for j, n in enumerate(names) if n.startswith("UniqueCarrier=")]
    shift = {j: abs(y[X[:, j] == 1].mean() - y[X[:, j] == 0].mean()) for j in carriers}
    relevant = set(data.relevant.tolist())
    others = [shift[j] for j in carriers if j not in relevant]
    assert min(shift[j] for j in relevant if j in shift) > max(others)

    # months and weekdays follow cycles: their delay rates spread more than the days of the month's
    def spread(prefix: str) -> float:
        rates = [y[X[:, j] == 1].mean() for j, n in enumerate(names) if n.startswith(prefix)]
        return max(rates) - min(rates)

    assert min(spread("Month="), spread("DayOfWeek=")) > 1.5 * spread("DayofMonth=")


def test_figure1():
    data = figure1(scale=0.5, n_features=20, random_state=1)
    _check_layout(data)
    assert data.X_train.shape == (5000, 20) and data.X_test.shape == (1000, 20)
    assert data.task == "regression" and data.relevant.tolist() == [0, 1, 2]
    X = data.X_train.astype(np.float64)
    residual = data.y_train - (2 * X[:, 0] - 3 * 2.0 ** X[:, 1] + np.log2(1 + X[:, 2]))
    assert abs(residual.mean()) < 0.05 and abs(residual.std() - 1.0) < 0.05
    assert figure1().X_train.shape == (10_000, 100)


def test_make_figure1_regression_unchanged():
    X, y = make_figure1_regression(5, 4, random_state=0)
    rng = np.random.default_rng(0)
    X_ref = rng.random((5, 4))
    assert np.array_equal(X, X_ref)
    assert np.allclose(y, 2 * X_ref[:, 0] - 3 * 2.0 ** X_ref[:, 1] + np.log2(1 + X_ref[:, 2])
                       + rng.standard_normal(5))


@pytest.mark.parametrize("task_type", ["binary", "regression"])
def test_multitask_structure(task_type):
    data = multitask(scale=0.5, n_tasks=3, n_features=60, n_shared=4, n_specific=2, task_type=task_type)
    _check_layout(data)
    assert data.task == task_type
    assert data.X_train.shape == (3 * 1000, 60) and data.X_test.shape == (3 * 250, 60)
    assert data.task_train.dtype == np.int64 and data.task_train.tolist()[:6] == [0, 1, 2, 0, 1, 2]
    assert np.array_equal(np.bincount(data.task_test), [250] * 3)
    sets = [set(r.tolist()) for r in data.relevant_per_task]
    shared = set.intersection(*sets)
    assert len(shared) == 4 and all(len(s) == 6 for s in sets)
    specific = [s - shared for s in sets]
    assert all(not (a & b) for i, a in enumerate(specific) for b in specific[i + 1:])
    assert set(data.relevant.tolist()) == set.union(*sets)
    assert all(np.all(np.diff(r) > 0) for r in data.relevant_per_task)


def test_multitask_each_task_depends_on_its_own_features():
    data = multitask(n_tasks=3, n_features=40, task_type="regression", random_state=2)
    for t, relevant in enumerate(data.relevant_per_task):
        rows = data.task_train == t
        X, y = data.X_train[rows].astype(np.float64), data.y_train[rows]
        corr = np.abs([np.corrcoef(X[:, j], y)[0, 1] for j in range(X.shape[1])])
        assert corr[relevant].min() > np.delete(corr, relevant).max()


@pytest.mark.parametrize("make, kwargs, argument", [
    (gisette_like, dict(scale=-1), "scale"),
    (gisette_like, dict(scale=0), "scale"),
    (epsilon_like, dict(scale=float("nan")), "scale"),
    (flight_like, dict(scale="1"), "scale"),
    (figure1, dict(scale=True), "scale"),
    (gisette_like, dict(feature_scale=0), "feature_scale"),
    (epsilon_like, dict(feature_scale=-0.5), "feature_scale"),
    (gisette_like, dict(random_state=-1), "random_state"),
    (flight_like, dict(random_state=1.5), "random_state"),
    (figure1, dict(n_features=2), "n_features"),
    (multitask, dict(n_tasks=0), "n_tasks"),
    (multitask, dict(n_shared=-1), "n_shared"),
    (multitask, dict(n_specific=1.0), "n_specific"),
    (multitask, dict(task_type="multiclass"), "task_type"),
    (multitask, dict(n_features=10, n_shared=5, n_specific=3, n_tasks=2), "n_features"),
    (multitask, dict(n_shared=0, n_specific=0), "n_shared"),
])
def test_bad_arguments(make, kwargs, argument):
    with pytest.raises(ValueError, match=f"^{argument}"):
        make(**kwargs)


def test_flight_like_categorical_is_the_one_hot_data_collapsed():
    from gbfs.data.synthetic.flight import flight_like

    hot, cat = flight_like(scale=0.02), flight_like(scale=0.02, categorical=True)
    assert cat.categorical == tuple(range(6)) and cat.feature_names[6:] == ["DepTime", "Distance"]
    start = 0
    for j, levels in enumerate(cat.categories):
        names = [f"{cat.feature_names[j]}={v}" for v in levels]
        assert hot.feature_names[start:start + len(levels)] == names
        codes = cat.X_train[:, j].astype(int)
        assert np.all(hot.X_train[np.arange(len(codes)), start + codes] == 1.0)
        start += len(levels)
    assert np.array_equal(cat.X_test[:, 6:], hot.X_test[:, start:])
    assert [cat.feature_names[j] for j in cat.relevant] == ["Month", "DayOfWeek", "UniqueCarrier", "Origin",
                                                            "DepTime"]
