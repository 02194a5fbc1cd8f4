"""Row samplers of stochastic boosting: SGB, GOSS, MVS and MVS Adaptive, in a registry by name.

Ibragimov & Gusev, "Minimal Variance Sampling in Stochastic Gradient Boosting" (NeurIPS 2019),
Sections 2.2-2.3 (SGB, GOSS), 4 (MVS: Eq. 9, Theorem 2, Algorithms 1 and 2) and 5 (MVS Adaptive).

A sampler is a function of one iteration's residuals ``g`` and hessians ``h`` that returns the rows
used to grow the tree and their weights.  Every sampler here returns inverse-probability weights
(IPWE, the paper's Eq. 6), so weighted sums of ``g`` and ``h`` over any node are unbiased estimates
of the full sums; the tree still scores every row afterwards.  All randomness comes from the
``rng`` argument (drawn here, outside the kernels of :mod:`gbfs.sampling.kernels`, which also
holds the MVS threshold and probabilities re-exported here), so the same Generator state gives the
same rows.

Each sampler is one frozen-dataclass subclass of :class:`RowSampler` registered under its name with
:func:`register` (``GBFSClassifier(sampler=name)``); its fields are the estimator arguments it
reads, each declared with :func:`param` (default, range check and description, from which
:func:`register` writes the Parameters section of the sampler's docstring).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from functools import partial
from typing import ClassVar

import numpy as np

from ..booster.kernels.portable import total
from ..validation import check_choice, check_int, check_real, warn_user
from . import kernels
from .kernels import mvs_probabilities, mvs_threshold  # noqa: F401 (public here too)

GOSS_STYLES = ("paper", "lightgbm")
N_PIVOTS = 64  # quickselect steps per threshold are ~2 ln N (~32 for 10^7 rows); cycled beyond that
#: the estimator's sampling arguments (those of :func:`from_params`) and their "not given" values
ARGUMENTS = {"subsample": None, "top_rate": None, "other_rate": None, "mvs_lambda": None,
             "goss_style": "paper"}
#: booster settings a sampler may also read (as a field of the same name); never "ignored"
CONTEXT = ("learning_rate",)


def adaptive_lambda(g: np.ndarray, h: np.ndarray | None) -> float:
    """MVS Adaptive's lambda: the squared Newton value of a single leaf holding every row.

    Section 5 replaces lambda, "an approximation of squared mean leaf value upper bound" (c_l^2 of
    Eq. 7-9), by "a squared mean of the initial leaf"; we take that leaf value to be the one a
    single leaf holding all N rows would get, c = sum(g) / sum(h), so lambda = (sum g / sum h)^2,
    recomputed every iteration.  0 when sum(h) <= 0.  The booster passes the hessians of its split
    criterion: the logistic / squared-error ones for criterion="newton" (c is then the root's
    Newton leaf value) and h = 1 for the papers' criterion="sse" (c is the mean residual, the
    root's leaf value under leaf_estimate="mean").
    """
    g, h = kernels.check_gh(g, h)
    sum_h = total(h)
    return (total(g) / sum_h) ** 2 if sum_h > 0.0 else 0.0


# Range checks of the parameters, called as check(name, value); each raises a ValueError naming it
RATE = partial(check_real, low=0.0, low_open=True, high=1.0)       # (0, 1]
TOP_RATE = partial(check_real, low=0.0, high=1.0, high_open=True)  # [0, 1): some rows left to draw
NON_NEGATIVE = partial(check_real, low=0.0)
POSITIVE = partial(check_real, low=0.0, low_open=True)
GOSS_STYLE = partial(check_choice, choices=GOSS_STYLES)


def param(default: object, check: Callable[[str, object], object], doc: str | None = None):
    """A sampler parameter: a dataclass field with its default, range check and description.

    Parameters
    ----------
    default : object
        Used when the estimator's argument is not given (see :data:`ARGUMENTS`).
    check : callable
        ``check(name, value)``, raising a ValueError naming the argument when value is out of range.
    doc : str or None, default=None
        The parameter's description.  Once any field of a sampler has one, :func:`register` appends
        the Parameters section of all its fields to the sampler's docstring.
    """
    return field(default=default, metadata={"check": check, "doc": doc})


def _parameters_doc(cls: type) -> str | None:
    """The numpydoc Parameters section of ``cls``'s fields, or None when none has a description."""
    if all(f.metadata.get("doc") is None for f in fields(cls)):
        return None
    lines = ["", "", "    Parameters", "    ----------"]
    for f in fields(cls):
        check = f.metadata.get("check")
        if getattr(check, "func", None) is check_choice:   # the type of a choice is its choices
            kind = "{" + ", ".join(f'"{c}"' for c in check.keywords["choices"]) + "}"
        else:
            kind = f.type if isinstance(f.type, str) else f.type.__name__
        default = f'"{f.default}"' if isinstance(f.default, str) else repr(f.default)
        lines.append(f"    {f.name} : {kind}, default={default}")
        if f.metadata.get("doc"):
            lines.append(f"        {f.metadata['doc']}")
    return "\n".join(lines) + "\n    "


