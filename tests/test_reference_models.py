"""The booster's structure may change; its models may not: a fixed grid of fits (methods x samplers x
group-test scopes x budgets x losses) must give byte-identical model files (see reference_models.py)."""

from __future__ import annotations

import json

import pytest
import reference_models as R


@pytest.fixture(scope="module")
def digests():
    return R.compute()


def test_models_are_byte_identical_to_the_reference(digests):
    expected = json.loads(R.PATH.read_text())
    assert sorted(digests) == sorted(expected)
    changed = [name for name in expected if digests[name] != expected[name]]
    assert not changed, f"{len(changed)} of {len(expected)} models changed, e.g. {changed[:3]}"


def test_the_grid_discriminates(digests):
    # the reference is only worth as much as the grid's variety: most settings give their own model
    assert len(set(digests.values())) >= 0.8 * len(digests)
