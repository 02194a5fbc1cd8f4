"""Claims decided over paired seeds: two standard errors either way, within noise between."""

from __future__ import annotations

import math

import pytest

from runners.paper.claims import FAILS, HOLDS, NOISE, paired, tally


@pytest.mark.parametrize("a,b,allowance,word", [
    ({0: 3.0, 1: 4.0, 2: 5.0}, {0: 1.0, 1: 1.0, 2: 1.0}, 0.0, HOLDS),        # d = 2, 3, 4: 3 / 0.58 se
    ({0: 1.0, 1: 3.0, 2: 2.0}, {0: 2.0, 1: 1.0, 2: 2.5}, 0.0, NOISE),  # m 0.17, se 0.93
    ({0: 1.0, 1: 1.0, 2: 1.2}, {0: 2.0, 1: 2.1, 2: 2.0}, 0.0, FAILS),        # m -0.97, se 0.09
    ({0: 1.0, 1: 1.0, 2: 1.2}, {0: 2.0, 1: 2.1, 2: 2.0}, 1.5, HOLDS),        # "loses at most 1.5"
    ({0: 1.0, 1: 1.0, 2: 1.2}, {0: 2.0, 1: 2.1, 2: 2.0}, 0.97, NOISE),
    ({0: 5.0}, {0: 1.0}, 0.0, NOISE),                                       # one seed: no standard error
    ({0: 2.0, 1: 2.0}, {0: 2.0, 1: 2.0}, 0.0, NOISE),                       # identical: se 0, m 0
    ({0: 2.0, 1: 3.0}, {0: 1.0, 1: 2.0}, 0.0, HOLDS),                       # se 0, m 1
])
def test_paired_verdicts(a, b, allowance, word):
    assert paired(a, b, allowance).word == word


def test_only_common_seeds_are_paired_and_nan_is_left_out():
    v = paired({0: 2.0, 1: 5.0, 2: math.nan, 3: 9.0}, {0: 1.0, 1: 1.0, 2: 0.0, 7: 0.0})
    assert v.n == 2 and v.diff == pytest.approx(2.5) and v.se == pytest.approx(1.5)
    assert v.word == NOISE and v.note() == "+2.50, +1.7 se over 2 paired seeds"
    assert paired({}, {0: 1.0}).n == 0 and paired({}, {0: 1.0}).word == NOISE
    assert paired({0: 5.0}, {0: 1.0}).note(unit=" pt") == "+4.00 pt, one seed"


def test_tally_counts_the_bold_words():
    lines = ["- a: **holds**.", "- b: **within noise**.", "- c: **does not hold**.", "- d: **holds**."]
    assert tally(lines) == "2 hold, 1 within noise, 1 does not hold"
    assert tally(lines[:2]) == "1 hold, 1 within noise, 0 do not hold"
