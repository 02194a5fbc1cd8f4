"""Fixed-order reductions (gbfs.booster.kernels.portable) against naive references, and the rule they serve:
no
kernel of the library is compiled with fast-math flags (reassociation rounds by host CPU)."""

from __future__ import annotations

import importlib
import math
import pkgutil

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

import gbfs
from gbfs.booster.kernels import portable as red


def lanes_sum(a) -> float:
    """The definition, in Python: element i into partial sum i % 8 (the tail into lanes 0..),
    the eight added pairwise."""
    acc = [0.0] * 8
    full = len(a) - len(a) % 8
    for i in range(full):
        acc[i % 8] += float(a[i])
    for i in range(full, len(a)):
        acc[i - full] += float(a[i])
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 64, 1001])
def test_sum_and_dot_follow_their_definition_bit_for_bit(n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    b = rng.standard_normal(n)
    assert red.total(a) == lanes_sum(a)
    assert red.dot(a, b) == lanes_sum([x * y for x, y in zip(a, b)])
    assert red.total(a) == pytest.approx(math.fsum(a), rel=1e-9, abs=1e-9)


def test_mean_and_matvec():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((13, 21))
    x = rng.standard_normal(21)
    assert np.array_equal(red.matvec(A, x), [red.dot(row, x) for row in A])
    np.testing.assert_allclose(red.matvec(A, x), A @ x, rtol=1e-12)
    assert red.mean(A) == lanes_sum(A.ravel()) / A.size
    assert red.std(x, ddof=1) == pytest.approx(np.std(x, ddof=1), rel=1e-12)
    assert math.isnan(red.mean(np.empty(0)))


def test_binary_log_loss_matches_the_formula():
    y = np.array([0.0, 1.0, 1.0, 0.0])
    p = np.array([0.2, 0.9, 0.0, 1.0])  # the last two are clipped to [1e-15, 1 - 1e-15]
    q = np.clip(p, 1e-15, 1 - 1e-15)
    expected = -np.mean(y * np.log(q) + (1 - y) * np.log1p(-q))
    assert red.binary_log_loss(y, p) == pytest.approx(expected, rel=1e-12)


def test_no_kernel_is_compiled_with_fast_math():
    offenders = []
    for info in pkgutil.walk_packages(gbfs.__path__, "gbfs."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.targetoptions.get("fastmath"):
                offenders.append(f"{info.name}.{name}")
    assert not offenders, f"kernels with fast-math flags (host-dependent rounding): {offenders}"
