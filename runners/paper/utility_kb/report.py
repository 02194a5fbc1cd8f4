"""The Koepke-Bilenko paper's Figures 1 and 2 and claims from the tables of
:mod:`runners.paper.utility_kb.experiments` (nothing here fits a model)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from runners.paper import claims as paper_claims  # noqa: E402
from runners.paper.utility_kb.experiments import per_feature  # noqa: E402

ALPHA = 0.05
#: bootstrap draws of the features behind a rank correlation's standard error
N_DRAWS = 1000
HEURISTICS = {"chi2": "chi-squared", "info_gain_ratio": "information gain ratio", "cfs": "CFS"}

NOT_HERE = """\
- **ADULT, HOUSING, WEBSEARCH** are not on this machine (no download here; WEBSEARCH is
  proprietary); scikit-learn's bundled breast-cancer (classification, log-loss) and diabetes
  (regression, squared loss) sets stand in, with the paper's protocol.
- **Ranking (NDCG, LambdaMART's lambda gradients)**: not run -- the utility test accepts
  classifiers and regressors; extending it to `GBFSRanker`'s lambda gradients is not built yet."""


def _pct(v: np.ndarray) -> np.ndarray:
    """Values as a percentage of their range (the paper's axes: the largest at 100 %)."""
    lo, hi = float(np.min(v)), float(np.max(v))
    return 100 * (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)


def plot(feats: pd.DataFrame, heur: pd.DataFrame, path: Path) -> Path:
    """Figure 1 (predicted vs actual, per data set) and Figure 2 (each heuristic vs actual)."""
    names = list(dict.fromkeys(feats.dataset))
    panels = len(names) + len(HEURISTICS) * heur.dataset.nunique()
    fig, axes = plt.subplots(1, panels, figsize=(3.4 * panels, 3.3), squeeze=False)
    ax_iter = iter(axes[0])
    for name in names:
        g, ax = feats[feats.dataset == name], next(ax_iter)
        sig = g.p_actual < ALPHA
        ax.scatter(_pct(g.actual.to_numpy())[sig], _pct(g.predicted_z.to_numpy())[sig], c="tab:red",
                   s=14, label="actual gain significant")
        ax.scatter(_pct(g.actual.to_numpy())[~sig], _pct(g.predicted_z.to_numpy())[~sig], c="0.5", s=14,
                   label="not significant")
        ax.set(title=f"{name}: utility test", xlabel="actual utility (% of range)",
               ylabel="predicted (% of range)")
        ax.legend(fontsize=6)
    for name, h in heur.groupby("dataset"):
        actual = feats[feats.dataset == name].set_index("feature").actual.reindex(h.feature).to_numpy()
        for key, label in HEURISTICS.items():
            ax = next(ax_iter)
            ax.scatter(_pct(actual), _pct(h[key].to_numpy()), s=14, c="tab:blue")
            ax.set(title=f"{name}: {label}", xlabel="actual utility (% of range)",
                   ylabel="score (% of range)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def rank_gap(test: np.ndarray, heuristic: np.ndarray, actual: np.ndarray,
             seed: int = 0) -> paper_claims.Verdict:
    """Spearman(test, actual) - Spearman(heuristic, actual), decided like a paired claim: its standard
    error from :data:`N_DRAWS` bootstrap draws of the features (seeded), "holds" beyond two of them."""
    def gap(idx: np.ndarray) -> float:
        return (stats.spearmanr(test[idx], actual[idx]).statistic
                - stats.spearmanr(heuristic[idx], actual[idx]).statistic)

    n = len(actual)
    diff = gap(np.arange(n))
    rng = np.random.default_rng(seed)
    draws = np.array([gap(rng.integers(0, n, n)) for _ in range(N_DRAWS)])
    return paper_claims.decide(float(diff), float(np.nanstd(draws, ddof=1)), n)


def claims(feats: pd.DataFrame, heur: pd.DataFrame) -> list[str]:
    """The paper's Section 5.3 claims, as far as these tables decide them."""
    lines = []
    for name, g in feats.groupby("dataset", sort=False):
        useful, flagged = g.p_actual < ALPHA, g.p_predicted < ALPHA
        missed = int((useful & ~flagged).sum())
        rho = stats.spearmanr(g.predicted_z, g.actual).statistic
        lines.append(f"- {name}: every feature the test calls insignificant gives no significant actual gain "
                     f"(the paper's \"very high recall\"; a count, no standard error): "
                     f"{'true' if missed == 0 else 'false'} "
                     f"({int(useful.sum())} feature(s) with a significant gain, {missed} of them missed; "
                     f"{int(flagged.sum())} flagged, {int((flagged & ~useful).sum())} of those without a "
                     f"significant gain); Spearman rank correlation of z with the actual utility {rho:+.2f}")
    for name, h in heur.groupby("dataset"):
        g = feats[feats.dataset == name].set_index("feature").reindex(h.feature)
        z, actual = g.predicted_z.to_numpy(), g.actual.to_numpy()
        rho_test = stats.spearmanr(z, actual).statistic
        for key, label in HEURISTICS.items():
            score = h[key].to_numpy(dtype=np.float64)
            v = rank_gap(z, score, actual)
            lines.append(f"- {name}: the test ranks the features closer to their actual utility than "
                         f"{label}: {v.bold} (Spearman {rho_test:+.2f} against "
                         f"{stats.spearmanr(score, actual).statistic:+.2f}; the gap {v.diff:+.2f} is "
                         f"{v.diff / v.se:+.1f} standard errors over {N_DRAWS} bootstrap draws of the "
                         f"{v.n} features)")
    return lines


def write(frames: Mapping[str, pd.DataFrame], meta: Mapping, folder: Path) -> list[Path]:
    """``folds.csv``, ``features.csv``, ``heuristics.csv``, ``figures.png`` and ``README.md``."""
    folder.mkdir(parents=True, exist_ok=True)
    folds, heur = frames["folds"], frames["heuristics"]
    feats = per_feature(folds)
    paths = []
    for name, df in (("folds", folds), ("features", feats), ("heuristics", heur)):
        df.to_csv(folder / f"{name}.csv", index=False, float_format="%.6g")
        paths.append(folder / f"{name}.csv")
    paths.append(plot(feats, heur, folder / "figures.png"))
    s = meta["settings"]
    text = [
        "# The Koepke-Bilenko paper (ICML 2012), Section 5", "",
        f"Made by `{meta['command']}` at commit `{meta['commit']}` on {meta['date']} "
        f"({meta['seconds']:.0f} s); settings: `{s}`.", "",
        "| data set | rows x features | task | the paper's |", "| --- | --- | --- | --- |",
        *[f"| {n} | {r} x {d} | {t} | {p} |" for n, (r, d, t, p) in meta["datasets"].items()], "",
        f"Figure 1 and 2: `figures.png`; per feature (`features.csv`): the actual utility (mean loss "
        f"change without it over {s['folds']} folds, with its one-sided p-value over the folds) and the "
        "test's combined z and p-value; per fold: `folds.csv`.", "",
        *claims(feats, heur), "", "## Not run here", "", NOT_HERE, "",
    ]
    (folder / "README.md").write_text("\n".join(text))
    return [folder / "README.md", *paths]