class RowSampler(ABC):
    """Per-iteration row sampler, the base of every registered sampler.

    A subclass is a frozen dataclass whose fields are the estimator arguments it reads (names in
    :data:`ARGUMENTS`, declared with :func:`param`) and, if it needs them, booster settings (names
    in :data:`CONTEXT`); it implements :meth:`draw` and is made available by :func:`register`.
    Build one from its class or with :func:`from_params` (which also warns about unused
    arguments).  Stateless: everything random comes from the ``rng`` given to :meth:`sample`.
    """

    kind: ClassVar[str] = ""  # the registered name, set by register

    def __post_init__(self):  # a sampler built directly is checked too
        for f in fields(self):
            check = f.metadata.get("check")
            if check is not None:
                check(f.name, getattr(self, f.name))
        self.check_params()

    def check_params(self) -> None:
        """Checks across parameters, run after each parameter's own check; none by default."""
        return None

    @classmethod
    def arguments(cls) -> tuple[str, ...]:
        """The estimator arguments this sampler reads: its fields that are not booster settings."""
        return tuple(f.name for f in fields(cls) if f.name in ARGUMENTS)

    def lambda_for(self, g: np.ndarray, h: np.ndarray | None) -> float | None:
        """The lambda :meth:`sample` uses for these g, h (for logging); None if it has none."""
        return None

    def sample(self, g: np.ndarray, h: np.ndarray | None, iteration: int, rng: np.random.Generator
               ) -> tuple[np.ndarray, np.ndarray]:
        """Rows used to grow this iteration's tree and their weights.

        Parameters
        ----------
        g : ndarray of float64, shape (N,)
            Residuals (negative gradients).
        h : ndarray of float64, shape (N,) or None
            Hessians; None means 1 for every row.
        iteration : int
            0-based boosting iteration (read by goss_style="lightgbm" only).
        rng : numpy.random.Generator
            Source of every random draw.

        Returns
        -------
        rows : ndarray of int32, sorted ascending, unique, non-empty
        weights : ndarray of float64, same length; sum(weights * g) over any subset of rows is an
            unbiased estimate of sum(g) over that subset (likewise for h).
        """
        g, h = kernels.check_gh(g, h)
        check_int("iteration", iteration, 0)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        return self.draw(g, h, iteration, rng)

    @abstractmethod
    def draw(self, g: np.ndarray, h: np.ndarray, iteration: int, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`sample` after its checks: g and h are contiguous float64 of one shape (h = 1
        when sample got None); returns what :meth:`sample` documents."""


#: sampler name -> its class, in registration order (``for kind in SAMPLERS`` gives the names)
SAMPLERS: dict[str, type[RowSampler]] = {}


def register(name: str) -> Callable[[type[RowSampler]], type[RowSampler]]:
    """Class decorator making a sampler available as ``sampler=name`` (estimators, :func:`from_params`).

    The class must be a :class:`RowSampler` subclass decorated with ``@dataclass(frozen=True)``
    (below this decorator) whose fields are all in :data:`ARGUMENTS` or :data:`CONTEXT`: the
    estimator has no other argument to set a field from, so any other name is a mistake.  When its
    fields are described (``param(..., doc=...)``), their Parameters section ends its docstring.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a sampler name must be a non-empty str, got {name!r}")

    def add(cls):
        # the dataclass params must be the class's own: a subclass of a dataclass inherits them
        if not (isinstance(cls, type) and issubclass(cls, RowSampler) and "__dataclass_params__" in
                vars(cls) and cls.__dataclass_params__.frozen):
            raise TypeError(f"register({name!r}) needs a RowSampler subclass decorated with "
                            f"@dataclass(frozen=True), got {cls!r}")
        extra = [f.name for f in fields(cls) if f.name not in ARGUMENTS and f.name not in CONTEXT]
        if extra:
            raise TypeError(f"sampler {name!r}: fields {extra} are neither estimator arguments "
                            f"{list(ARGUMENTS)} nor booster settings {list(CONTEXT)}")
        if name in SAMPLERS:
            raise ValueError(f"sampler {name!r} is already registered ({SAMPLERS[name].__name__})")
        cls.kind = name
        section = _parameters_doc(cls)
        if section is not None:
            cls.__doc__ = (cls.__doc__ or "").rstrip() + section
        SAMPLERS[name] = cls
        return cls
    return add


class _RegistryView(Mapping):
    """A read-only mapping recomputed from :data:`SAMPLERS` at every access, so that it also shows
    samplers registered after import."""

    def __init__(self, build: Callable[[], dict]):
        self._build = build

    def __getitem__(self, key):
        return self._build()[key]

    def __iter__(self) -> Iterator:
        return iter(self._build())

    def __len__(self) -> int:
        return len(self._build())

    def __repr__(self) -> str:
        return repr(self._build())


def _used_by() -> dict[str, tuple[str, ...]]:
    users = {arg: tuple(kind for kind, cls in SAMPLERS.items() if arg in cls.arguments())
             for arg in ARGUMENTS}
    return {arg: kinds for arg, kinds in users.items() if kinds}


def _defaults() -> dict[str, object]:
    out = {}
    for f in (f for cls in SAMPLERS.values() for f in fields(cls) if f.name in ARGUMENTS):
        out.setdefault(f.name, f.default)
    return out


#: estimator argument -> the names of the samplers that read it
USED_BY = _RegistryView(_used_by)
#: estimator argument -> its default in the first registered sampler that reads it
DEFAULTS = _RegistryView(_defaults)


@register("sgb")
@dataclass(frozen=True)
class SGB(RowSampler):
    """Friedman's stochastic gradient boosting (Section 2.2): exactly k = max(1, round(s N)) rows
    uniformly without replacement, each with weight N / k."""

    subsample: float = param(0.5, RATE, "Sample rate s, in (0, 1].")

    def draw(self, g, h, iteration, rng):
        # Classic SGB leaves the weight at 1; we use N / k so node sums estimate full-data sums
        # without bias -- otherwise every gain shrinks by the rate s while GBFS's first-use penalty
        # does not, and sampling would silently strengthen feature selection.
        n = g.shape[0]
        k = max(1, round(self.subsample * n))
        if k == n:
            return np.arange(n, dtype=np.int32), np.ones(n)
        return kernels.sequential_select(np.zeros(n, dtype=np.bool_), 0, k, rng.random(n), n / k)


@register("goss")
@dataclass(frozen=True)
class GOSS(RowSampler):
    """Gradient-based one-side sampling (LightGBM's GOSS; Section 2.3 of the MVS paper).

    "paper": the a = round(top_rate N) rows of largest |g| with weight 1 and b = round(other_rate N)
    of the other N - a rows uniformly without replacement, each with weight (N - a) / b: the exact
    inverse inclusion probability, hence unbiased; it equals the paper's (1 - top_rate) / other_rate
    when both roundings are exact.  b is clipped to [1, N - a] (rounding can give a + b = N + 1;
    b = 0 would leave the rest unrepresented).  Ties at the a-th largest |g| go to the lowest rows;
    exactly a rows are kept.  "lightgbm": rows ranked by |g h| instead, and every row with weight 1
    while iteration < floor(1 / learning_rate), as LightGBM's goss.hpp does (it does not sample
    while the gradients are still large).
    """

    top_rate: float = param(0.2, TOP_RATE, "Share of N taken from the largest-|g| rows, in [0, 1).")
    other_rate: float = param(0.1, RATE, "Share of N drawn uniformly from the rest, in (0, 1]; "
                                         "top_rate + other_rate <= 1.")
    goss_style: str = param("paper", GOSS_STYLE)
    learning_rate: float = param(0.1, POSITIVE,
                                 'The booster\'s learning rate, read only by goss_style="lightgbm".')

    def check_params(self):
        if self.top_rate + self.other_rate > 1.0 + 1e-12:
            raise ValueError(f"top_rate + other_rate must be <= 1, got {self.top_rate} + {self.other_rate}")

    def draws(self, iteration: int) -> bool:
        """Does this iteration sample (else every row, weight 1, and no uniform is drawn)?"""
        return not (self.goss_style == "lightgbm" and iteration < int(1.0 / self.learning_rate))

    def sizes(self, n: int) -> tuple[int, int, float]:
        """``(a, b, w_other)`` of ``n`` rows: the top rows, the others drawn, their weight."""
        a = min(n, round(self.top_rate * n))
        b = min(n - a, max(1, round(self.other_rate * n)))
        return a, b, (n - a) / b if b > 0 else 1.0

    def key(self, g: np.ndarray, h: np.ndarray) -> np.ndarray:
        """What the top rows are the largest of: ``|g|``, or ``|g h|`` in LightGBM's style."""
        return np.abs(g * h) if self.goss_style == "lightgbm" else np.abs(g)

    def draw(self, g, h, iteration, rng):
        n = g.shape[0]
        if not self.draws(iteration):
            return np.arange(n, dtype=np.int32), np.ones(n)
        a, b, w_other = self.sizes(n)
        top = np.zeros(n, dtype=np.bool_)
        if a > 0:
            key = self.key(g, h)
            top = kernels.top_mask(key, np.partition(key, n - a)[n - a], a)
        return kernels.sequential_select(top, a, b, rng.random(n), w_other)


@dataclass(frozen=True)
class _MVS(RowSampler):
    """Minimal variance sampling with the lambda of :meth:`lambda_for` (Algorithm 1).

    p_i = min(1, g_hat_i / mu) (Theorem 2), row i kept iff u_i < p_i, weight 1 / p_i.  Rows with
    g_hat == 0 under mu > 0 have p = 0 and are never drawn (their g and, if lambda > 0, h are 0, so
    the sums lose nothing).  For mu == 0 see :func:`mvs_probabilities`.  If no row is drawn
    (possible, the size is random) the row of largest p is kept with weight 1 / p.
    """

    subsample: float = param(0.5, RATE, "Sample rate s, in (0, 1]: the expected sample size is s N.")

    @abstractmethod
    def lambda_for(self, g: np.ndarray, h: np.ndarray | None) -> float:
        """The lambda of g_hat = sqrt(g^2 + lambda h^2) for these g, h."""

    def draw(self, g, h, iteration, rng):
        n = g.shape[0]
        lam = self.lambda_for(g, h)
        if self.subsample >= 1.0:
            return np.arange(n, dtype=np.int32), np.ones(n)
        values = kernels.regularized_abs(g, h, lam)
        target = self.subsample * n
        mu = kernels.threshold(values, target, rng.random(N_PIVOTS))
        p_zero = kernels.uniform_p_zero(values, target) if mu == 0.0 else 0.0
        return kernels.mvs_select(values, mu, p_zero, rng.random(n))


@register("mvs")
@dataclass(frozen=True)
class MVS(_MVS):
    """MVS (Section 4, Theorem 2, Algorithms 1 and 2) with a fixed lambda."""

    mvs_lambda: float = param(0.1, NON_NEGATIVE, "lambda of g_hat = sqrt(g^2 + lambda h^2) (Eq. 9), >= 0; "
                                                 "about 0.1 works well (Section 5).")

    def lambda_for(self, g, h):
        return self.mvs_lambda


@register("mvs_adaptive")
@dataclass(frozen=True)
class MVSAdaptive(_MVS):
    """MVS Adaptive (Section 5): MVS with lambda re-set every iteration by :func:`adaptive_lambda`."""

    def lambda_for(self, g, h):
        return adaptive_lambda(g, h)


def _is_given(value, unset) -> bool:
    # identity first: a numpy array compared with == would not give one bool
    return value is not unset and not (isinstance(value, str) and value == unset)


def _build(cls: type[RowSampler], given: Mapping, context: Mapping) -> RowSampler:
    """``cls`` with those of the given arguments and booster settings that are its fields."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in {**given, **context}.items() if k in names})


def from_params(sampler: str | None, subsample: float | None = None, top_rate: float | None = None,
                other_rate: float | None = None, mvs_lambda: float | None = None,
                goss_style: str = "paper", learning_rate: float = 0.1,
                warn: bool = True) -> RowSampler | None:
    """Validate an estimator's sampling arguments and build the sampler (None when sampler is None).

    ``sampler`` is a name in :data:`SAMPLERS`; the sampler's class receives the arguments it reads
    (its fields) and ``learning_rate`` if it has that field.  Every bad value is a ValueError naming
    the argument, raised here before any kernel runs, also for an argument the chosen sampler does
    not read: each given value is checked by every registered sampler that reads it.  Such an
    argument (a value other than None, or goss_style other than "paper") is ignored with a
    UserWarning naming it -- as the GT-GBM arguments are under another method -- so that a grid
    over ``sampler`` with a fixed ``subsample`` works, and nothing is dropped silently.  An
    argument left at None takes the sampler's default (:data:`DEFAULTS` for the built-in ones:
    subsample 0.5, top_rate 0.2, other_rate 0.1, mvs_lambda 0.1).  ``warn=False`` ignores them
    without the warning (a loaded model file was warned about when it was fitted).
    """
    if sampler is not None:
        check_choice("sampler", sampler, SAMPLERS)
    args = {"subsample": subsample, "top_rate": top_rate, "other_rate": other_rate,
            "mvs_lambda": mvs_lambda, "goss_style": goss_style}
    given = {name: value for name, value in args.items() if _is_given(value, ARGUMENTS[name])}
    context = {"learning_rate": learning_rate}
    # checked by every reader, chosen or not: a grid over sampler with one fixed bad value fails in
    # every cell, not only in the cells whose sampler happens to read it
    for cls in SAMPLERS.values():
        if any(name in given for name in cls.arguments()):
            _build(cls, given, context)
    check_real("learning_rate", learning_rate, low=0.0, low_open=True)  # the booster's, read or not
    read = SAMPLERS[sampler].arguments() if sampler is not None else ()
    unused = [name for name in given if name not in read]
    if unused and warn:
        shown = "None" if sampler is None else f'"{sampler}"'
        users = "; ".join(f"{name} by sampler in ({', '.join(USED_BY.get(name, ()))})"
                          for name in unused)
        warn_user(f"{', '.join(unused)} ignored with sampler={shown} (read {users})")
    if sampler is None:
        return None
    return _build(SAMPLERS[sampler], given, context)  # the unused ones are not its fields
