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
``init_score``        finite float, the raw score before the first tree; a classifier of
                      ``K > 2`` classes: a list of ``K`` such floats, one per class, and its
                      ``trees`` are round-major (tree ``i`` is class ``i % K``'s)
``best_iteration``    ``null`` or an int in [0, number of trees)
``bin_edges``         one list of edges per feature (``x <= edge[t]`` is bin ``<= t``)
``categorical``       only with categorical features (:mod:`gbfs.booster.kernels.categorical`):
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
or holds anything ``fit`` + ``save_model`` would not have produced -- a key they do not
write, parameters ``fit`` refuses (checked by the estimator's own validation), classes
that are not at least two sorted labels of one kind or that their dtype does not hold
exactly, unsorted or non-finite bin edges, no tree, a non-finite init score or leaf
value, an inconsistent tree -- is refused with a ``ValueError`` naming the file and the
field.

A file is written to a fresh temporary name in the target's directory (mode from
the umask, as for any new file) and renamed over the target, so readers and
concurrent writers never see a partial file and a failed save leaves nothing behind.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

import numpy as np
from sklearn.base import is_classifier

from .. import validation as V
from ..booster.binning import BinMapper
from ..booster.tree import Tree
from ..io.categorical_io import (
    cat_left_from_json,
    categorical_json,
    check_categorical_trees,
    restore_categorical,
)
from ..io.envelope import from_dict, save, seal
from ..io.envelope import load_model as load_model
from . import multiclass
from ._params import check_params

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
    scores = np.atleast_1d(est.init_score_)
    for k, score in enumerate(scores):
        check_finite(float(score), [] if k else est._trees)
    init = [_enc(float(v)) for v in scores] if np.ndim(est.init_score_) else _enc(float(est.init_score_))
    body = {**common_body(est), "init_score": init,
            "best_iteration": est.best_iteration_, "trees": trees_json(est._trees)}
    if getattr(est, "_selection", None) is not None:  # a refit: the selection it was restricted to
        body["selected_features"] = est._selection.tolist()
    return body


def model_to_dict(est) -> dict:
    """The whole file content (envelope, body, checksum) of a fitted estimator."""
    return seal(type(est).__name__, est._model_body())


def save_model(est, path: str | os.PathLike) -> None:
    """Write ``est`` to ``path`` atomically (:func:`gbfs.io.envelope.save`).

    Raises
    ------
    IsADirectoryError
        If ``path`` is a directory.
    ValueError
        If the model holds a non-finite leaf value or init score.
    """
    save(est, path)


def model_from_dict(body, source="model") -> object:
    """The fitted estimator of a parsed model file (:func:`gbfs.io.envelope.from_dict`)."""
    return from_dict(body, source)


#: the keys of :func:`common_body` (``categorical`` and ``classes`` are optional) and the envelope's
COMMON_KEYS = frozenset({"format", "format_version", "estimator", "params", "n_features_in",
                         "feature_names_in", "bin_edges", "categorical", "classes"})
#: the keys of :func:`gbfs_body` (``selected_features`` is optional)
GBFS_KEYS = COMMON_KEYS | {"init_score", "best_iteration", "trees", "selected_features"}


def check_keys(body: dict, allowed: frozenset) -> None:
    """A file holds only keys ``save_model`` writes: anything else was added by hand."""
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}: this model file holds only {sorted(allowed)}")


def restore_common(est, body) -> tuple[int, BinMapper]:
    """Set parameters, inputs and classes from ``body``; returns ``n_features`` and the bin mapper."""
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
    edges = [_edges_from_json(e, f, est.max_bins) for f, e in enumerate(body["bin_edges"])]
    if len(edges) != d:
        raise ValueError("bin_edges must have one list per feature")
    bm = BinMapper(max_bins=est.max_bins)
    width = max(1, max((len(e) for e in edges), default=1))
    bm.bin_edges_ = np.zeros((d, width))
    bm.n_edges_ = np.array([len(e) for e in edges], dtype=np.int32)
    for f, e in enumerate(edges):
        bm.bin_edges_[f, :len(e)] = e
    restore_categorical(est, bm, body.get("categorical"), d)
    for f in est.categorical_features_:  # a categorical feature's bins are its codes, not edges
        if edges[f].size:
            raise ValueError(f"bin_edges[{f}] must be empty: feature {f} is categorical")
    bm.n_bins_non_missing_ = bm.n_edges_ + 1
    return d, bm


