"""The driver of a data-parallel fit: one global Omega, every split decision, every tree.

The driver holds no rows.  Its shards (:class:`~gbfs.dask.shard.Shard`, one per partition) live on
the workers behind a :class:`ShardGroup`, which runs one shard method on all of them and returns
their answers in partition order.  Everything that decides the model is the single-process
library's: the boosting loop (:func:`gbfs.booster.rounds.run_rounds`), the gain normaliser, the
grower's best-first loop, split scan, penalty and budget
(:class:`~gbfs.booster.growing.remote.RemoteGrower`), the leaf values and the refit.  What changes
is only where sums come from: each shard sums its own rows as one process would, and the driver
adds the shards' sums in partition order (:func:`fold`), a fixed order, so a fit is reproducible
whatever worker holds which partition.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from ..booster.boosting import tree_record
from ..booster.growing.feature_search import FeatureSearch
from ..booster.growing.remote import RemoteGrower
from ..booster.kernels._types import C_CH, H_CH
from ..booster.kernels.histogram import HistogramLayout
from ..booster.normaliser import tree_normaliser
from ..booster.rounds import BoostingParams, BoostingResult, Slot, records, run_rounds
from ..booster.tree_step import check_residual_scale, check_score_bound, leaf_values, node_values
from ..criteria.group_testing import draw_subsets
from ..criteria.methods import METHODS
from ..criteria.penalty import FeatureUsage, anneal_of
from ..criteria.refit import refit_params, top_k
from . import goss, mvs
from . import group_tests as gt
from .shard import RESIDUAL_STATS, channels, feature_bins


class ShardGroup(Protocol):
    """The shards of a fit, one per partition, wherever they live."""

    n_rows: int
    n_partitions: int

    def call(self, method: str, *args) -> list:
        """``shard.method(*args)`` on every shard; the answers in partition order."""

    def call_one(self, index: int, method: str, *args):
        """``shard.method(*args)`` on the shard of partition ``index``; its answer."""


class InProcessGroup:
    """Shards in this process (tests, and the reference a distributed fit is compared with)."""

    def __init__(self, shards: list):
        self.shards = shards
        self.n_rows = int(sum(s.n for s in shards))
        self.n_partitions = len(shards)

    def call(self, method: str, *args) -> list:
        return [getattr(s, method)(*args) for s in self.shards]

    def call_one(self, index: int, method: str, *args):
        return getattr(self.shards[index], method)(*args)


def fold(parts: list):
    """The sum of the partitions' arrays (or floats) in partition order: ``((p0 + p1) + p2) + ...``,
    elementwise, whatever the CPU."""
    acc = parts[0].copy() if isinstance(parts[0], np.ndarray) else parts[0]
    for p in parts[1:]:
        acc = acc + p
    return acc


class ShardSource:
    """The grower's :class:`~gbfs.booster.growing.remote.HistogramSource` over a :class:`ShardGroup`.

    Splits are queued and sent with the next request (a split and the smaller child's histogram
    cost one round trip); every shard answers its left-child counts, whose sum must equal the count
    the driver's histogram promised.  ``bytes`` counts the histogram bytes the shards sent.
    """

    def __init__(self, group: ShardGroup, layout, unit_h: bool):
        self.group, self.layout, self.unit_h = group, layout, unit_h
        self._pending: list = []
        self.bytes = 0
        self.requests = 0

    def split(self, start, end, n_left, feature, bin_threshold, missing_left) -> None:
        self._pending.append((int(start), int(end), int(n_left), int(feature), int(bin_threshold),
                              bool(missing_left)))

    #: the sum of the shards' answers in partition order
    fold = staticmethod(fold)

    def _take(self) -> list:
        pending, self._pending = self._pending, []
        return pending

    def with_splits(self, method: str, *args) -> list:
        """``shard.method(pending splits, *args)`` on every shard, each answering its left-child
        counts (checked) and an answer; the answers in partition order."""
        pending = self._take()
        answers = self.group.call(method, pending, *args)
        self._check(pending, [a[0] for a in answers])
        return [a[1] for a in answers]

    def _check(self, pending: list, counts: list) -> None:
        for k, (start, end, n_left, *_) in enumerate(pending):
            got = sum(c[k] for c in counts)
            if got != n_left:
                raise RuntimeError(f"the shards hold {got} rows left of node {start}..{end}, "
                                   f"its histogram counted {n_left}")

    def histogram(self, start, end, features, out) -> None:
        pending = self._take()
        answers = self.group.call("histogram", pending, int(start), int(end), features, self.unit_h)
        self._check(pending, [a[0] for a in answers])
        parts = [a[1] for a in answers]
        self.bytes += sum(p.nbytes for p in parts)
        self.requests += 1
        summed = fold(parts)
        idx = feature_bins(self.layout.offsets, features)
        out[idx[:, None], channels(self.unit_h)] = summed
        if self.unit_h:
            out[idx, H_CH] = out[idx, C_CH]

    def counts(self, features, out) -> None:
        parts = self.group.call("counts", features)
        self.bytes += sum(p.nbytes for p in parts)
        out[feature_bins(self.layout.offsets, features)] = fold(parts)

    def leaf_sums(self, leaves: list) -> tuple[np.ndarray, np.ndarray]:
        pending = self._take()
        answers = self.group.call("leaf_sums", pending, leaves)
        self._check(pending, [a[0] for a in answers])
        sums = fold([a[1] for a in answers])
        return sums[0], sums[1]


class DistributedStep:
    """:class:`gbfs.booster.tree_step.TreeStep` of a fit whose rows are on the shards.

    With SGB or MVS each shard draws its own rows of every tree (``seed``: the draws' seed, with
    the partition's index and the iteration), so the sample depends on the partitioning; GOSS
    draws the single-process sample from the stream ``seed`` (:mod:`gbfs.dask.goss`).  ``search``
    is GT-GBM's search on shards (:mod:`gbfs.dask.group_tests`), bound here to the fit's source."""

    def __init__(self, group: ShardGroup, bin_mapper, params: BoostingParams, init_score: float,
                 search: FeatureSearch | None = None, seed: tuple = (0,)):
        self.group, self.params, self.init_score, self.seed = group, params, init_score, tuple(seed)
        # weighted rows' second channel is their weight, not their count
        self.unit_h = not params.criterion.hessian_weighted and params.sampler is None
        self.source = ShardSource(group, HistogramLayout(bin_mapper.n_bins_non_missing_), self.unit_h)
        if hasattr(search, "bind"):  # a search that asks the shards (GT-GBM's group tests)
            search.bind(self.source)
        self.grower = RemoteGrower(self.source, group.n_rows, bin_mapper, params.growth, search)
        group.call("start", init_score, params.criterion.hessian_weighted, params.leaf_estimate.newton)
        self.score_bound = abs(init_score)
        self._update = None  # the last tree's leaves and values, sent with the next request
        self._drawn = 0  # uniforms GOSS's stream has drawn (one per row of a sampling tree)

    def _take_update(self):
        update, self._update = self._update, None
        return update

    def train_loss(self) -> float:
        """Add the last tree's leaf values to the shards' scores; the mean loss over all rows."""
        return fold(self.group.call("update", self._take_update(), True)) / self.group.n_rows

    def _rows(self, it: int) -> list:
        """The shards' statistics of this tree's rows: every row, each partition's own SGB sample,
        an MVS sample under one threshold over all rows (:mod:`gbfs.dask.mvs`) or the
        single-process GOSS sample (:mod:`gbfs.dask.goss`)."""
        sampler = self.params.sampler
        if sampler is None or sampler.kind == "sgb":
            sample = None if sampler is None else (sampler, it, self.seed)
            return self.group.call("residuals", self._take_update(), sample)  # the last tree's scores first
        parts = self.group.call("residuals", self._take_update(), None)
        if sampler.kind == "goss":
            drawn, self._drawn = self._drawn, self._drawn + (self.group.n_rows if sampler.draws(it) else 0)
            return goss.draw(self.group, sampler, it, drawn, self.seed, fold)
        if sampler.subsample >= 1.0:  # every row (the sampler's weights would all be 1)
            return parts
        return mvs.draw(self.group, sampler, dict(zip(RESIDUAL_STATS, fold(parts).tolist())), it, self.seed,
                        fold)

    def grow(self, it: int, usage) -> tuple:
        params, sampled = self.params, self.params.sampler is not None
        parts = self._rows(it)
        stats = dict(zip(RESIDUAL_STATS, fold(parts).tolist()))
        # over every row, as one process checks it (the max, not a sum)
        check_residual_scale(self.group.n_rows * max(float(p[-1]) for p in parts), it, params)
        n, w_sum, sum_r = int(stats["n"]), stats["w_sum"], stats["sum_r"]
        sse = stats["sum_rr"] - sum_r ** 2 / w_sum if w_sum > 0 else 0.0  # normaliser.root_sse
        norm = tree_normaliser(params, sse, sum_r, w_sum, lambda: (stats["sum_g2_over_h"], stats["sum_wh"]))
        divisor = 1.0 if params.method is None else params.method.divisor(norm)
        grown = self.grower.grow_from_root(n, sum_r, stats["sum_h"], usage, divisor, self.unit_h, norm)
        leaves = [(int(a), int(b)) for a, b in zip(grown.leaf_starts, grown.leaf_ends)]
        num, den = self.source.leaf_sums(leaves)
        values = leaf_values(grown, num, den, params)
        self.score_bound += float(np.max(np.abs(values)))
        check_score_bound(self.score_bound, it, params)
        tree = grown.builder.build(node_values(grown, values))
        # a sampled tree scores every row of the shards, as one process predicts it on all rows
        self._update = tree if sampled else (leaves, values)
        out = {"root_variance": sse / w_sum, "gain_normaliser": norm, "n_leaves": tree.n_leaves}
        if sampled:
            out["n_rows_sampled"] = n
        return tree, out

    def release(self) -> None:
        self.grower.release_buffers()


class TrainLoss:
    """The train set's evaluator: the loss over all rows, from the shards' sums."""

    def __init__(self, step: DistributedStep, metrics: str):
        self.step, self.metrics = step, metrics

    def record(self, rec: dict) -> None:
        if not records(self.metrics, "loss"):
            return
        rec["train_loss"] = self.step.train_loss()


class DistributedPlan:
    """The :class:`gbfs.booster.rounds.Rounds` plan of single-task boosting on shards (the records of
    :class:`gbfs.booster.boosting.SingleTask`)."""

    def __init__(self, step: DistributedStep, usage, train_metrics: str):
        self.step, self.usage = step, usage
        self.slots = [Slot(step, usage)]
        self.evaluators = [TrainLoss(step, train_metrics)]

    def start_round(self) -> None:
        pass

    def record(self, it: int, seconds: float, stats: list[dict]) -> dict:
        return tree_record(it, seconds, stats[0], self.usage)

    def release(self) -> None:
        # the last tree's scores are not sent: nothing reads them after the fit (and a fit ended
        # by an error must not ask the shards again)
        self.step.release()


def init_score(group: ShardGroup, loss) -> float:
    """The loss's initial score from the labels' sum over all shards.

    Both pointwise losses start from the mean label (the logistic loss from its log-odds), so the
    loss's own ``init_score`` of a one-element array holding that mean is the single-process value;
    0/1 labels sum exactly, so a classifier's is the same float."""
    return float(loss.init_score(np.array([fold(group.call("label_sum")) / group.n_rows])))


def boost(group: ShardGroup, bin_mapper, params: BoostingParams, usage, callbacks=(), model=None,
          search: FeatureSearch | None = None, seed: tuple = (0,)) -> tuple[BoostingResult, dict]:
    """:func:`gbfs.booster.boosting.boost` on shards: ``params.n_estimators`` trees against ``usage``
    (``seed``: the row samples'); also returns the communication: histogram bytes and requests."""
    step = DistributedStep(group, bin_mapper, params, init_score(group, params.loss), search, seed)
    (trees,), history, best_iteration = run_rounds(DistributedPlan(step, usage, params.train_metrics),
                                                   params, callbacks, model)
    comm = {"histogram_bytes": step.source.bytes, "histogram_requests": step.source.requests}
    return BoostingResult(trees, step.init_score, history, best_iteration), comm


def refit(group: ShardGroup, bin_mapper, columns: np.ndarray, params: BoostingParams, callbacks=(),
          model=None, seed: tuple = (0,)) -> tuple[BoostingResult, dict]:
    """:func:`gbfs.criteria.refit.refit` on shards: the shards keep ``columns`` only, an unpenalised
    booster grows on them, and its trees are mapped back to the original features."""
    columns = np.asarray(columns, dtype=np.int64)
    sub = bin_mapper.subset(columns)
    group.call("restrict", columns, sub.n_bins_non_missing_)
    result, comm = boost(group, sub, refit_params(params), FeatureUsage(columns.shape[0], 0.0), callbacks,
                         model, seed=seed)
    for t in result.trees:
        inner = t.feature >= 0
        t.feature[inner] = columns[t.feature[inner]].astype(t.feature.dtype)
    return result, comm


@dataclasses.dataclass
class ShardFit:
    """What a fit on shards found (as :class:`gbfs.estimators.fitting.Fitted`), and its traffic."""

    result: BoostingResult
    selection: np.ndarray | None
    selection_history: list | None
    comm: dict


def group_tests(est, group: ShardGroup, bin_mapper, params: BoostingParams, seed: int, plan=None):
    """GT-GBM's search on shards: the subsets drawn from the fit's seed as one process draws them
    (:func:`gbfs.estimators.fitting.prepare`), each shard's precompute of its rows, the search of
    ``params.group_test_scope`` with the group-test row samples' stream of
    :func:`gbfs.estimators.fitting.select` (``plan``: the subsets' plan, by default the
    estimator's for every row)."""
    d = int(bin_mapper.n_edges_.shape[0])
    plan = est._group_test_plan(group.n_rows, d) if plan is None else plan
    subsets = draw_subsets(plan, d, np.random.default_rng([seed, 1]))
    group.call("gt_precompute", bin_mapper.standardised_values_, subsets)
    rng = np.random.default_rng([seed, 2])  # the group tests' row samples
    return gt.SCOPES[params.group_test_scope](subsets, params.group_test_rows, rng)


def fit(est, group: ShardGroup, bin_mapper, params: BoostingParams, costs, bags, callbacks=(),
        seed: int = 0, plan=None) -> ShardFit:
    """The selection fit, then the relaxed refit or GBDT-topK's refit, as
    :func:`gbfs.estimators.fitting.fit_prepared` runs them in one process (``seed``: the fit's, which
    seeds the row samples; ``plan``: GT-GBM's, as :func:`group_tests`)."""
    d = int(bin_mapper.n_edges_.shape[0])
    plain = params.method.ranks  # GBDT-topK ranks an unpenalised fit on every feature
    search = group_tests(est, group, bin_mapper, params, seed, plan) if params.method.group_tests else None
    usage = FeatureUsage(d, 0.0 if plain else float(est.mu), costs, bags, None if plain else est.max_features,
                         None if plain else est.max_cost, anneal_of(est))
    select_params = params if not plain else dataclasses.replace(
        params, method=METHODS["gbfs"], stop_when_full=False, selection_patience=None)
    result, comm = boost(group, bin_mapper, select_params, usage, callbacks, est, search, seed=(seed, 3))
    selection = None
    if plain:
        selection = top_k(result.trees, d, est.max_features, est.importance_type, costs, est.max_cost)
    elif est.refit:
        selection = np.asarray(usage.order, dtype=np.int64)
    if selection is not None and selection.size:
        selection_history = result.history
        result, more = refit(group, bin_mapper, selection, params, callbacks, est, seed=(seed, 4))
        comm = {k: comm[k] + more[k] for k in comm}
        return ShardFit(result, selection, selection_history, comm)
    return ShardFit(result, selection, result.history if selection is not None else None, comm)
