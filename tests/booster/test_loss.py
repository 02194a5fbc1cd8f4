"""Losses: residuals are minus the derivative of the loss, hessians its second derivative
(checked by finite differences), stable losses for huge raw scores, optimal constant init."""

from __future__ import annotations

import naive
import numpy as np
import pytest
from scipy.special import expit

from gbfs.booster.losses.loss import LOSSES, LogisticLoss, SquaredLoss

REFERENCE = {"logistic": naive.logistic_loss_per_row, "squared_error": naive.squared_loss_per_row}


def _data(loss, n=40, seed=0):
    rng = np.random.default_rng(seed)
    if loss is LogisticLoss:
        y = rng.integers(0, 2, n).astype(np.float64)
    else:
        y = rng.normal(size=n) * 3
    raw = rng.normal(size=n) * 4
    return y, raw


def _per_row_loss(loss, y, raw):
    """The library's loss of every row alone (``loss`` returns a mean)."""
    return np.array([loss.loss(y[i:i + 1], raw[i:i + 1]) for i in range(y.shape[0])])


def _residuals(loss, y, raw):
    r = np.empty_like(raw)
    h = np.empty_like(raw)
    loss.residuals(y, raw, r, h)
    return r, h


def test_registry():
    assert LOSSES == {"logistic": LogisticLoss, "squared_error": SquaredLoss}


@pytest.mark.parametrize("loss", [LogisticLoss, SquaredLoss])
def test_loss_matches_reference(loss):
    y, raw = _data(loss)
    ref = REFERENCE[loss.name](y, raw)
    np.testing.assert_allclose(_per_row_loss(loss, y, raw), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(loss.loss(y, raw), ref.mean(), rtol=1e-12)


@pytest.mark.parametrize("loss", [LogisticLoss, SquaredLoss])
def test_residual_is_negative_gradient(loss):
    y, raw = _data(loss, seed=1)
    eps = 1e-6
    fd = (_per_row_loss(loss, y, raw + eps) - _per_row_loss(loss, y, raw - eps)) / (2 * eps)
    r, _ = _residuals(loss, y, raw)
    np.testing.assert_allclose(r, -fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("loss", [LogisticLoss, SquaredLoss])
def test_hessian_is_second_derivative(loss):
    y, raw = _data(loss, seed=2)
    eps = 1e-5
    r_plus, _ = _residuals(loss, y, raw + eps)
    r_minus, _ = _residuals(loss, y, raw - eps)
    _, h = _residuals(loss, y, raw)
    np.testing.assert_allclose(h, -(r_plus - r_minus) / (2 * eps), rtol=1e-6, atol=1e-9)
    # and directly from the loss
    l0, lp, lm = (_per_row_loss(loss, y, raw + d) for d in (0.0, 1e-4, -1e-4))
    np.testing.assert_allclose(h, (lp - 2 * l0 + lm) / 1e-8, rtol=1e-3, atol=1e-5)


def test_closed_forms():
    y = np.array([0.0, 1.0, 1.0, 0.0])
    raw = np.array([-2.0, 0.0, 3.0, 0.5])
    r, h = _residuals(LogisticLoss, y, raw)
    p = expit(raw)
    np.testing.assert_allclose(r, y - p, rtol=1e-14)
    np.testing.assert_allclose(h, p * (1 - p), rtol=1e-14)
    r, h = _residuals(SquaredLoss, y, raw)
    np.testing.assert_array_equal(r, y - raw)
    np.testing.assert_array_equal(h, np.ones(4))
    np.testing.assert_allclose(LogisticLoss.inverse_link(raw), p, rtol=1e-14)
    np.testing.assert_array_equal(SquaredLoss.inverse_link(raw), raw)


@pytest.mark.parametrize("big", [30.0, 1000.0, 1e300])
def test_logistic_stable_for_large_raw(big):
    y = np.array([1.0, 0.0, 1.0, 0.0])
    raw = np.array([big, big, -big, -big])
    per_row = _per_row_loss(LogisticLoss, y, raw)
    assert np.all(np.isfinite(per_row))
    np.testing.assert_allclose(per_row, naive.logistic_loss_per_row(y, raw), rtol=1e-12, atol=1e-300)
    assert per_row[0] < 1e-12 and per_row[3] < 1e-12  # confident and right: ~0
    np.testing.assert_allclose(per_row[[1, 2]], big, rtol=1e-12)  # confident and wrong: ~|raw|
    r, h = _residuals(LogisticLoss, y, raw)
    assert np.all(np.isfinite(r)) and np.all(np.isfinite(h))
    np.testing.assert_allclose(r, [0.0, -1.0, 1.0, 0.0], atol=1e-12)
    assert np.all(h >= 0) and np.all(h < 1e-12)
    assert np.isfinite(LogisticLoss.loss(y, raw))


@pytest.mark.parametrize("loss", [LogisticLoss, SquaredLoss])
@pytest.mark.parametrize("seed", [0, 1])
def test_init_score_minimises_the_loss(loss, seed):
    y, _ = _data(loss, n=50, seed=seed)
    c = loss.init_score(y)
    assert isinstance(c, float)
    raw = np.full_like(y, c)
    eps = 1e-6
    d = (loss.loss(y, raw + eps) - loss.loss(y, raw - eps)) / (2 * eps)
    assert abs(d) < 1e-7
    for delta in (-0.1, 0.1):
        assert loss.loss(y, raw + delta) > loss.loss(y, raw)


def test_init_score_values():
    y = np.array([0.0, 1.0, 1.0, 1.0])
    assert LogisticLoss.init_score(y) == pytest.approx(np.log(3.0))
    assert SquaredLoss.init_score(np.array([1.0, 2.0, 6.0])) == pytest.approx(3.0)
    # one-class labels: finite (clipped) log-odds of the right sign
    assert np.isfinite(LogisticLoss.init_score(np.zeros(5))) and LogisticLoss.init_score(np.zeros(5)) < -20
    assert np.isfinite(LogisticLoss.init_score(np.ones(5))) and LogisticLoss.init_score(np.ones(5)) > 20


def test_logistic_many_rows_same_bits_as_one_thread():
    """From ``PARALLEL_ROWS`` rows the residuals and the mean loss are computed on every thread:
    each row's values and the loss's row-by-row sum are the single-thread kernels', bit for bit."""
    from gbfs.booster.losses import loss as L

    n = L.PARALLEL_ROWS + 1001
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, n).astype(np.float64)
    raw = rng.normal(size=n) * 5
    raw[:6] = [0.0, -0.0, 750.0, -750.0, 1e-300, -36.7]
    r, h = _residuals(LogisticLoss, y, raw)
    r1, h1 = np.empty(n), np.empty(n)
    L._logistic_residuals(y, raw, r1, h1)
    assert r.tobytes() == r1.tobytes() and h.tobytes() == h1.tobytes()
    assert LogisticLoss.loss(y, raw) == L._logistic_loss(y, raw)
    # the serial kernel against the naive per-row loss (a mean within rounding of the sum)
    assert LogisticLoss.loss(y, raw) == pytest.approx(np.mean(naive.logistic_loss_per_row(y, raw)), rel=1e-12)