def _edges_from_json(values, f: int, max_bins: int) -> np.ndarray:
    """Feature ``f``'s bin edges as fit finds them: finite, sorted, at most ``max_bins - 1``
    (midpoints of consecutive values may round to one float, so equal edges are kept)."""
    e = _dec_float_list(values, f"bin_edges[{f}]")
    if not np.all(np.isfinite(e)):
        raise ValueError(f"bin_edges[{f}] holds a non-finite edge")
    if np.any(e[1:] < e[:-1]):
        raise ValueError(f"bin_edges[{f}] must be sorted in increasing order")
    if e.size > max_bins - 1:
        raise ValueError(f"bin_edges[{f}] holds {e.size} edges, more than max_bins - 1 = {max_bins - 1}")
    return e


def trees_from_json(values, d: int, what: str = "trees") -> list:
    if not isinstance(values, list):
        raise ValueError(f"{what} must be a list")
    if not values:  # n_estimators >= 1, and early stopping keeps the trees up to the best one
        raise ValueError(f"{what} must hold at least one tree: a fit grows at least one")
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


class Restored(NamedTuple):
    """A single-task model file's ensemble, for the estimator to install."""

    bin_mapper: BinMapper
    trees: list
    init_score: object  # float, or one per class
    best_iteration: int | None
    selection: np.ndarray | None


def restore_gbfs(est, body) -> Restored:
    """Restore a single-task estimator's parameters and inputs from the keys of :func:`gbfs_body`;
    returns the ensemble it installs."""
    check_keys(body, GBFS_KEYS)
    d, bm = restore_common(est, body)
    trees = trees_from_json(body["trees"], d)
    check_categorical_trees(trees, bm)
    if multiclass.is_multiclass(est):  # best_iteration counts rounds of one tree per class
        K = est.classes_.shape[0]
        init_score = multiclass.init_score_from_json(body["init_score"], K, len(trees), init_score_from_json)
        best = best_iteration_from_json(body["best_iteration"], len(trees) // K)
    else:
        best = best_iteration_from_json(body["best_iteration"], len(trees))
        init_score = init_score_from_json(body["init_score"])
    selection = _selection_from_json(body.get("selected_features"), d, trees)
    return Restored(bm, trees, init_score, best, selection)


#: parameters whose default changed, with what a gbfs that did not know them did: a file written
#: before them lacks the key and was fitted that way (every distinct value its own bin)
OLDER_BEHAVIOUR = {"min_data_in_bin": 1}


def _restore_params(est, params, n_features) -> None:
    """Set the file's parameters, validated by the estimator's own validation: a file can hold no
    setting that ``fit`` would refuse.  Keys the file lacks (an older gbfs) keep their defaults,
    except those of :data:`OLDER_BEHAVIOUR`, which get what that gbfs did."""
    if not isinstance(params, dict):
        raise ValueError("params must be an object")
    try:
        est.set_params(**{k: v for k, v in OLDER_BEHAVIOUR.items() if k not in params}, **params)
        check_params(est, warn=False)
        V.check_feature_vector("feature_costs", est.feature_costs, n_features, "cost")
        V.check_feature_vector("feature_bags", est.feature_bags, n_features, "bag")
    except (TypeError, ValueError) as e:
        raise ValueError(f"params: {e}") from e


def _classes_from_json(obj) -> np.ndarray:
    """The classes, exactly as saved and validated as ``fit`` validates ``y``: one kind of label,
    sorted, distinct."""
    values = V.labels_from_json(obj, "classes")
    if values.shape[0] < 2:
        raise ValueError(f"classes must hold at least two labels, got {obj['values']!r}")
    classes = V.class_labels(values, "classes")
    if not np.array_equal(classes, values):
        raise ValueError(f"classes must be distinct labels in sorted order, got {obj['values']!r}")
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
    cat_left = cat_left_from_json(obj.get("cat_left", []), arrays, f"{what}[{k}]")
    categorical = np.zeros(n, dtype=bool)
    categorical[list(cat_left)] = True
    if np.any(internal & ~categorical & np.isnan(arrays["threshold"])):
        raise ValueError(f"{what}[{k}].threshold holds NaN thresholds")
    return Tree(**arrays, cat_left=cat_left)
