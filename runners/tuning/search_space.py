"""The search space Optuna tunes: ``method.search_space`` merged with ``sampler.search_space``.

Each entry is ``name -> {type: float | int | categorical, low, high, log, choices}``.
:func:`check_search_space` refuses, naming the key, every entry Optuna would refuse (or, worse,
accept by casting: ``int`` of a bound 2.5, the truth of a string ``log``), so that a bad space fails
before any trial and any MLflow run exist.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import optuna
from omegaconf import DictConfig

from runners.core import experiment

PARAM_TYPES = ("float", "int", "categorical")
#: the keys an entry of each type may have
KEYS = {"float": {"type", "low", "high", "log"}, "int": {"type", "low", "high", "log"},
        "categorical": {"type", "choices"}}
#: the values Optuna stores as categorical choices
CHOICE_TYPES = (type(None), bool, int, float, str)


def _unknown_type(key: str, kind: object) -> ValueError:
    return ValueError(f"{key}: unknown type {kind!r}; expected one of {PARAM_TYPES}")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_range(key: str, kind: str, spec: Mapping) -> None:
    low, high, log = spec.get("low"), spec.get("high"), spec.get("log", False)
    for bound, value in (("low", low), ("high", high)):
        if not _is_number(value):
            raise ValueError(f"{key}.{bound} must be a finite number, got {value!r}")
        if kind == "int" and value != int(value):   # suggest_int would truncate it silently
            raise ValueError(f"{key}.{bound} must be an integer for type int, got {value!r}")
    if low > high:
        raise ValueError(f"{key}.low ({low}) is above {key}.high ({high})")
    if not isinstance(log, bool):   # a string "false" would be true
        raise ValueError(f"{key}.log must be true or false, got {log!r}")
    if log and low <= 0:
        raise ValueError(f"{key}.low must be positive with log: true, got {low}")


def _check_entry(key: str, spec: object) -> None:
    if not isinstance(spec, Mapping):
        raise ValueError(f"{key} must be a mapping {{type, low, high, log}} or {{type, choices}}, "
                         f"got {spec!r}")
    kind = spec.get("type")
    if kind not in PARAM_TYPES:
        raise _unknown_type(f"{key}.type", kind)
    unknown = sorted(set(spec) - KEYS[kind])
    if unknown:   # e.g. a misspelt "lo", or "step", which would be ignored
        raise ValueError(f"{key}: unknown keys {unknown} for type {kind}; expected {sorted(KEYS[kind])}")
    if kind != "categorical":
        _check_range(key, kind, spec)
        return
    choices = spec.get("choices")
    if not isinstance(choices, (list, tuple)) or not choices:
        raise ValueError(f"{key}.choices must be a non-empty list, got {choices!r}")
    bad = [c for c in choices if not isinstance(c, CHOICE_TYPES)]
    if bad:
        raise ValueError(f"{key}.choices must be numbers, strings, booleans or null, got {bad}")


def check_search_space(method: DictConfig, sampler: DictConfig | None = None) -> None:
    """Raise ``ValueError`` naming the key (``method.search_space.mu.low``) if the search space (the
    method's and the row sampler's) cannot be sampled as written.

    Checked: the type, the keys of each type, finite numeric bounds (integers for ``int``),
    ``low <= high``, a boolean ``log`` and ``low > 0`` with it, a non-empty list of ``choices``, and
    that every name is a ``method.params`` (or ``sampler.params``) key.
    """
    space = experiment.search_space(method, sampler)
    if not space:
        raise ValueError(f"method {method.name!r} has no search_space to tune")
    method_names = set(method.get("search_space") or {})
    for name, spec in space.items():
        _check_entry(f"{'method' if name in method_names else 'sampler'}.search_space.{name}", spec)
    # every name must be a method.params (or sampler.params) key
    experiment.method_params(method, dict.fromkeys(space), sampler=sampler)


def suggest(trial: optuna.Trial, search_space: Mapping) -> dict:
    """A trial's values of ``search_space`` (checked by :func:`check_search_space`): the overrides of
    ``method.params``."""
    out = {}
    for name, spec in search_space.items():
        kind = spec["type"]
        if kind == "categorical":
            out[name] = trial.suggest_categorical(name, list(spec["choices"]))
        elif kind in ("float", "int"):
            cast, sample = (float, trial.suggest_float) if kind == "float" else (int, trial.suggest_int)
            out[name] = sample(name, cast(spec["low"]), cast(spec["high"]), log=bool(spec.get("log", False)))
        else:
            raise _unknown_type(f"search_space.{name}.type", kind)
    return out
