"""The Koepke-Bilenko paper's reproduction: the ablation, the heuristics against their definitions,
and the part's files."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.feature_selection import mutual_info_classif

from runners.paper.utility_kb import experiments as E
from runners.paper.utility_kb import report as R

CFG = {"datasets": ["diabetes"], "folds": 3, "seed": 0, "n_bootstrap": 20, "bins": 10,
       "booster": {"n_estimators": 20, "learning_rate": 0.2, "max_depth": 2, "min_samples_leaf": 20}}


def test_info_gain_ratio_is_mutual_information_over_the_bins_entropy():
    rng = np.random.default_rng(0)
    x = rng.random(2000)
    y = (x > 0.5).astype(int) ^ (rng.random(2000) < 0.1)
    # two bins at the median: entropy log 2; the label is the bin, flipped 10 % of the time
    expected = (math.log(2) + 0.1 * math.log(0.1) + 0.9 * math.log(0.9)) / math.log(2)
    assert E.info_gain_ratio(x, y, bins=2) == pytest.approx(expected, abs=0.02)
    b = (x > np.median(x)).astype(int)
    mi = mutual_info_classif(b.reshape(-1, 1), y, discrete_features=True)[0]
    assert E.info_gain_ratio(x, y, bins=2) == pytest.approx(mi / math.log(2), rel=1e-6)
    assert E.info_gain_ratio(np.ones(50), np.arange(50) % 2, bins=4) == 0.0   # a constant column


def test_cfs_drop_prices_a_duplicate_and_rewards_a_relevant_feature():
    rng = np.random.default_rng(1)
    a, noise = rng.standard_normal((2, 500))
    y = a + 0.5 * rng.standard_normal(500)
    X = np.column_stack([a, a + 1e-6 * rng.standard_normal(500), noise])
    drop = E.cfs_drop(X, y)
    assert drop[2] < 0                          # removing pure noise raises the merit
    # a relevant feature with its copy present: removing one costs little next to the merit
    only = E.cfs_drop(X[:, [0, 2]], y)
    assert only[0] > drop[0] > 0


@pytest.mark.slow  # two seeded ablations over folds, ~8 s
def test_ablation_rows_and_per_feature_summary():
    folds = E.ablation("diabetes", CFG)
    assert len(folds) == 3 * 10 and set(folds.fold) == {0, 1, 2}
    assert folds.p_value.between(1 / 21, 1).all()
    feats = E.per_feature(folds)
    assert len(feats) == 10
    bmi = feats.set_index("feature").loc[2]          # diabetes' bmi: the strongest single feature
    assert bmi.actual > 0 and bmi.predicted_z > 3
    z0 = folds[folds.feature == 0].z
    assert feats.set_index("feature").loc[0].predicted_z == pytest.approx(z0.sum() / math.sqrt(3))
    again = E.ablation("diabetes", CFG)
    pd.testing.assert_frame_equal(folds, again)      # seeded


@pytest.mark.slow  # the whole part on its quick settings, ~6 s
def test_the_part_writes_its_figures_and_claims(tmp_path):
    frames, meta = E.compute({**CFG, "datasets": ["diabetes"]})
    frames["heuristics"] = E.heuristics("breast_cancer", 10).head(0)   # no classification set here
    meta = {**meta, "settings": CFG, "seconds": 1.0, "command": "python -m runners.reproduce",
            "commit": "abc", "date": "2026-01-01"}
    paths = R.write(frames, meta, tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert "diabetes: every feature the test calls insignificant" in text and "`abc`" in text
    assert (tmp_path / "figures.png").read_bytes()[:4] == b"\x89PNG" and all(p.is_file() for p in paths)


@pytest.mark.slow  # a few seconds: the default suite stays under 5 minutes
def test_rank_gap_is_decided_by_its_bootstrap_standard_error():
    rng = np.random.default_rng(2)
    actual = rng.standard_normal(40)
    close, far = actual + 0.1 * rng.standard_normal(40), rng.standard_normal(40)
    assert R.rank_gap(close, far, actual).word == "holds"
    assert R.rank_gap(far, close, actual).word == "does not hold"
    v = R.rank_gap(close, close + 1e-9 * rng.standard_normal(40), actual)
    assert v.word == "within noise" and abs(v.diff) < 0.05
    assert R.rank_gap(close, far, actual).diff == R.rank_gap(close, far, actual, seed=5).diff
