"""Model files: versioned JSON, never pickle.

Format ``gbfs-model`` version 1 -- one JSON object:

``format``            ``"gbfs-model"``
``format_version``    ``1``
``estimator``         ``"GBFSClassifier"`` or ``"GBFSRegressor"``
``params``            the estimator's ``get_params()`` (arrays as lists; a non-integer
                      ``random_state`` is stored as ``null``)
``n_features_in``     int; ``feature_names_in``: list of str or ``null``
``classes``           classifier only: ``{"dtype": numpy dtype str, "values": [...]}``
``selected_features`` optional (a refitted or GBDT-topK model): the selection the trees were
                      restricted to, in order of selection
``init_score``        float, the raw score before the first tree
``best_iteration``    int or ``null``
``bin_edges``         one list of edges per feature (``x <= edge[t]`` is bin ``<= t``)
``trees``             list of objects with equal-length arrays ``feature`` (-1: leaf),
                      ``threshold`` (``x <= threshold`` goes left), ``bin_threshold``,
                      ``missing_left`` (NaN goes left), ``left``/``right`` (child ids,
                      -1 for leaves, always greater than the node's id), ``value``
                      (shrunk leaf value), ``gain``, ``count``
``checksum``          ``"sha256:<hex>"`` of the canonical JSON of every other key
                      (``json.dumps(body, sort_keys=True, separators=(",", ":"))``)

Non-finite floats are written as the strings ``"Infinity"``, ``"-Infinity"``,
``"NaN"`` so the file is strict JSON.  Finite floats use Python's shortest
round-tripping repr, so predictions of a loaded model equal the saved model's
exactly.  A file that is not valid JSON, has another format or version, fails
the checksum, or describes an inconsistent tree is refused with a ``ValueError``.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np

from .binning import BinMapper
from .tree import Tree

FORMAT = "gbfs-model"
FORMAT_VERSION = 1
_NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _enc(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def _enc_list(arr) -> list:
    return [_enc(v) for v in np.asarray(arr).tolist()]


def _dec_float_list(values, what) -> np.ndarray:
    if not isinstance(values, list):
        raise ValueError(f"model file: {what} must be a list")
    out = []
    for v in values:
        if isinstance(v, str) and v in _NONFINITE:
            out.append(_NONFINITE[v])
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(float(v))
        else:
            raise ValueError(f"model file: {what} holds a non-number {v!r}")
    return np.asarray(out, dtype=np.float64)


def _canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _params_json(est) -> dict:
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


def model_to_dict(est) -> dict:
    """The JSON body (with checksum) of a fitted estimator."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(est, "_trees")
    bm = est._bin_mapper
    body = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": type(est).__name__,
        "params": _params_json(est),
        "n_features_in": int(est.n_features_in_),
        "feature_names_in": ([str(c) for c in est.feature_names_in_]
                             if hasattr(est, "feature_names_in_") else None),
        "init_score": _enc(float(est.init_score_)),
        "best_iteration": est.best_iteration_,
        "bin_edges": [_enc_list(bm.bin_edges_[f, :bm.n_edges_[f]]) for f in range(bm.n_edges_.shape[0])],
        "trees": [{name: _enc_list(getattr(t, name)) for name in Tree.FIELDS} for t in est._trees],
    }
    if hasattr(est, "classes_"):
        body["classes"] = {"dtype": est.classes_.dtype.str, "values": est.classes_.tolist()}
    if getattr(est, "_selection", None) is not None:  # a refit: the selection it was restricted to
        body["selected_features"] = est._selection.tolist()
    body["checksum"] = "sha256:" + hashlib.sha256(_canonical(body)).hexdigest()
    return body


def save_model(est, path) -> None:
    """Write ``est`` to ``path`` (atomically: temporary file, then rename)."""
    body = model_to_dict(est)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(body, allow_nan=False, indent=None))
    tmp.replace(path)


def load_model(path):
    """Read a model written by ``save_model``; returns a fitted estimator.

    Raises
    ------
    ValueError
        If the file is not a valid, untampered gbfs model file of a known version.
    """
    text = Path(path).read_text()
    try:
        body = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a gbfs model file (invalid JSON: {e})") from e
    return model_from_dict(body, source=str(path))


