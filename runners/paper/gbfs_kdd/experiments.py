"""The GBFS paper's experiments (Section 5) on the data this machine has, each returning a long table.

* :func:`figure1` -- the synthetic three-feature data (:func:`gbfs.data.synthetic.generators.
  make_gbfs_figure1`): L1-LR and GBFS, each tuned on a hold-out split of the training rows.
* :func:`figure2` -- feature bags on gene-expression data: the paper's Colon set (62 x 2000 genes in
  9 biological clusters) is not on this machine; TOX-171 (171 x 5748) stands in, its 2000 genes of
  highest minimal intensity (the Colon set's own preprocessing) clustered into 9 bags of correlated
  genes by scikit-learn's ``FeatureAgglomeration``.  L1-LR, RF-FS, HSIC Lasso, GBFS without and with
  the bags, over random 80/20 splits.
* :func:`curves` -- Figures 3 and 6: error against the number of selected features for L1-LR, RF-FS,
  mRMR, HSIC Lasso and GBFS; on one data set (``svm_dataset``) every selector's features also feed
  an RBF-SVM (Figure 5).

Data sets (binary, as the paper's): ``digits`` (scikit-learn's 8x8 digits, 5-9 vs 0-4; the paper's
uspst), ``digits_3v8`` (3 vs 8; its mnist3vs8), ``breast_cancer`` (scikit-learn's; small ``d`` as
its spam), ``isolet`` (A-M vs N-Z, its isolet), ``tox171`` (the largest class vs the rest; ``d >> n``
as its SMK-CAN-187), read by :mod:`runners.bench.selection.data`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold

from gbfs.criteria.bags import CorrelationBags
from gbfs.data.synthetic.generators import make_gbfs_figure1
from runners.bench.selection import data as bench_data
from runners.bench.selection.families import l1_logistic
from runners.paper.gbfs_kdd import selectors as S

log = logging.getLogger(__name__)


def digits_3v8(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    return X[keep], (y[keep] == 8).astype(np.int64)


#: name -> loader(data_dir) -> (X, y) of a binary task
DATASETS: dict[str, Callable[[Path], tuple[np.ndarray, np.ndarray]]] = {
    **{n: bench_data.DATASETS[n] for n in ("digits", "breast_cancer", "isolet", "tox171")},
    "digits_3v8": digits_3v8,
}
#: the paper's data set each one stands for
ANALOGUE = {"digits": "uspst", "digits_3v8": "mnist3vs8", "breast_cancer": "spam", "isolet": "isolet",
            "tox171": "SMK-CAN-187 (Figure 6), Colon (Figure 2)"}


def load(name: str, data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of ``name``; raises ``ValueError`` naming the known sets, ``FileNotFoundError``
    when a real set is not on disk."""
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; known: {sorted(DATASETS)}")
    X, y = DATASETS[name](data_dir)
    return np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.int64)


def _loss(model, v: S.Split) -> float:
    return float(log_loss(v.y_test, model.predict_proba(v.X_test), labels=model.classes_))


def l1_chosen(s: S.Split, Cs) -> dict:
    """L1-LR with ``C`` chosen by the validation split's log-loss, refitted on the training rows."""
    v = S.validation(s)
    C = min(Cs, key=lambda c: (_loss(l1_logistic(c, s.seed).fit(v.X_train, v.y_train), v), c))
    return S.l1_points(s, [C])[0]


def gbfs_chosen(s: S.Split, mus, booster: dict, bags: np.ndarray | None = None,
                method: str = "GBFS") -> dict:
    """GBFS with ``mu`` chosen by the validation split's log-loss (the error of a few dozen rows ties
    too often and would pick the empty model); the chosen model is the one fitted for the choice,
    its trees early-stopped on that split."""
    v = S.validation(s)
    fits = []
    for mu in mus:
        est = S.gbfs_fit(s, mu, booster, bags)
        fits.append((_loss(est, v), mu, est))
    _, mu, est = min(fits, key=lambda f: f[:2])
    return S.point(method, mu, est.selected_features_, float(np.mean(est.predict(s.X_test) != s.y_test)))


def _cv_choice(s: S.Split, candidates, fit, folds: int):
    """The candidate whose models ``fit(candidate, fold_split)`` have the lowest log-loss summed over
    stratified ``folds``-fold cross-validation of the training rows (ties: the first)."""
    cv = StratifiedKFold(folds, shuffle=True, random_state=s.seed).split(s.X_train, s.y_train)
    losses = np.zeros(len(candidates))
    for tr, va in cv:
        v = S.Split(s.X_train[tr], s.y_train[tr], s.X_train[va], s.y_train[va], s.seed)
        losses += [_loss(fit(c, v), v) for c in candidates]
    return candidates[int(np.argmin(losses))]


