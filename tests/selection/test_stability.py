"""Selection stability: the two indices by hand, their means over pairs, the resampling, the real selector."""

from __future__ import annotations

import itertools
import json
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402

from gbfs import GBFSClassifier  # noqa: E402
from gbfs.selection.stability import StabilityResult, jaccard_index, kuncheva_index, selection_stability  # noqa: E402

FITS: list[dict] = []  # what each fit of the fake selector saw (clones do not share attributes)


class RowSelector(ClassifierMixin, BaseEstimator):
    """Fake selector on data whose column 0 is the row id: it "selects" the ids of the rows it saw,
    so a selection is the subsample itself."""

    def __init__(self, random_state=None):
        self.random_state = random_state

    def fit(self, X, y, **kwargs):
        rows = np.asarray(X)[:, 0].astype(np.int64)
        FITS.append({"rows": rows, "labels": np.asarray(y), "seed": self.random_state, "kwargs": kwargs})
        self.selected_features_ = rows
        return self


class SeedlessRowRegressor(RegressorMixin, BaseEstimator):
    def fit(self, X, y):
        self.selected_features_ = np.asarray(X)[:, 0].astype(np.int64)
        return self


@pytest.fixture(autouse=True)
def _clear_fits():
    FITS.clear()


def row_data(n=40, n_pos=10):
    X = np.zeros((n, n))
    X[:, 0] = np.arange(n)
    y = np.zeros(n, dtype=np.int64)
    y[np.random.default_rng(1).choice(n, n_pos, replace=False)] = 1
    return X, y


def test_jaccard_by_hand():
    assert jaccard_index([0, 1, 2], [1, 2, 3]) == pytest.approx(2 / 4)
    assert jaccard_index([2, 0, 1], [0, 1, 2]) == 1.0
    assert jaccard_index([0, 1], [2, 3]) == 0.0
    assert jaccard_index([], []) == 1.0
    assert jaccard_index([], [4]) == 0.0


def test_kuncheva_by_hand():
    assert kuncheva_index([0, 1, 2], [1, 2, 3], 10) == pytest.approx((2 * 10 - 9) / (3 * 7))
    assert kuncheva_index([0, 1, 2], [1, 2, 3], 10) == pytest.approx(11 / 21)
    assert kuncheva_index([4, 7, 1], [1, 4, 7], 10) == pytest.approx(1.0)
    assert kuncheva_index([0, 1, 2, 3, 4], [5, 6, 7, 8, 9], 10) == pytest.approx(-1.0)
    # unequal sizes, Lustgarten et al.: r=1, ka=3, kb=2 -> (1 - 6/10) / (2 - max(0, -5)) = 0.2
    assert kuncheva_index([0, 1, 2], [2, 3], 10) == pytest.approx(0.2)
    # ka=7, kb=8, r=5 -> (5 - 56/10) / (7 - max(0, 15 - 10)) = -0.3
    assert kuncheva_index(range(7), range(2, 10), 10) == pytest.approx(-0.3)
    assert kuncheva_index([], [], 10) != kuncheva_index([], [], 10)  # NaN: k = 0
    assert math.isnan(kuncheva_index(range(4), range(4), 4))  # k = d
    assert math.isnan(kuncheva_index([], [1, 2], 10))
    assert math.isnan(kuncheva_index(range(10), [1, 2], 10))
    with pytest.raises(ValueError, match="b must hold feature indices"):
        kuncheva_index([0], [10], 10)
    with pytest.raises(ValueError, match="n_features"):
        kuncheva_index([0], [1], 0)


def _hand_kuncheva(a, b, d):
    ka, kb, r = len(a), len(b), len(a & b)
    if ka == kb:
        return math.nan if ka in (0, d) else (r * d - ka**2) / (ka * (d - ka))
    den = min(ka, kb) - max(0, ka + kb - d)
    return math.nan if den == 0 else (r - ka * kb / d) / den


