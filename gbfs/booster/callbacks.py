"""LightGBM-style callbacks: small callables that receive one :class:`CallbackEnv` per iteration.

A callback may define ``reset()``; the booster calls it at the start of every
``fit`` so no state leaks from one fit into the next (several LightGBM bugs came
from callbacks that kept state between fits), and ``close()``, which it calls when
the fit ends, however it ends (what a callback holds open, such as a progress bar).
Early stopping ends the loop by raising :class:`EarlyStopException`, which the loop
catches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class CallbackEnv:
    """What a callback sees after each boosting iteration.

    Attributes
    ----------
    model : estimator being fitted
    iteration : int
        0-based index of the tree just added.
    record : dict
        This iteration's ``history_`` entry (metric name -> value).
    history : list of dict
        All records so far (including ``record``).
    end_iteration : int
        Number of iterations the loop will run if nothing stops it.
    """

    model: Any
    iteration: int
    record: dict
    history: list
    end_iteration: int = 0


def reset_all(callbacks) -> None:
    """Call ``reset()`` on every callback that has one: the start of a fit."""
    for cb in callbacks:
        if hasattr(cb, "reset"):
            cb.reset()


def close_all(callbacks) -> None:
    """Call ``close()`` on every callback that has one: the end of a fit, normal or not."""
    for cb in callbacks:
        if hasattr(cb, "close"):
            cb.close()


class EarlyStopException(Exception):
    """Raised by a callback to stop boosting; the model keeps trees ``0..best_iteration``."""

    def __init__(self, best_iteration: int, best_score: float):
        super().__init__(best_iteration, best_score)
        self.best_iteration = best_iteration
        self.best_score = best_score


_HIGHER_IS_BETTER = ("auc",)


class _EarlyStopping:
    def __init__(self, stopping_rounds: int, metric: str, min_delta: float):
        self.stopping_rounds = stopping_rounds
        self.metric = metric
        self.min_delta = min_delta
        self.reset()

    def reset(self) -> None:
        self.best_score = None
        self.best_iteration = -1

    def __call__(self, env: CallbackEnv) -> None:
        if self.metric not in env.record:
            raise ValueError(
                f"early_stopping: metric {self.metric!r} is not recorded; available: "
                f"{sorted(k for k in env.record if k.startswith('val'))} (pass eval_set to fit)")
        score = env.record[self.metric]
        sign = 1.0 if self.metric.endswith(_HIGHER_IS_BETTER) else -1.0
        if self.best_score is None or sign * (score - self.best_score) > self.min_delta:
            self.best_score = score
            self.best_iteration = env.iteration
        elif env.iteration - self.best_iteration >= self.stopping_rounds:
            raise EarlyStopException(self.best_iteration, self.best_score)
        if env.iteration == env.end_iteration - 1:
            # the loop ends before the patience runs out: still keep the best iteration, and say
            # which it was even when it is the last one (as LightGBM: best_iteration_ is always set)
            raise EarlyStopException(self.best_iteration, self.best_score)


def early_stopping(stopping_rounds: int, metric: str = "val_loss", min_delta: float = 0.0):
    """Stop when ``metric`` (a ``history_`` key such as ``"val_loss"`` or ``"val_auc"``) has not
    improved by more than ``min_delta`` for ``stopping_rounds`` iterations."""
    if not isinstance(stopping_rounds, int) or stopping_rounds < 1:
        raise ValueError(f"stopping_rounds must be a positive int, got {stopping_rounds!r}")
    return _EarlyStopping(stopping_rounds, metric, float(min_delta))


class _LogEvaluation:
    def __init__(self, period: int):
        self.period = period

    def __call__(self, env: CallbackEnv) -> None:
        if self.period > 0 and (env.iteration + 1) % self.period == 0:
            items = ", ".join(f"{k}={v:.6g}" for k, v in env.record.items()
                              if k != "iteration" and isinstance(v, float))
            print(f"[{env.iteration + 1}] {items}")


def log_evaluation(period: int = 1):
    """Print the record every ``period`` iterations."""
    return _LogEvaluation(int(period))


class _RecordEvaluation:
    def __init__(self, store: dict):
        if not isinstance(store, dict):
            raise TypeError(f"record_evaluation needs a dict, got {type(store).__name__}")
        self.store = store

    def reset(self) -> None:
        self.store.clear()

    def __call__(self, env: CallbackEnv) -> None:
        for k, v in env.record.items():
            self.store.setdefault(k, []).append(v)


def record_evaluation(store: dict):
    """Append every recorded value to ``store[name]`` (cleared at the start of each fit)."""
    return _RecordEvaluation(store)


def _latest_loss(record: dict) -> dict:
    loss = record.get("val_loss", record.get("train_loss"))
    return {"loss": loss} if isinstance(loss, float) else {}


class _ProgressBar:
    def __init__(self, desc: str, show, leave: bool):
        self.desc, self.show, self.leave, self.bar = desc, show, leave, None

    def reset(self) -> None:
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.bar = None

    def __call__(self, env: CallbackEnv) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=env.end_iteration or None, desc=self.desc, unit="tree", leave=self.leave)
        self.bar.update(1)
        shown = {k: v for k, v in self.show(env.record).items() if v is not None}
        if shown:
            self.bar.set_postfix_str(", ".join(f"{k}={v:.4f}" for k, v in shown.items()), refresh=False)
        if env.iteration + 1 >= env.end_iteration:
            self.close()

    def __getstate__(self) -> dict:  # a bar on a terminal is no state to carry: pickles without it
        return {**self.__dict__, "bar": None}


def progress_bar(desc: str = "fit", show=None, leave: bool = True):
    """A tqdm bar (stderr) over the trees of each fit; a new bar per fit, closed when the fit ends
    (early stopping and errors included).

    ``show(record)`` gives the values written beside it (name -> float, None to leave one out);
    by default the latest validation (else training) loss.  ``leave=False`` clears the bar when it
    closes."""
    return _ProgressBar(str(desc), _latest_loss if show is None else show, bool(leave))


def evals_result(history: list[dict]) -> dict[str, dict[str, list[float]]]:
    """A fit's ``history_`` (one record per round) regrouped as LightGBM's ``evals_result_``: by data
    set -- ``"training"`` for the ``train_*`` keys, ``"valid_<i>"`` for the ``i``-th eval set's
    (``val_*`` is the first, ``val1_*`` the second, ...) -- then by metric, one value per round."""
    out: dict[str, dict[str, list[float]]] = {}
    for record in history:
        for key, value in record.items():
            head, sep, metric = key.partition("_")
            if not sep:
                continue
            if head == "train":
                name = "training"
            elif head.startswith("val") and (head == "val" or head[3:].isdigit()):
                name = f"valid_{int(head[3:] or 0)}"
            else:
                continue
            out.setdefault(name, {}).setdefault(metric, []).append(float(value))
    return out