def model_from_dict(body, source="model") -> object:
    from .estimators import GBFSClassifier, GBFSRegressor

    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise ValueError(f"{source}: not a gbfs model file (missing 'format': '{FORMAT}')")
    if body.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{source}: unsupported format_version {body.get('format_version')!r} "
                         f"(this gbfs reads version {FORMAT_VERSION})")
    checksum = body.get("checksum")
    rest = {k: v for k, v in body.items() if k != "checksum"}
    try:
        expected = "sha256:" + hashlib.sha256(_canonical(rest)).hexdigest()
    except ValueError as e:
        raise ValueError(f"{source}: model file holds non-JSON values: {e}") from e
    if checksum != expected:
        raise ValueError(f"{source}: checksum mismatch: the model file was modified or corrupted")
    classes = {"GBFSClassifier": GBFSClassifier, "GBFSRegressor": GBFSRegressor}
    if body.get("estimator") not in classes:
        raise ValueError(f"{source}: unknown estimator {body.get('estimator')!r}")
    est = classes[body["estimator"]]()
    try:
        _restore(est, body)
    except (KeyError, TypeError, IndexError) as e:
        raise ValueError(f"{source}: malformed model file ({type(e).__name__}: {e})") from e
    return est


def _restore(est, body) -> None:
    est.set_params(**body["params"])
    d = body["n_features_in"]
    if not isinstance(d, int) or d < 1:
        raise ValueError("model file: n_features_in must be a positive int")
    est.n_features_in_ = d
    if body["feature_names_in"] is not None:
        names = body["feature_names_in"]
        if len(names) != d:
            raise ValueError("model file: feature_names_in has the wrong length")
        est.feature_names_in_ = np.asarray(names, dtype=object)
    if "classes" in body:
        est.classes_ = np.asarray(body["classes"]["values"], dtype=np.dtype(body["classes"]["dtype"]))
        if est.classes_.shape != (2,):
            raise ValueError("model file: a classifier needs exactly two classes")
    edges = [_dec_float_list(e, f"bin_edges[{f}]") for f, e in enumerate(body["bin_edges"])]
    if len(edges) != d:
        raise ValueError("model file: bin_edges must have one list per feature")
    bm = BinMapper(max_bins=est.max_bins)
    width = max(1, max((len(e) for e in edges), default=1))
    bm.bin_edges_ = np.zeros((d, width))
    bm.n_edges_ = np.array([len(e) for e in edges], dtype=np.int32)
    for f, e in enumerate(edges):
        bm.bin_edges_[f, :len(e)] = e
    bm.n_bins_non_missing_ = bm.n_edges_ + 1
    est._bin_mapper = bm
    trees = [_tree_from_json(t, d, k) for k, t in enumerate(body["trees"])]
    best = body["best_iteration"]
    est._set_fitted(trees, float(_dec_float_list([body["init_score"]], "init_score")[0]), [], None,
                    _selection_from_json(body.get("selected_features"), d, trees))
    est.best_iteration_ = best


def _selection_from_json(values, n_features, trees):
    """The optional ``selected_features`` of a refitted model: distinct feature indices that include
    every feature the trees use."""
    if values is None:
        return None
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                               for v in values):
        raise ValueError("model file: selected_features must be a list of integers")
    sel = np.asarray(values, dtype=np.int64)
    if np.unique(sel).size != sel.size or np.any(sel < 0) or np.any(sel >= n_features):
        raise ValueError(f"model file: selected_features must be distinct indices in [0, {n_features})")
    used = {int(f) for t in trees for f in t.used_features()}
    if not used <= set(sel.tolist()):
        raise ValueError("model file: the trees use features outside selected_features")
    return sel


def _tree_from_json(obj, n_features, k) -> Tree:
    arrays = {}
    for name, dtype in zip(Tree.FIELDS, Tree.DTYPES):
        values = obj[name]
        if dtype == np.float64:
            arrays[name] = _dec_float_list(values, f"trees[{k}].{name}")
        else:
            if not isinstance(values, list) or not all(
                    isinstance(v, (bool if dtype == np.bool_ else int)) for v in values):
                raise ValueError(f"model file: trees[{k}].{name} must be a list of "
                                 f"{'booleans' if dtype == np.bool_ else 'integers'}")
            arrays[name] = np.asarray(values, dtype=dtype)
    n = len(arrays["feature"])
    if n == 0 or any(len(a) != n for a in arrays.values()):
        raise ValueError(f"model file: trees[{k}] arrays must be non-empty and of equal length")
    ids = np.arange(n)
    internal = arrays["feature"] >= 0
    if np.any(arrays["feature"] >= n_features) or np.any(arrays["feature"] < -1):
        raise ValueError(f"model file: trees[{k}] refers to a feature outside [0, {n_features})")
    for side in ("left", "right"):
        child = arrays[side]
        if np.any(internal & ((child <= ids) | (child >= n))) or np.any(~internal & (child != -1)):
            raise ValueError(f"model file: trees[{k}].{side} holds an invalid child id")
    if np.any(np.isnan(arrays["value"])) or np.any(internal & np.isnan(arrays["threshold"])):
        raise ValueError(f"model file: trees[{k}] holds NaN values or thresholds")
    return Tree(**arrays)
