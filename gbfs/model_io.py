"""Model files: versioned JSON, never pickle.

Format ``gbfs-model`` version 1 -- one JSON object:

``format``            ``"gbfs-model"``
``format_version``    ``1``
``estimator``         ``"GBFSClassifier"`` or ``"GBFSRegressor"``
``params``            the estimator's ``get_params()`` (arrays as lists; a non-integer
                      ``random_state`` is stored as ``null``; ``n_threads`` is kept for
                      ``get_params`` and refits but never limits prediction, see
                      :func:`load_model`)
``n_features_in``     int; ``feature_names_in``: list of str or ``null``
``classes``           classifier only: ``{"dtype": numpy dtype str, "values": [...]}``
``selected_features`` optional (a refitted or GBDT-topK model): the selection the trees were
                      restricted to, in order of selection
``init_score``        finite float, the raw score before the first tree
``best_iteration``    ``null`` or an int in [0, number of trees)
``bin_edges``         one list of edges per feature (``x <= edge[t]`` is bin ``<= t``)
``categorical``       only with categorical features (:mod:`gbfs.categorical`):
                      ``features`` (column indices), ``codes`` (per feature, the code of each
                      bin) and ``categories`` (per feature ``null`` for integer codes, else
                      ``{"dtype", "values"}``: code ``k`` is ``values[k]``); their
                      ``bin_edges`` are empty
``trees``             list of objects with equal-length arrays ``feature`` (-1: leaf),
                      ``threshold`` (``x <= threshold`` goes left), ``bin_threshold``,
                      ``missing_left`` (NaN goes left), ``left``/``right`` (child ids,
                      -1 for leaves, always greater than the node's id), ``value``
                      (shrunk leaf value, finite), ``gain``, ``count``; with categorical splits
                      also ``cat_left``: ``[node, [bins going left]]`` pairs (such a node's
                      threshold is NaN; missing values and unseen categories go right)
``checksum``          ``"sha256:<hex>"`` of the canonical JSON of every other key
                      (``json.dumps(body, sort_keys=True, separators=(",", ":"))``)

Non-finite floats are written as the strings ``"Infinity"``, ``"-Infinity"``,
``"NaN"`` so the file is strict JSON (only split thresholds and gains may hold
them: a model with a non-finite leaf value or init score is never written).
Finite floats use Python's shortest round-tripping repr, so predictions of a
loaded model equal the saved model's exactly.

A file that is not UTF-8 JSON, has another format or version, fails the checksum,
or holds anything ``fit`` would not have produced -- parameters ``fit`` refuses
(checked by the estimator's own validation), classes that are not two sorted
labels of one kind, a non-finite init score or leaf value, an inconsistent tree --
is refused with a ``ValueError`` naming the file and the field.

A file is written to a fresh temporary name in the target's directory (mode from
the umask, as for any new file) and renamed over the target, so readers and
concurrent writers never see a partial file and a failed save leaves nothing behind.
"""

from __future__ import annotations

import math
import os

import numpy as np
from sklearn.base import is_classifier

from . import validation as V
from ._params import check_params
from .binning import BinMapper
from .envelope import from_dict, save, seal
from .envelope import load_model as load_model
from .tree import Tree

_NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _enc(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def _enc_list(arr) -> list:
    return [_enc(v) for v in np.asarray(arr).tolist()]


def _dec_float_list(values, what) -> np.ndarray:
    if not isinstance(values, list):
        raise ValueError(f"{what} must be a list")
    out = []
    for v in values:
        if isinstance(v, str) and v in _NONFINITE:
            out.append(_NONFINITE[v])
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                out.append(float(v))
            except OverflowError:
                raise ValueError(f"{what} holds a number too large for float64") from None
        else:
            raise ValueError(f"{what} holds a non-number {v!r}")
    return np.asarray(out, dtype=np.float64)


def params_json(est) -> dict:
    """``est.get_params()`` as JSON values: arrays as lists (non-finite floats as strings), a
    random_state object as ``null``."""
    out = {}
    for k, v in est.get_params().items():
        if isinstance(v, np.ndarray):
            v = _enc_list(v)
        elif isinstance(v, (list, tuple)):
            v = _enc_list(np.asarray(v))
        elif k == "random_state" and not (v is None or isinstance(v, int)):
            v = None  # a RandomState/Generator object has no JSON form
        elif isinstance(v, np.generic):
            v = v.item()
        out[k] = _enc(v)
    return out


def common_body(est) -> dict:
    """The keys every binned estimator's file shares: parameters, inputs, bin edges, classes."""
    bm = est._bin_mapper
    body = {
        "params": params_json(est),
        "n_features_in": int(est.n_features_in_),
        "feature_names_in": ([str(c) for c in est.feature_names_in_]
                             if hasattr(est, "feature_names_in_") else None),
        "bin_edges": [[] if bm.has_categorical and bm.categorical_[f] else
                      _enc_list(bm.bin_edges_[f, :bm.n_edges_[f]]) for f in range(bm.n_edges_.shape[0])],
    }
    if bm.has_categorical:
        body["categorical"] = categorical_json(est)
    if hasattr(est, "classes_"):
        body["classes"] = {"dtype": est.classes_.dtype.str, "values": est.classes_.tolist()}
    return body


def check_finite(init_score: float, trees, what: str = "") -> None:
    """A fit never returns a non-finite model (it stops when its scores overflow); one assembled
    or altered by hand is not written, as it could not be loaded back."""
    if not math.isfinite(init_score):
        raise ValueError(f"cannot save a model whose {what}init_score_ is {init_score!r}")
    for k, t in enumerate(trees):
        if not np.all(np.isfinite(t.value)):
            raise ValueError(f"cannot save a model whose {what}tree {k} holds non-finite leaf values")


def categorical_json(est) -> dict:
    """The ``categorical`` key: the categorical features, their bins' codes, their categories."""
    bm, features = est._bin_mapper, [int(f) for f in est.categorical_features_]
    categories = []
    for f, cats in zip(features, est.categories_):
        if cats is None:
            categories.append(None)
            continue
        values = np.asarray(cats).tolist()
        if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values):
            raise ValueError(f"cannot save the categories of feature {f} ({np.asarray(cats).dtype}) as "
                             "JSON: use string or integer categories")
        categories.append({"dtype": np.asarray(cats).dtype.str, "values": [_enc(v) for v in values]})
    return {"features": features, "codes": [bm.category_codes_[f].tolist() for f in features],
            "categories": categories}


def trees_json(trees) -> list:
    out = []
    for t in trees:
        obj = {name: _enc_list(getattr(t, name)) for name in Tree.FIELDS}
        if t.cat_left:
            obj["cat_left"] = [[int(node), t.cat_left[node].tolist()] for node in sorted(t.cat_left)]
        out.append(obj)
    return out


