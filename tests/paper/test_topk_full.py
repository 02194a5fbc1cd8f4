"""GBDT-topK against GBDT-Full (runners.paper.claims): the README's line, and on a quick-scale
stand-in a real LightGBM GBDT-topK that leaves out some of GBDT-Full's features."""

from __future__ import annotations

import pytest

from gbfs import GBFSClassifier
from gbfs.baselines.lightgbm_baseline import LightGBMBaseline
from gbfs.data import load_dataset
from runners.paper.claims import Overlap, topk_sentence


def test_sentence_says_what_topk_keeps_seed_by_seed():
    found = [Overlap(0, full=50, k=30, kept=28, used=29, shared=27), Overlap(1, full=20, k=30, kept=20,
                                                                             used=25, shared=18)]
    assert [o.differs for o in found] == [True, False]
    line = topk_sentence(found)
    assert line.startswith("- GBDT-topK against GBDT-Full (features each model uses): ")
    assert ("seed 0: GBDT-topK (K=30) keeps 28 of GBDT-Full's 50 features, its refit uses 29, 27 of them "
            "GBDT-Full's") in line
    assert "seed 1: GBDT-topK (K=30) keeps 20 of GBDT-Full's 20 features" in line
    assert "leaves out some of GBDT-Full's features on 1 of 2 seeds; where it keeps them all" in line
    assert "where it keeps them all" not in topk_sentence(found[:1])


# GBDT-Full's and GBDT-topK's settings of conf/method/gbdt_full.yaml and gbdt_topk.yaml
LIGHTGBM = dict(learning_rate=0.1, n_estimators=200, num_leaves=16, max_depth=4, min_child_samples=20,
                early_stopping_rounds=20, n_threads=1)


@pytest.mark.parametrize("name, scale, seed", [
    ("flight_like", 0.02, 0),
    ("flight_like", 0.02, 1),
    pytest.param("gisette_like", 0.1, 0, marks=pytest.mark.slow),
])
def test_quick_standin_topk_leaves_out_features_of_the_full_model(name, scale, seed):
    # a stand-in of the quick reproduction (reproduce.scales.quick): a selector picks fewer features
    # than LightGBM's full model uses, so GBDT-topK at that K cannot keep them all
    ds = load_dataset(name, scale=scale, seed=seed)
    ev = (ds.X_val, ds.y_val)
    selector = GBFSClassifier(method="gbfs", mu=1.1, n_estimators=200, max_depth=4, min_node_fraction=0.02,
                              early_stopping_rounds=20, random_state=seed, n_threads=1)
    k = selector.fit(ds.X_train, ds.y_train, eval_set=ev).n_features_selected_
    full = LightGBMBaseline("full", random_state=seed, **LIGHTGBM).fit(ds.X_train, ds.y_train, eval_set=ev)
    topk = LightGBMBaseline("topk", k=k, random_state=seed, **LIGHTGBM)
    topk.fit(ds.X_train, ds.y_train, eval_set=ev)
    used = set(full.selected_features_.tolist())
    assert len(used) > k
    assert len(used & set(topk.columns_.tolist())) < len(used)