def test_means_over_pairs_match_a_hand_loop():
    sels, d = [[0, 1, 2], [3, 2, 1], [1, 0], [], [5, 1]], 6
    res = StabilityResult.from_selections(sels, d)
    sets = [set(s) for s in sels]
    jac = [len(a & b) / len(a | b) if a | b else 1.0 for a, b in itertools.combinations(sets, 2)]
    kun = [_hand_kuncheva(a, b, d) for a, b in itertools.combinations(sets, 2)]
    assert res.jaccard == pytest.approx(np.mean(jac))
    assert res.kuncheva == pytest.approx(np.mean([v for v in kun if not math.isnan(v)]))
    assert sum(math.isnan(v) for v in kun) == 4  # the empty selection against each of the others
    np.testing.assert_allclose(res.frequency, [2 / 5, 4 / 5, 2 / 5, 1 / 5, 0, 1 / 5])
    assert [s.tolist() for s in res.selections] == sels  # selection order kept
    m = res.pairwise("kuncheva")
    assert m.shape == (5, 5) and np.allclose(m, m.T, equal_nan=True)
    assert m[0, 1] == pytest.approx(kun[0]) and np.isnan(m[3, 3])
    np.testing.assert_allclose(np.diag(res.pairwise()), 1.0)


def test_all_empty_selections():
    res = StabilityResult.from_selections([[], [], []], 4)
    assert res.jaccard == 1.0 and math.isnan(res.kuncheva)
    d = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert d["kuncheva"] is None and d["most_frequent"] == []


def test_subsample_size_and_stratification():
    X, y = row_data(n=40, n_pos=10)
    res = selection_stability(RowSelector(), X, y, n_resamples=6, random_state=0)
    assert len(FITS) == 6 and res.n_features == 40
    for fit, sel in zip(FITS, res.selections):
        assert len(sel) == 20 and len(set(sel.tolist())) == 20
        np.testing.assert_array_equal(fit["labels"], y[sel])
        assert fit["labels"].sum() == 5  # a quarter positive, as in y
        assert "eval_set" not in fit["kwargs"]
    FITS.clear()
    res = selection_stability(RowSelector(), X, y, n_resamples=3, subsample=0.3, random_state=0)
    assert [len(s) for s in res.selections] == [12, 12, 12]
    # a regressor is not stratified, and subsample=1 gives every row to every fit
    res = selection_stability(SeedlessRowRegressor(), X, y.astype(float), n_resamples=2, subsample=1.0)
    assert all(s.tolist() == list(range(40)) for s in res.selections)


def test_stratify_false_and_dataframe():
    X, y = row_data(n=40, n_pos=10)
    df = pd.DataFrame(X, columns=[f"c{j}" for j in range(40)], index=np.arange(100, 140))
    res = selection_stability(RowSelector(), df, pd.Series(y, index=df.index), n_resamples=8,
                              stratify=False, random_state=3)
    assert res.feature_names[:2] == ["c0", "c1"]
    assert len({int(f["labels"].sum()) for f in FITS}) > 1  # proportions now vary between subsamples
    assert res.to_dict()["most_frequent"][0]["name"].startswith("c")


def test_reproducible_by_seed_and_distinct_fit_seeds():
    X, y = row_data()
    eval_set = (X[:5], y[:5])
    a = selection_stability(RowSelector(), X, y, n_resamples=4, eval_set=eval_set, random_state=7)
    seeds_a = [f["seed"] for f in FITS]
    assert all(f["kwargs"]["eval_set"] is eval_set for f in FITS)
    FITS.clear()
    b = selection_stability(RowSelector(), X, y, n_resamples=4, eval_set=eval_set, random_state=7)
    assert [s.tolist() for s in a.selections] == [s.tolist() for s in b.selections]
    assert seeds_a == [f["seed"] for f in FITS] and len(set(seeds_a)) == 4
    c = selection_stability(RowSelector(), X, y, n_resamples=4, random_state=8)
    assert [s.tolist() for s in a.selections] != [s.tolist() for s in c.selections]
    assert len({tuple(s.tolist()) for s in a.selections}) == 4  # the resamples differ from each other
    rs = np.random.RandomState(7)
    assert selection_stability(RowSelector(), X, y, random_state=rs).random_state is None


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"n_resamples": 1}, ValueError, "n_resamples"),
    ({"n_resamples": 2.0}, TypeError, "n_resamples"),
    ({"subsample": 0.0}, ValueError, "subsample"),
    ({"subsample": 1.5}, ValueError, "subsample"),
    ({"subsample": float("nan")}, ValueError, "subsample"),
    ({"subsample": "half"}, TypeError, "subsample"),
    ({"subsample": 0.01}, ValueError, "subsample"),
    ({"subsample": 0.98}, ValueError, "subsample"),  # 39 of 40 rows leaves one: fewer than 2 classes
    ({"stratify": "yes"}, TypeError, "stratify"),
    ({"eval_set": [1, 2, 3]}, TypeError, "eval_set"),
])
def test_bad_arguments(kwargs, exc, match):
    X, y = row_data()
    with pytest.raises(exc, match=match):
        selection_stability(RowSelector(), X, y, **kwargs)