def gbfs_body(est) -> dict:
    """The file keys of a fitted :class:`~gbfs.GBFSClassifier` / ``GBFSRegressor``."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(est, "_trees")
    check_finite(est.init_score_, est._trees)
    body = {**common_body(est), "init_score": _enc(float(est.init_score_)),
            "best_iteration": est.best_iteration_, "trees": trees_json(est._trees)}
    if getattr(est, "_selection", None) is not None:  # a refit: the selection it was restricted to
        body["selected_features"] = est._selection.tolist()
    return body


def model_to_dict(est) -> dict:
    """The whole file content (envelope, body, checksum) of a fitted estimator."""
    return seal(type(est).__name__, est._model_body())


def save_model(est, path: str | os.PathLike) -> None:
    """Write ``est`` to ``path`` atomically (:func:`gbfs.envelope.save`).

    Raises
    ------
    IsADirectoryError
        If ``path`` is a directory.
    ValueError
        If the model holds a non-finite leaf value or init score.
    """
    save(est, path)


def model_from_dict(body, source="model") -> object:
    """The fitted estimator of a parsed model file (:func:`gbfs.envelope.from_dict`)."""
    return from_dict(body, source)


def restore_common(est, body) -> int:
    """Set parameters, inputs, classes and the bin mapper from ``body``; returns ``n_features``."""
    d = body["n_features_in"]
    if not V._is_int(d) or d < 1:
        raise ValueError("n_features_in must be a positive int")
    _restore_params(est, body["params"], d)
    est.n_features_in_ = d
    if body["feature_names_in"] is not None:
        names = body["feature_names_in"]
        if not isinstance(names, list) or len(names) != d or not all(isinstance(c, str) for c in names):
            raise ValueError(f"feature_names_in must be a list of {d} strings")
        est.feature_names_in_ = np.asarray(names, dtype=object)
    if is_classifier(est) != ("classes" in body):
        raise ValueError("classes must be given for a classifier, and only for a classifier")
    if "classes" in body:
        est.classes_ = _classes_from_json(body["classes"])
    edges = [_dec_float_list(e, f"bin_edges[{f}]") for f, e in enumerate(body["bin_edges"])]
    if len(edges) != d:
        raise ValueError("bin_edges must have one list per feature")
    bm = BinMapper(max_bins=est.max_bins)
    width = max(1, max((len(e) for e in edges), default=1))
    bm.bin_edges_ = np.zeros((d, width))
    bm.n_edges_ = np.array([len(e) for e in edges], dtype=np.int32)
    for f, e in enumerate(edges):
        bm.bin_edges_[f, :len(e)] = e
    _restore_categorical(est, bm, body.get("categorical"), d)
    bm.n_bins_non_missing_ = bm.n_edges_ + 1
    est._bin_mapper = bm
    return d


def _restore_categorical(est, bm: BinMapper, obj, d: int) -> None:
    """The ``categorical`` key into the bin mapper and ``categorical_features_``/``categories_``."""
    bm.categorical_ = np.zeros(d, dtype=bool)
    bm.category_codes_ = [np.zeros(0, dtype=np.int64) for _ in range(d)]
    est.categorical_features_, est.categories_ = np.zeros(0, dtype=np.int64), []
    if obj is None:
        return
    if not isinstance(obj, dict) or not all(isinstance(obj.get(k), list) for k in ("features", "codes",
                                                                                  "categories")):
        raise ValueError("categorical must be an object with lists 'features', 'codes', 'categories'")
    features, codes, cats = obj["features"], obj["codes"], obj["categories"]
    if not (len(features) == len(codes) == len(cats)) or not all(
            V._is_int(f) and 0 <= f < d for f in features) or len(set(features)) != len(features):
        raise ValueError(f"categorical: 'features' must be distinct indices in [0, {d}), one entry of "
                         "'codes' and 'categories' each")
    for f, c, cat in zip(features, codes, cats):
        if not isinstance(c, list) or not 0 < len(c) <= est.max_bins or not all(
                V._is_int(v) and v >= 0 for v in c) or len(set(c)) != len(c):
            raise ValueError(f"categorical: codes of feature {f} must be 1 to max_bins distinct "
                             "non-negative integers")
        bm.categorical_[f] = True
        bm.category_codes_[f] = np.asarray(c, dtype=np.int64)
        bm.n_edges_[f] = len(c) - 1
        if cat is not None:
            if not isinstance(cat, dict) or not isinstance(cat.get("values"), list):
                raise ValueError(f"categorical: categories of feature {f} must be null or "
                                 "{'dtype', 'values'}")
            try:
                cat = np.asarray(cat["values"], dtype=np.dtype(cat["dtype"]))
            except (TypeError, ValueError) as e:
                raise ValueError(f"categorical: categories of feature {f}: {e}") from e
            if max(c) >= cat.shape[0]:
                raise ValueError(f"categorical: feature {f} has a code without a category")
        est.categories_.append(cat)
    est.categorical_features_ = np.asarray(features, dtype=np.int64)


def trees_from_json(values, d: int, what: str = "trees") -> list:
    if not isinstance(values, list):
        raise ValueError(f"{what} must be a list")
    return [_tree_from_json(t, d, k, what) for k, t in enumerate(values)]


def init_score_from_json(value, what: str = "init_score") -> float:
    score = float(_dec_float_list([value], what)[0])
    if not math.isfinite(score):
        raise ValueError(f"{what} must be finite, got {score!r}")
    return score


def best_iteration_from_json(best, n_trees: int):
    if best is not None and not (V._is_int(best) and 0 <= best < n_trees):
        raise ValueError(f"best_iteration must be null or an int in [0, {n_trees}), got {best!r}")
    return best


def restore_gbfs(est, body) -> None:
    """Restore a single-task estimator from the keys of :func:`gbfs_body`."""
    d = restore_common(est, body)
    trees = trees_from_json(body["trees"], d)
    check_categorical_trees(trees, est._bin_mapper)
    best = best_iteration_from_json(body["best_iteration"], len(trees))
    init_score = init_score_from_json(body["init_score"])
    selection = _selection_from_json(body.get("selected_features"), d, trees)
    est._set_fitted(trees, init_score, [], None, selection)
    est.best_iteration_ = best
    est._saved_n_threads = est.n_threads  # the file's thread count never limits prediction


def _restore_params(est, params, n_features) -> None:
    """Set the file's parameters, validated by the estimator's own validation: a file can hold no
    setting that ``fit`` would refuse.  Keys the file lacks (an older gbfs) keep their defaults."""
    if not isinstance(params, dict):
        raise ValueError("params must be an object")
    try:
        est.set_params(**params)
        check_params(est, warn=False)
        V.check_feature_vector("feature_costs", est.feature_costs, n_features, "cost")
        V.check_feature_vector("feature_bags", est.feature_bags, n_features, "bag")
    except (TypeError, ValueError) as e:
        raise ValueError(f"params: {e}") from e


def _classes_from_json(obj) -> np.ndarray:
    """The two classes, validated as ``fit`` validates ``y``: one kind of label, sorted, distinct."""
    if not isinstance(obj, dict) or not isinstance(obj.get("values"), list):
        raise ValueError("classes must be an object with a list 'values'")
    try:
        values = np.asarray(obj["values"], dtype=np.dtype(obj["dtype"]))
    except (TypeError, ValueError) as e:
        raise ValueError(f"classes: cannot read {obj['values']!r} as dtype {obj['dtype']!r} ({e})") from e
    if values.shape != (2,):
        raise ValueError(f"classes must hold exactly two labels, got {obj['values']!r}")
    classes = V.binary_classes(values, "classes")
    if not np.array_equal(classes, values):
        raise ValueError(f"classes must be two distinct labels in sorted order, got {obj['values']!r}")
    return values


def _selection_from_json(values, n_features, trees):
    """The optional ``selected_features`` of a refitted model: distinct feature indices that include
    every feature the trees use."""
    if values is None:
        return None
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                               for v in values):
        raise ValueError("selected_features must be a list of integers")
    sel = np.asarray(values, dtype=np.int64)
    if np.unique(sel).size != sel.size or np.any(sel < 0) or np.any(sel >= n_features):
        raise ValueError(f"selected_features must be distinct indices in [0, {n_features})")
    used = {int(f) for t in trees for f in t.used_features()}
    if not used <= set(sel.tolist()):
        raise ValueError("the trees use features outside selected_features")
    return sel


def _tree_from_json(obj, n_features, k, what="trees") -> Tree:
    if not isinstance(obj, dict):
        raise ValueError(f"{what}[{k}] must be an object")
    arrays = {}
    for name, dtype in zip(Tree.FIELDS, Tree.DTYPES):
        values = obj[name]
        if dtype == np.float64:
            arrays[name] = _dec_float_list(values, f"{what}[{k}].{name}")
        else:
            if not isinstance(values, list) or not all(
                    isinstance(v, (bool if dtype == np.bool_ else int)) for v in values):
                raise ValueError(f"{what}[{k}].{name} must be a list of "
                                 f"{'booleans' if dtype == np.bool_ else 'integers'}")
            arrays[name] = np.asarray(values, dtype=dtype)
    n = len(arrays["feature"])
    if n == 0 or any(len(a) != n for a in arrays.values()):
        raise ValueError(f"{what}[{k}] arrays must be non-empty and of equal length")
    ids = np.arange(n)
    internal = arrays["feature"] >= 0
    if np.any(arrays["feature"] >= n_features) or np.any(arrays["feature"] < -1):
        raise ValueError(f"{what}[{k}] refers to a feature outside [0, {n_features})")
    for side in ("left", "right"):
        child = arrays[side]
        if np.any(internal & ((child <= ids) | (child >= n))) or np.any(~internal & (child != -1)):
            raise ValueError(f"{what}[{k}].{side} holds an invalid child id")
    if not np.all(np.isfinite(arrays["value"])):
        raise ValueError(f"{what}[{k}].value holds NaN or infinite leaf values")
    cat_left = _cat_left_from_json(obj.get("cat_left", []), arrays, f"{what}[{k}]")
    categorical = np.zeros(n, dtype=bool)
    categorical[list(cat_left)] = True
    if np.any(internal & ~categorical & np.isnan(arrays["threshold"])):
        raise ValueError(f"{what}[{k}].threshold holds NaN thresholds")
    return Tree(**arrays, cat_left=cat_left)


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


def _cat_left_from_json(pairs, arrays: dict, what: str) -> dict:
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
