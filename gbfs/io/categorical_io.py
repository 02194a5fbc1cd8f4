"""The model file's categorical keys (:mod:`gbfs.estimators.model_io`): the categorical features with their
bins' codes and categories, and each tree's category sets, written and checked on load."""

from __future__ import annotations

import numpy as np

from .. import validation as V
from ..booster.binning import BinMapper


def categorical_json(est) -> dict:
    """The ``categorical`` key: the categorical features, their bins' codes, their categories."""
    bm = est._bin_mapper
    out = categories_json(est)
    out["codes"] = [bm.category_codes_[f].tolist() for f in out["features"]]
    return out


def categories_json(est) -> dict:
    """``features`` (``categorical_features_``) and ``categories`` (``categories_``) as JSON."""
    features = [int(f) for f in est.categorical_features_]
    categories = []
    for f, cats in zip(features, est.categories_):
        if cats is None:
            categories.append(None)
            continue
        values = np.asarray(cats).tolist()
        if not all(isinstance(v, (str, int)) or (isinstance(v, float) and np.isfinite(v))
                   for v in values) or any(isinstance(v, bool) for v in values):
            raise ValueError(f"cannot save the categories of feature {f} ({np.asarray(cats).dtype}) as "
                             "JSON: use string or integer categories")
        categories.append({"dtype": np.asarray(cats).dtype.str, "values": values})
    return {"features": features, "categories": categories}


def categories_from_json(obj, d: int) -> tuple[np.ndarray, list]:
    """``categorical_features_`` and ``categories_`` from :func:`categories_json`'s keys."""
    if not isinstance(obj, dict) or not all(isinstance(obj.get(k), list) for k in ("features", "categories")):
        raise ValueError("categorical must be an object with lists 'features' and 'categories'")
    features, cats = obj["features"], obj["categories"]
    if len(features) != len(cats) or len(set(features)) != len(features) or not all(
            V._is_int(f) and 0 <= f < d for f in features):
        raise ValueError(f"categorical: 'features' must be distinct indices in [0, {d}), one entry of "
                         "'categories' each")
    out = []
    for f, cat in zip(features, cats):
        if cat is not None:
            if not isinstance(cat, dict) or not isinstance(cat.get("values"), list):
                raise ValueError(f"categorical: categories of feature {f} must be null or "
                                 "{'dtype', 'values'}")
            # exactly as saved: a dtype that alters a value would map the column's values elsewhere
            cat = V.labels_from_json(cat, f"categorical: categories of feature {f}")
        out.append(cat)
    return np.asarray(features, dtype=np.int64), out


def restore_categorical(est, bm: BinMapper, obj, d: int) -> None:
    """The ``categorical`` key into the bin mapper and ``categorical_features_``/``categories_``."""
    bm.categorical_ = np.zeros(d, dtype=bool)
    bm.category_codes_ = [np.zeros(0, dtype=np.int64) for _ in range(d)]
    est.categorical_features_, est.categories_ = np.zeros(0, dtype=np.int64), []
    if obj is None:
        return
    features, cats = categories_from_json(obj, d)
    codes = obj.get("codes")
    if not isinstance(codes, list) or len(codes) != len(features):
        raise ValueError("categorical: 'codes' must hold one list per categorical feature")
    for f, c, cat in zip(features, codes, cats):
        if not isinstance(c, list) or not 0 < len(c) <= est.max_bins or not all(
                V._is_int(v) and v >= 0 for v in c) or len(set(c)) != len(c):
            raise ValueError(f"categorical: codes of feature {f} must be 1 to max_bins distinct "
                             "non-negative integers")
        if cat is not None and max(c) >= cat.shape[0]:
            raise ValueError(f"categorical: feature {f} has a code without a category")
        bm.categorical_[f] = True
        bm.category_codes_[f] = np.asarray(c, dtype=np.int64)
        bm.n_edges_[f] = len(c) - 1
    est.categorical_features_, est.categories_ = features, cats


def check_categorical_trees(trees, bm: BinMapper, what: str = "trees") -> None:
    """Categorical splits exactly on the categorical features, with bins each feature has."""
    for k, t in enumerate(trees):
        for node in np.flatnonzero(t.feature >= 0):
            f = int(t.feature[node])
            if bool(bm.categorical_[f]) != (int(node) in t.cat_left):
                raise ValueError(f"{what}[{k}]: node {node} splits feature {f} "
                                 f"{'by a threshold' if bm.categorical_[f] else 'by categories'}, "
                                 "but it is " + ("categorical" if bm.categorical_[f] else "numeric"))
            if node in t.cat_left and t.cat_left[node].max() >= bm.category_codes_[f].shape[0]:
                raise ValueError(f"{what}[{k}]: node {node} sends a bin feature {f} does not have left")


def cat_left_from_json(pairs, arrays: dict, what: str) -> dict:
    """A tree's ``cat_left`` pairs: internal nodes, each with distinct bins in [0, 255)."""
    out = {}
    n = len(arrays["feature"])
    if not isinstance(pairs, list):
        raise ValueError(f"{what}.cat_left must be a list of [node, bins] pairs")
    for pair in pairs:
        ok = isinstance(pair, list) and len(pair) == 2 and V._is_int(pair[0]) and 0 <= pair[0] < n \
            and isinstance(pair[1], list) and pair[1] and all(V._is_int(b) and 0 <= b < 255 for b in pair[1])
        if not ok or arrays["feature"][pair[0]] < 0 or pair[0] in out:
            raise ValueError(f"{what}.cat_left must hold [internal node, [bins in 0..254]] pairs, "
                             f"one per node; got {pair!r}")
        out[int(pair[0])] = np.asarray(sorted(set(pair[1])), dtype=np.int32)
    return out
