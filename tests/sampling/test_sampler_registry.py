"""The sampler registry (gbfs.sampling.samplers): a sampler defined outside gbfs as one registered class is
usable by name from the estimators, unknown names are refused with the registered ones listed, and
register refuses classes the estimator could not configure."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from gbfs import GBFSClassifier, load_model
from gbfs.sampling.samplers import RATE, SAMPLERS, USED_BY, RowSampler, from_params, param, register

NAME = "systematic"


@dataclass(frozen=True)
class Systematic(RowSampler):
    """Systematic sampling: every k-th row from a uniform random start, k = round(1 / subsample).

    Row i is kept iff i = start (mod k), so with N >= k its inclusion probability is exactly 1 / k
    and weight k keeps node sums unbiased, as the samplers of gbfs.sampling.samplers do.
    """

    subsample: float = param(0.25, RATE)

    def draw(self, g, h, iteration, rng):
        k = max(1, round(1.0 / self.subsample))
        rows = np.arange(int(rng.integers(min(k, g.shape[0]))), g.shape[0], k, dtype=np.int32)
        return rows, np.full(rows.shape[0], float(k))


@pytest.fixture
def systematic():
    # registered for the test only: registering at import would change, for the whole session,
    # the registry other tests compare with (names listed in errors, readers named in warnings)
    cls = register(NAME)(Systematic)
    yield cls
    del SAMPLERS[NAME]


def _fit(data, **kw):
    Xt, yt, Xv, yv = data
    params = dict(n_estimators=15, max_leaves=8, min_samples_leaf=5, random_state=0, n_threads=1)
    return GBFSClassifier(**{**params, **kw}).fit(Xt, yt, eval_set=(Xv, yv))


def test_a_registered_class_is_a_sampler_of_the_estimator(systematic, data, tmp_path):
    assert SAMPLERS[NAME] is Systematic and Systematic.kind == NAME
    assert USED_BY["subsample"] == ("sgb", "mvs", "mvs_adaptive", NAME)
    est = _fit(data, sampler=NAME, subsample=0.25)
    # its rows grew every tree: k = 4, so exactly 1500 / 4 rows per tree
    assert {rec["n_rows_sampled"] for rec in est.history_} == {375}
    assert est.history_[-1]["val_auc"] > 0.8
    Xv, yv = data[2], data[3]
    pred = est.predict(Xv)
    assert pred.shape == yv.shape and np.mean(pred == yv) > 0.7
    # seeded like the built-in samplers: same seed same model, another seed another sample
    np.testing.assert_array_equal(_fit(data, sampler=NAME, subsample=0.25).predict_proba(Xv),
                                  est.predict_proba(Xv))
    assert not np.array_equal(_fit(data, sampler=NAME, subsample=0.25, random_state=1).predict_proba(Xv),
                              est.predict_proba(Xv))
    # its default and range check come from its own declaration
    assert from_params(NAME) == Systematic(subsample=0.25)
    with pytest.raises(ValueError, match="subsample"):
        _fit(data, sampler=NAME, subsample=0.0)
    with pytest.warns(UserWarning, match=f'top_rate ignored with sampler="{NAME}"'):
        assert from_params(NAME, top_rate=0.1) == Systematic()
    est.save_model(tmp_path / "m.json")
    np.testing.assert_array_equal(load_model(tmp_path / "m.json").predict_proba(Xv),
                                  est.predict_proba(Xv))


def test_unknown_sampler_names_the_argument_and_the_registered_samplers(data, systematic):
    listed = r"sampler must be one of \['sgb', 'goss', 'mvs', 'mvs_adaptive', 'systematic'\], got 'bogus'"
    with pytest.raises(ValueError, match=listed):
        _fit(data, sampler="bogus")
    with pytest.raises(ValueError, match=listed):
        from_params("bogus")


def test_unregistered_after_the_test(data):
    assert NAME not in SAMPLERS
    with pytest.raises(ValueError, match=r"sampler must be one of \['sgb', 'goss', 'mvs', 'mvs_adaptive'\]"):
        _fit(data, sampler=NAME)


def test_register_refuses_what_the_estimator_cannot_configure(systematic):
    with pytest.raises(ValueError, match="already registered"):
        register(NAME)(Systematic)

    class Plain(RowSampler):  # not a dataclass: its parameters would not be fields
        def draw(self, g, h, iteration, rng):
            return np.arange(g.shape[0], dtype=np.int32), np.ones(g.shape[0])

    with pytest.raises(TypeError, match="dataclass"):
        register("plain")(Plain)
    with pytest.raises(TypeError, match="dataclass"):
        register("mutable")(dataclass(type("Mutable", (Plain,), {})))

    @dataclass(frozen=True)
    class Unknown(Plain):
        sample_rate: float = param(0.5, RATE)  # not an estimator argument

    with pytest.raises(TypeError, match="sample_rate"):
        register("unknown")(Unknown)
    assert list(SAMPLERS) == ["sgb", "goss", "mvs", "mvs_adaptive", NAME]


def test_a_registered_sampler_without_a_lightgbm_equivalent_is_refused_on_lightgbm(systematic):
    """The harness maps only the samplers LightGBM has (bagging, GOSS); a newly registered one is
    refused on a LightGBM method, naming it, and never taken for one of them."""
    from runners.core.estimators import LIGHTGBM_SAMPLERS, lightgbm_sampling

    assert NAME not in LIGHTGBM_SAMPLERS
    with pytest.raises(ValueError, match=r"sampler='systematic' has no LightGBM equivalent"):
        lightgbm_sampling({"sampler": NAME, "subsample": 0.5})
    assert lightgbm_sampling({"sampler": "sgb", "subsample": 0.5}) == {
        "lgb_params": {"bagging_fraction": 0.5, "bagging_freq": 1}}
