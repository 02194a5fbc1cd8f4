"""A paper's claim about two methods, decided over paired seeds: *holds*, *within noise* or *does not hold*.

Every seed fits both methods on the same split, so the claim is tested on the per-seed differences
``d_s = a_s - b_s + allowance`` (``allowance``: the loss the claim tolerates, e.g. "loses at most
0.5 pt").  With mean ``m`` and standard error ``se = sd(d) / sqrt(n)`` over the ``n`` common seeds
the claim

* **holds** when ``m > 2 se``,
* **does not hold** when ``m < -2 se`` (significantly the other way),
* is **within noise** otherwise -- including any claim resting on one seed, which has no standard
  error.

A claim whose differences are all equal (``se = 0``, e.g. identical models) holds or fails by the
sign of ``m`` and is within noise at ``m = 0``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

HOLDS, NOISE, FAILS = "holds", "within noise", "does not hold"
#: standard errors a mean difference must exceed to decide a claim
Z = 2.0


@dataclass(frozen=True)
class Verdict:
    """The outcome of one claim: its word, the mean paired difference, its standard error, the seeds."""

    word: str
    diff: float
    se: float
    n: int

    @property
    def bold(self) -> str:
        return f"**{self.word}**"

    def note(self, fmt: str = "+.2f", unit: str = "") -> str:
        """``"+0.41 pt, 1.3 se over 5 paired seeds"``: the numbers the word was decided on."""
        diff = f"{self.diff:{fmt}}{unit}"
        if self.n < 2:
            return f"{diff}, one seed"
        if self.se == 0:
            return f"{diff}, the same on all {self.n} paired seeds"
        return f"{diff}, {self.diff / self.se:+.1f} se over {self.n} paired seeds"


def paired(a: Mapping[int, float], b: Mapping[int, float], allowance: float = 0.0) -> Verdict:
    """Decide the claim ``a - b > -allowance`` on the seeds both ``a`` and ``b`` have (seed -> value).

    ``diff`` reports the mean of ``a - b`` (the allowance is not added to it).
    """
    seeds = sorted(set(a) & set(b))
    d = [float(a[s]) - float(b[s]) for s in seeds if not (math.isnan(a[s]) or math.isnan(b[s]))]
    n = len(d)
    if n == 0:
        return Verdict(NOISE, math.nan, math.nan, 0)
    m = sum(d) / n
    if n < 2:
        return Verdict(NOISE, m, math.nan, 1)
    se = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1) / n)
    shifted = m + allowance
    if shifted > Z * se:
        word = HOLDS
    elif shifted < -Z * se:
        word = FAILS
    else:
        word = NOISE
    return Verdict(word, m, se, n)


def tally(lines: list[str]) -> str:
    """``"2 hold, 1 within noise, 1 does not hold"`` over bullets that carry a bold verdict word."""
    counts = {w: sum(f"**{w}**" in line for line in lines) for w in (HOLDS, NOISE, FAILS)}
    return (f"{counts[HOLDS]} hold, {counts[NOISE]} within noise, {counts[FAILS]} "
            f"{'do' if counts[FAILS] != 1 else 'does'} not hold")