def test_bad_data_and_estimator():
    X, y = row_data()
    with pytest.raises(ValueError, match="y must be 1-D"):
        selection_stability(RowSelector(), X, y[:-1])
    with pytest.raises(ValueError, match="X must be 2-D"):
        selection_stability(RowSelector(), X[:, 0], y)
    with pytest.raises(TypeError, match="estimator must be"):
        selection_stability(object(), X, y)

    class NoSelection(RowSelector):
        def fit(self, X, y, **kwargs):
            return self

    with pytest.raises(TypeError, match="selected_features_"):
        selection_stability(NoSelection(), X, y, random_state=0)
    res = StabilityResult.from_selections([[0], [1]], 2)
    with pytest.raises(ValueError, match="index"):
        res.pairwise("dice")
    with pytest.raises(ValueError, match="top"):
        res.plot(top=0)
    with pytest.raises(ValueError, match="selections"):
        StabilityResult.from_selections([[0]], 2)
    with pytest.raises(ValueError, match=r"selections\[1\]"):
        StabilityResult.from_selections([[0], [2]], 2)


def test_plot_and_to_dict():
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    res = StabilityResult.from_selections([[0, 2], [2], [3, 2, 0]], 5, feature_names=list("abcde"),
                                          subsample=0.5, random_state=0)
    ax = res.plot(top=2)
    assert isinstance(ax, Axes)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["c", "a"]
    assert "Jaccard" in ax.get_title() and "Kuncheva" in ax.get_title()
    assert res.plot(ax=ax) is ax
    plt.close("all")
    d = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert d["n_resamples"] == 3 and d["subsample"] == 0.5 and d["random_state"] == 0
    assert d["selections"] == [[0, 2], [2], [3, 2, 0]]
    assert [f["name"] for f in d["most_frequent"]] == ["c", "a", "d"]
    assert d["frequency"] == pytest.approx([2 / 3, 0, 1, 1 / 3, 0])
    assert d["jaccard"] == pytest.approx(res.jaccard)


def test_gbfs_classifier_with_eval_set():
    X, y = make_classification(n_samples=300, n_features=20, n_informative=3, shuffle=False, random_state=0)
    est = GBFSClassifier(method="agbm", mu=0.02, n_estimators=10, max_depth=3, min_samples_leaf=5,
                         early_stopping_rounds=5, random_state=0)
    # early stopping without an eval set is refused by the estimator: proof that eval_set reaches fit
    with pytest.raises(ValueError, match="eval_set"):
        selection_stability(est, X[:200], y[:200], n_resamples=2, random_state=0)
    res = selection_stability(est, X[:200], y[:200], n_resamples=8, eval_set=(X[200:], y[200:]),
                              random_state=0)
    assert res.n_resamples == 8 and res.n_features == 20
    assert np.all((res.frequency >= 0) & (res.frequency <= 1))
    # shuffle=False: the informative features are columns 0-2
    assert set(np.argsort(-res.frequency, kind="stable")[:3].tolist()) == {0, 1, 2}
    assert 0 < res.jaccard <= 1 and -1 <= res.kuncheva <= 1


def test_verbose_stability_shows_a_bar_over_the_fits(clf_data, capsys):
    X, y = clf_data
    selection_stability(GBFSClassifier(n_estimators=5, random_state=0), X, y, n_resamples=3, random_state=0,
                        verbose=True)
    assert "selection stability: 100%" in capsys.readouterr().err
    with pytest.raises(TypeError, match="verbose must be True or False"):
        selection_stability(GBFSClassifier(), X, y, verbose=1)
