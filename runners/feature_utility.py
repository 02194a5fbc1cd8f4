"""Would a feature the model lacks help it?  ``python -m runners.feature_utility dataset=... method=...``

``main`` only calls :func:`run`, importable, which returns the metrics.  It fits ``cfg.method`` (a
gbfs estimator) on ``cfg.dataset``'s train split without the held-back features
(``utility.features``, or a seeded draw of ``utility.n_relevant`` truly relevant and
``utility.n_irrelevant`` other columns of a synthetic stand-in), early stopping on validation, then
tests every held-back feature with :func:`gbfs.selection.feature_utility` (Koepke & Bilenko, ICML 2012,
Algorithm 1) on ``utility.rows`` (the test split by default: rows the model never saw, as the
paper's bias bound of Section 4.2 asks).  Prints a table -- feature, z (the utility score), p,
significant (p <= ``utility.alpha``) and, where the data knows it, whether the feature is truly
relevant -- and logs one MLflow run (experiment ``feature-utility``): the flattened config as
params, the counts and the model's AUC on the tested rows as metrics, ``z.<feature>`` and
``p.<feature>`` per feature, and the table as ``feature_utility.csv``.

A relevant feature that enters the label only through an interaction with a feature the model
has (the stand-ins' paired columns) carries no marginal signal for the test to find: the paper's
XOR caveat (Section 4), which testing such features together with their partner (``joint``) would
address.  The test's run is :mod:`runners.paper.utility_kb.held_back`'s.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from runners.paper.utility_kb.held_back import hold_back_and_test
from runners.tracking import runs as tracking


def run(cfg: DictConfig) -> dict[str, float]:
    """Hold back, fit, test, print and log (one MLflow run); return the metrics.  Raises what
    :func:`runners.paper.utility_kb.held_back.hold_back_and_test` raises (a ``ValueError`` on a bad
    ``utility.*``, dataset, ``seed`` or ``tracking.uri`` setting, before any MLflow run)."""
    return hold_back_and_test(cfg)


@hydra.main(version_base="1.3", config_path="../conf", config_name="feature_utility")
def main(cfg: DictConfig) -> float | None:
    with tracking.sigterm_as_interrupt():   # SIGTERM ends the run KILLED, then exits with status 143
        return run(cfg)["n_significant"]


if __name__ == "__main__":
    main()
