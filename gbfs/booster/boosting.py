"""Single-task boosting: Algorithm 3 of the GT-GBM paper / Algorithm 1 of GBFS, as a plan of the one
round loop (:func:`gbfs.booster.rounds.run_rounds`).

Each round is one :class:`~gbfs.booster.tree_step.TreeStep` (residuals, rows and weights, one
penalised tree, shrunk leaf values, updated scores) followed by the evaluation of the train and
validation sets and a ``history_`` record.  Omega (a :class:`~gbfs.booster.usage.Usage`) lives
across rounds.  A softmax loss is boosted with one tree per class and round
(:mod:`gbfs.booster.multiclass_boosting`).
"""

from __future__ import annotations

from .growing.feature_search import FeatureSearch
from .losses.loss import loss_for
from .multiclass_boosting import boost_softmax
from .rounds import BoostingParams, BoostingResult, Evaluator, Slot, run_rounds
from .tree_step import TreeStep
from .usage import Usage


def boost(X_binned, y, bin_mapper, params: BoostingParams, usage: Usage, evals=(), callbacks=(),
          model=None, search: FeatureSearch | None = None, sample_rng=None, X=None) -> BoostingResult:
    """Fit ``params.n_estimators`` trees.

    Parameters
    ----------
    X_binned : ndarray of uint8, Fortran-ordered
    y : ndarray of float64 (labels in {0, 1} for the logistic loss, class codes for softmax)
    bin_mapper : fitted BinMapper
    usage : Usage
        Omega with mu, costs, bags and budget; updated in place.
    evals : sequence of (name, X_binned, y) or, for ranking, (name, X_binned, y, query offsets)
        Validation sets scored after every tree.
    callbacks : sequence of callables receiving a CallbackEnv
    model : object passed to callbacks as ``env.model``
    search : FeatureSearch or None
        The split search's feature restriction (the method's, e.g. GT-GBM's group tests).
    sample_rng : numpy Generator or None
        Source of the row sampler's draws.
    X : ndarray of float or None
        The raw training values: the exact split search (``params.growth.split_search="exact"``)
        needs them, and its ``evals`` then hold raw values too.
    """
    if params.loss.trees_per_round > 1:  # one tree per class per round: gbfs.booster.multiclass_boosting
        return boost_softmax(X_binned, y, bin_mapper, params, usage, evals, callbacks, model, search,
                             sample_rng)
    step = TreeStep(X_binned, y, bin_mapper, params, search, sample_rng, X=X)
    exact = params.growth.split_search == "exact"
    plan = SingleTask(step, usage, [Evaluator(name, Xv, yv, step.init_score, loss_for(params, *extra),
                                              raw_values=exact)
                                    for name, Xv, yv, *extra in evals], params.train_metrics)
    (trees,), history, best_iteration = run_rounds(plan, params, callbacks, model)
    return BoostingResult(trees, step.init_score, history, best_iteration)


class SingleTask:
    """The plan of single-task boosting: one slot, the train and validation sets' evaluators."""

    def __init__(self, step: TreeStep, usage: Usage, evaluators: list[Evaluator], train_metrics: str = "all"):
        train = Evaluator("train", step.X_binned, step.y, step.init_score, step.loss, train_metrics)
        train.raw = step.raw  # train scores are updated through the partition, not re-predicted
        self.step, self.usage, self._evals = step, usage, evaluators
        self.slots = [Slot(step, usage, self._add_tree)]
        self.evaluators = [train, *evaluators]

    def _add_tree(self, tree) -> None:
        for ev in self._evals:
            ev.add_tree(tree)

    def start_round(self) -> None:
        pass

    def record(self, it: int, seconds: float, stats: list[dict]) -> dict:
        return tree_record(it, seconds, stats[0], self.usage)

    def release(self) -> None:
        self.step.release()


def tree_record(it: int, seconds: float, stats: dict, usage: Usage) -> dict:
    """The ``history_`` record of single-task round ``it`` before its metrics: the time so far, the
    tree's statistics (``root_variance``, ``gain_normaliser``, ...) and Omega's size."""
    st = dict(stats)
    return {"iteration": it, "elapsed_seconds": seconds, "root_variance": st.pop("root_variance"),
            "gain_normaliser": st.pop("gain_normaliser"), "n_features_used": len(usage.order), **st}
