"""Row sampling in the harness (``conf/sampler/``): the sampler group's arguments, its search space,
and how they map to LightGBM's own sampling.

:func:`runners.core.experiment.with_sampler` merges them into an estimator's arguments; a
``GBFSClassifier`` (or ``GBFSRanker``) takes them as they are, ``LightGBMBaseline`` through
:func:`lightgbm_sampling`.
"""

from __future__ import annotations

from collections.abc import Mapping

from omegaconf import DictConfig, OmegaConf

from gbfs.sampling import samplers as sampling

#: the estimator arguments of row sampling (``GBFSClassifier``); ``conf/sampler/*.yaml`` params
SAMPLER_ARGS = ("sampler", *sampling.ARGUMENTS)
NO_MVS = "LightGBM has no MVS (its MVS pull request was never merged); use a gbfs method"


def _sampler_uses() -> dict[str, dict]:
    """The arguments each registered sampler uses, with their defaults (the others must stay None),
    read from the registry at every call: a sampler registered after this module was imported is one
    too.  ``goss_style`` is GOSS's with default None here (LightGBM's own GOSS is its style)."""
    uses = {kind: {arg: sampling.DEFAULTS[arg] for arg, users in sampling.USED_BY.items() if kind in users}
            for kind in sampling.SAMPLERS}
    if "goss" in uses:
        uses["goss"]["goss_style"] = None
    return uses


def sampler_space(sampler: DictConfig | None) -> dict:
    if sampler is None or not sampler.get("search_space"):
        return {}
    return OmegaConf.to_container(sampler.search_space, resolve=True)


def sampler_params(sampler: DictConfig | None) -> dict:
    """``sampler.params`` as a dict (``{}`` for ``sampler=none`` or no sampler group)."""
    if sampler is None or not sampler.get("params"):
        return {}
    params = OmegaConf.to_container(sampler.params, resolve=True)
    unknown = set(params) - set(SAMPLER_ARGS)
    if unknown:
        raise ValueError(f"sampler {sampler.get('name')!r}: params {sorted(unknown)} are not sampler "
                         f"arguments {SAMPLER_ARGS}")
    return params


def search_space(method: DictConfig, sampler: DictConfig | None = None) -> dict:
    """``method.search_space`` merged with ``sampler.search_space`` (what Optuna tunes)."""
    space = OmegaConf.to_container(method.search_space, resolve=True) if method.get("search_space") else {}
    extra = sampler_space(sampler)
    clash = set(space) & set(extra)
    if clash:
        raise ValueError(f"method {method.name!r} and sampler {sampler.name!r} both tune {sorted(clash)}")
    return {**space, **extra}


def _check_unused(kind: str | None, args: Mapping) -> None:
    uses = _sampler_uses().get(kind, {})
    unused = sorted(k for k, v in args.items() if k != "sampler" and k not in uses and v is not None)
    if unused:
        raise ValueError(f"sampler={kind!r} does not use {unused} (they must be None)")


def lightgbm_sampling(args: Mapping, lgb_params: Mapping | None = None) -> dict:
    """Map sampler arguments to LightGBM's: ``{"lgb_params": ...}`` (``{}`` without a sampler).

    ``sgb`` is LightGBM's bagging (``bagging_fraction = subsample``, ``bagging_freq = 1``);
    ``goss`` its GOSS (``data_sample_strategy = "goss"``, ``top_rate``, ``other_rate``), which
    always ranks by |g h| and skips the first 1/learning_rate trees, so ``goss_style="paper"``
    is refused; ``mvs`` and ``mvs_adaptive`` do not exist in LightGBM (:data:`NO_MVS`).
    """
    kind = args.get("sampler")
    if kind in ("mvs", "mvs_adaptive"):
        raise ValueError(NO_MVS)
    known = _sampler_uses()
    if kind is not None and kind not in known:
        raise ValueError(f"sampler must be one of {sorted(known)} or None, got {kind!r}")
    _check_unused(kind, args)
    if kind is None:
        return {}
    if kind not in LIGHTGBM_SAMPLERS:
        raise ValueError(f"sampler={kind!r} has no LightGBM equivalent (LightGBM samples rows as "
                         f"{sorted(LIGHTGBM_SAMPLERS)}); use a gbfs method")
    use = {**known[kind], **{k: v for k, v in args.items() if v is not None}}
    new = LIGHTGBM_SAMPLERS[kind](use)
    extra = dict(lgb_params or {})
    clash = sorted(k for k in extra if _lgb_canonical(k) in new)
    if clash:
        raise ValueError(f"lgb_params {clash} clash with sampler={kind!r}'s {sorted(new)}")
    return {"lgb_params": {**extra, **new}}


def _lgb_bagging(use: Mapping) -> dict:
    return {"bagging_fraction": float(use["subsample"]), "bagging_freq": 1}


def _lgb_goss(use: Mapping) -> dict:
    if use["goss_style"] not in (None, "lightgbm"):
        raise ValueError(f"goss_style={use['goss_style']!r}: LightGBM's GOSS ranks rows by |g h| and "
                         f"does not sample the first 1/learning_rate trees; set goss_style='lightgbm' "
                         f"(or leave it unset) on a LightGBM method")
    return {"data_sample_strategy": "goss", "top_rate": float(use["top_rate"]),
            "other_rate": float(use["other_rate"])}


#: our samplers LightGBM has, and its parameters for their arguments (every other registered sampler
#: is refused on a LightGBM method, naming it)
LIGHTGBM_SAMPLERS = {"sgb": _lgb_bagging, "goss": _lgb_goss}


def _lgb_canonical(key: str) -> str:
    try:  # LightGBM's alias table (subsample is an alias of bagging_fraction)
        from lightgbm.basic import _ConfigAliases

        return next((c for c in ("bagging_fraction", "bagging_freq") if key in _ConfigAliases.get(c)), key)
    except (ImportError, AttributeError):
        return key
