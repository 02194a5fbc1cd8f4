"""Fixtures of the estimator tests that fit a test module's own small data (its ``X`` and ``Y``)."""

from __future__ import annotations

import pytest
from estimator_cases import FAST

from gbfs import GBFSClassifier


@pytest.fixture(scope="module")
def clf(request):
    """``GBFSClassifier(**FAST)`` fitted on the requesting test module's ``X, Y``."""
    return GBFSClassifier(**FAST).fit(request.module.X, request.module.Y)