def gbfs_cv_chosen(s: S.Split, mus, booster: dict, bags: np.ndarray | None = None,
                   method: str = "GBFS", folds: int = 3) -> dict:
    """GBFS with ``mu`` chosen by stratified ``folds``-fold cross-validated log-loss on the training
    rows (few rows: one validation split of a few dozen would decide by noise; L1-LR's ``C`` is
    chosen the same way), then fitted on them with :func:`selectors.gbfs_fit`."""
    def fit(mu, v: S.Split):
        model = S.gbfs_model(mu, booster, s.seed, bags)
        return model.fit(v.X_train, v.y_train, eval_set=[(v.X_test, v.y_test)])

    mu = _cv_choice(s, mus, fit, folds)
    est = S.gbfs_fit(s, mu, booster, bags)
    return S.point(method, mu, est.selected_features_, float(np.mean(est.predict(s.X_test) != s.y_test)))


def figure1(cfg: Mapping) -> pd.DataFrame:
    """Figure 1 (Section 5.1): per shape and seed, the features L1-LR and GBFS select and their test
    error on a 90/10 split."""
    rows = []
    for shape in cfg["shapes"]:
        for seed in range(int(cfg["seeds"])):
            X, y = make_gbfs_figure1(int(cfg["n"]), shape, random_state=seed)
            s = S.split(X, y, 0.1, seed)
            for p in (l1_chosen(s, cfg["Cs"]), gbfs_chosen(s, cfg["mus"], dict(cfg["booster"]))):
                rows.append({"shape": shape, "seed": seed, **p})
    return pd.DataFrame(rows)


def gene_bags(X: np.ndarray, n_genes: int, n_bags: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_genes`` columns of highest minimal value (Alon et al.'s preprocessing of the Colon
    set) and their bag of correlated columns (:class:`gbfs.criteria.bags.CorrelationBags`: Ward
    linkage on the standardised columns; unsupervised, no label seen)."""
    genes = np.sort(np.argsort(-X.min(axis=0), kind="stable")[:n_genes])
    return genes, CorrelationBags(n_bags).bags(X[:, genes])


def _l1_cv(s: S.Split, Cs) -> dict:
    """L1-LR with ``C`` chosen by stratified 3-fold cross-validated log-loss (few rows), refitted."""
    C = _cv_choice(s, Cs, lambda c, v: l1_logistic(c, s.seed).fit(v.X_train, v.y_train), 3)
    return S.l1_points(s, [C])[0]


def figure2(cfg: Mapping, data_dir: Path) -> tuple[pd.DataFrame, np.ndarray]:
    """Figure 2 (Section 5.2): per split, each method's features, the bags they touch and the test
    error; also returns the bag of every kept gene."""
    X, y = load(cfg["dataset"], data_dir)
    genes, bags = gene_bags(X, int(cfg["genes"]), int(cfg["bags"]))
    X, k, booster = X[:, genes], int(cfg["k"]), dict(cfg["booster"])
    rows = []
    for seed in range(int(cfg["seeds"])):
        s = S.split(X, y, 0.2, seed)
        order = S.rf_order(s, int(cfg["rf_trees"]), int(cfg["threads"]))[:k]
        hsic = S.hsic_order(s, k)
        points = [
            _l1_cv(s, cfg["Cs"]),
            S.point("RF-FS", k, order, S.error(S.forest(int(cfg["rf_trees"]), seed, int(cfg["threads"])),
                                               s, order)),
            S.point("HSIC Lasso", k, hsic, S.svm_error(s, hsic, int(cfg["svm_splits"]))),
            gbfs_cv_chosen(s, cfg["mus"], booster),
            gbfs_cv_chosen(s, cfg["mus"], booster, bags, method="GBFS (bags)"),
        ]
        for p in points:
            used = np.array(p["features"].split(), dtype=np.int64)
            rows.append({"seed": seed, **p, "n_bags": len(np.unique(bags[used]))})
        log.info("figure 2: split %d of %d", seed + 1, cfg["seeds"])
    return pd.DataFrame(rows), bags


def _curve_points(s: S.Split, cfg: Mapping, d: int) -> list[dict]:
    """Every selector's curve on one split (the paper's Figure 3 protocol)."""
    ks = sorted({min(int(k), d) for k in cfg["ks"]})
    threads, trees, svm_splits = int(cfg["threads"]), int(cfg["rf_trees"]), int(cfg["svm_splits"])
    svm = lambda: S.svm(s.seed, svm_splits)  # noqa: E731  (a fresh model per point)
    points = S.l1_points(s, cfg["Cs"])
    points += S.ranking_points("RF-FS", s, S.rf_order(s, trees, threads), ks,
                               lambda: S.forest(trees, s.seed, threads))
    # mRMR's mutual information and HSIC Lasso's kernels (d x n x 60 doubles) grow with rows x
    # features: each runs where it stays below its cap (the paper's did not scale either)
    cells = d * len(s.y_train)
    if cells <= int(cfg["mrmr_max_cells"]):
        points += S.ranking_points("mRMR", s, S.mrmr_order(s, max(ks), threads), ks, svm)
    if cells <= int(cfg["hsic_max_cells"]):
        points += S.ranking_points("HSIC Lasso", s, S.hsic_order(s, max(ks)), ks, svm)
    points += S.gbfs_points(s, cfg["mus"], dict(cfg["booster"]))
    return points


def curves(cfg: Mapping, data_dir: Path, datasets) -> pd.DataFrame:
    """Figures 3, 5 and 6: per data set and seed, every selector's points; on ``cfg["svm_dataset"]``
    each point's features also feed the tuned RBF-SVM (column ``svm_error``; mRMR's and HSIC
    Lasso's own errors are already the SVM's)."""
    rows = []
    for i, name in enumerate(datasets):
        X, y = load(name, data_dir)
        for seed in range(int(cfg["seeds"])):
            s = S.split(X, y, float(cfg["test_fraction"]), seed)
            for p in _curve_points(s, cfg, X.shape[1]):
                svm_err = np.nan
                if name == cfg["svm_dataset"]:
                    svm_err = p["error"] if p["method"] in ("mRMR", "HSIC Lasso") else S.svm_error(
                        s, [int(f) for f in p["features"].split()], int(cfg["svm_splits"]))
                rows.append({"dataset": name, "seed": seed, **p, "svm_error": svm_err})
        log.info("figures 3/6: %s done (%d of %d)", name, i + 1, len(datasets))
    return pd.DataFrame(rows)


def compute(cfg: Mapping, data_dir: Path) -> tuple[dict[str, pd.DataFrame], dict]:
    """Every experiment of the part: ``({"figure1", "figure2", "curves"}: tables, meta)``; ``cfg`` is
    ``reproduce.scales.<scale>.gbfs`` (the figures' settings, each with the shared ``seeds``,
    ``booster``, ``mus``, ``Cs``, ``threads`` ... merged in).  Data sets that are not on disk are
    left out of the curves with a line."""
    shared = {k: v for k, v in cfg.items() if k not in ("figure1", "figure2", "curves")}
    sets = {}
    for name in [*cfg["curves"]["datasets"], *cfg["curves"]["wide"]]:
        try:
            X, _ = load(name, data_dir)
        except FileNotFoundError as err:
            print(f"GBFS paper: skipping {name}: {err}")
            continue
        sets[name] = (X.shape[0], X.shape[1], ANALOGUE[name])
    f2_cfg = {**shared, **cfg["figure2"]}
    try:
        figure2_table, bags = figure2(f2_cfg, data_dir)
    except FileNotFoundError as err:
        print(f"GBFS paper: Figure 2 skipped: {err}")
        figure2_table = pd.DataFrame(columns=["seed", "method", "param", "n_features", "error", "features",
                                              "n_bags"])
        bags = np.zeros(0, dtype=np.int64)
    curves_cfg = {**shared, **cfg["curves"]}
    meta = {
        "bags": bags.tolist(), "wide": [n for n in cfg["curves"]["wide"] if n in sets],
        "svm_dataset": cfg["curves"]["svm_dataset"], "datasets": sets,
        "figure2": (f"{f2_cfg['dataset']}: the {f2_cfg['genes']} genes of highest minimal intensity in "
                    f"{f2_cfg['bags']} bags of correlated genes; {f2_cfg['seeds']} random 80/20 splits; "
                    f"RF-FS and HSIC Lasso take {f2_cfg['k']} genes (RF-FS a forest on them, HSIC "
                    "Lasso an RBF-SVM), L1-LR's C and GBFS's mu by 3-fold cross-validated "
                    "log-loss on the training rows."),
    }
    frames = {"figure1": figure1({**shared, **cfg["figure1"]}), "figure2": figure2_table,
              "curves": curves(curves_cfg, data_dir, list(sets))}
    return frames, meta
