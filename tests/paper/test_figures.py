"""The figures of :mod:`runners.tracking.figures` (GT-GBM paper, Figures 2 and 3) and their correlations."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from runners.core import experiment
from runners.tracking import figures

pytestmark = pytest.mark.filterwarnings("error")    # no RuntimeWarning may leak


def _naive_correlation(X: np.ndarray, cols: list[int]) -> np.ndarray:
    k = len(cols)
    out = np.eye(k)
    for a in range(k):
        for b in range(k):
            x, y = X[:, cols[a]].astype(np.float64), X[:, cols[b]].astype(np.float64)
            if a != b and np.ptp(x) > 0 and np.ptp(y) > 0:
                out[a, b] = np.corrcoef(x, y)[0, 1]
    return out


@pytest.fixture
def data() -> np.ndarray:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6)).astype(np.float32)
    X[:, 2] = 0.1                               # constant, and 0.1 is not exact in binary
    X[:, 4] = X[:, 0] + 0.3 * X[:, 4]           # correlated with column 0
    return X


def test_correlation_matrix_equals_naive_per_pair(data):
    cols = [4, 2, 0, 5, 1]
    corr = figures.correlation_matrix(data, cols)
    assert corr.dtype == np.float64 and corr.shape == (5, 5)
    np.testing.assert_allclose(corr, _naive_correlation(data, cols), atol=1e-12)
    assert not np.isnan(corr).any()
    assert np.all(corr[1, [0, 2, 3, 4]] == 0) and np.all(corr[[0, 2, 3, 4], 1] == 0)
    np.testing.assert_array_equal(np.diag(corr), 1.0)
    assert corr[0, 2] > 0.9


def test_correlation_matrix_degenerate_inputs(data):
    assert figures.correlation_matrix(data, []).shape == (0, 0)
    np.testing.assert_array_equal(figures.correlation_matrix(data, [3]), [[1.0]])
    np.testing.assert_array_equal(figures.correlation_matrix(data[:1], [0, 1]), np.eye(2))
    X = data.astype(np.float64)
    X[:, 1] *= 1e300                            # would overflow if squared unscaled
    X[5, 3] = np.nan
    corr = figures.correlation_matrix(X, [0, 1, 3])
    np.testing.assert_allclose(corr[:2, :2], _naive_correlation(data, [0, 1]), atol=1e-6)
    np.testing.assert_array_equal(corr[2], [0.0, 0.0, 1.0])
    # a constant column whose mean is not exact (the centred column is ~1e-17, not 0)
    X = np.column_stack([np.sin(np.arange(37.0)), np.full(37, 1 / 3)])
    assert np.abs(X[:, 1] - X[:, 1].mean()).max() > 0
    np.testing.assert_array_equal(figures.correlation_matrix(X, [0, 1]), np.eye(2))


def test_mean_abs_correlation_by_hand():
    X = np.array([[1.0, 2.0, 3.0], [2.0, 1.0, 1.0], [3.0, 4.0, 2.0], [4.0, 3.0, 5.0]])
    r = np.corrcoef(X, rowvar=False)
    expected = (abs(r[0, 1]) + abs(r[0, 2]) + abs(r[1, 2])) / 3
    assert figures.mean_abs_correlation(X, [0, 1, 2]) == pytest.approx(expected, abs=1e-12)
    assert math.isnan(figures.mean_abs_correlation(X, [1]))
    assert math.isnan(figures.mean_abs_correlation(X, []))


CURVES = {
    "GT-GBM": {"root_variance": [(0.01, 0.25), (0.1, 0.2), (1.0, 0.1)],
               "val_rmse": [(0.01, 0.5), (0.1, 0.4), (1.0, 0.35)],
               "val_auc": [(0.01, 0.6), (0.1, 0.7), (1.0, 0.8)]},
    "GBDT-topK": {"val_rmse": [(0.0, 0.5), (2.0, 0.38)], "val_auc": [(0.0, 0.6), (2.0, 0.79)]},
    "L1": {"val_auc": [(0.5, 0.7), (0.6, 0.75)], "root_variance": []},
}


def test_figure2_panels():
    fig = figures._figure2(CURVES, "a dataset")
    try:
        axes = fig.axes
        assert len(axes) == 3
        for ax, words in zip(axes, ("root variance", "RMSE", "AUC")):
            assert words in ax.get_title()
            assert "time" in ax.get_xlabel()
        assert [len(ax.get_lines()) for ax in axes] == [1, 2, 3]
        assert [ax.get_xscale() for ax in axes] == ["log", "log", "log"]
        colours = {line.get_label(): line.get_color() for ax in axes for line in ax.get_lines()}
        for ax in axes:                          # one colour per method across the panels
            assert all(line.get_color() == colours[line.get_label()] for line in ax.get_lines())
        assert len(set(colours.values())) == 3
        assert len(fig.legends) == 1
    finally:
        plt.close(fig)


def test_figure2_empty_panel_and_linear_axis(tmp_path):
    curves = {"a": {"val_auc": [(1.0, 0.6), (5.0, 0.7)]}}
    fig = figures._figure2(curves, "t")
    try:
        texts = [[t.get_text() for t in ax.texts] for ax in fig.axes]
        assert texts == [["no curve logged"], ["no curve logged"], []]
        assert fig.axes[2].get_xscale() == "linear"
    finally:
        plt.close(fig)
    path = figures.figure2(curves, tmp_path / "new" / "fig2.png", "t")
    assert path == tmp_path / "new" / "fig2.png"
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_figure2_writes_png(tmp_path):
    path = figures.figure2(CURVES, tmp_path / "fig2.png", "a dataset")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_figure3_two_heatmaps(tmp_path, data):
    names = [f"f{j}" for j in range(data.shape[1])]
    fig, m_left, m_right = figures._figure3(data, [0, 4, 2], [1, 3, 5, 0], names, ("topK", "GT-GBM"), "t")
    try:
        heatmaps = [ax for ax in fig.axes if ax.images]
        assert len(heatmaps) == 2
        assert [ax.images[0].get_array().shape for ax in heatmaps] == [(3, 3), (4, 4)]
        assert "topK" in heatmaps[0].get_title() and "3 features" in heatmaps[0].get_title()
        assert f"mean |r| off-diagonal = {m_left:.3f}" in heatmaps[0].get_title()
        assert [t.get_text() for t in heatmaps[1].get_xticklabels()] == ["f1", "f3", "f5", "f0"]
        assert all(ax.images[0].get_clim() == (0.0, 1.0) for ax in heatmaps)
    finally:
        plt.close(fig)
    assert m_left == figures.mean_abs_correlation(data, [0, 4, 2])
    means = figures.figure3(data, [0, 4, 2], [1, 3, 5, 0], names, ("topK", "GT-GBM"),
                            tmp_path / "fig3.png", "t")
    assert means == (figures.mean_abs_correlation(data, [0, 4, 2]),
                     figures.mean_abs_correlation(data, [1, 3, 5, 0]))
    assert (tmp_path / "fig3.png").read_bytes()[:4] == b"\x89PNG"


def test_figure3_side_without_pairs(tmp_path, data):
    names = [f"f{j}" for j in range(data.shape[1])]
    fig, m_left, m_right = figures._figure3(data, [0, 1], [3], names, ("topK", "GT-GBM"), "t")
    try:
        left, right = fig.axes[:2]
        assert len(left.images) == 1 and not right.images
        assert right.texts and "no pairs" in right.texts[0].get_text()
    finally:
        plt.close(fig)
    assert m_left == figures.mean_abs_correlation(data, [0, 1]) and math.isnan(m_right)
    m = figures.figure3(data, [], [3], names, ("topK", "GT-GBM"), tmp_path / "fig3.png", "t")
    assert all(math.isnan(v) for v in m)
    assert (tmp_path / "fig3.png").read_bytes()[:4] == b"\x89PNG"


def test_correlation_heatmap_still_in_experiment(tmp_path, data):
    assert experiment.correlation_heatmap is figures.correlation_heatmap
    names = [f"f{j}" for j in range(data.shape[1])]
    path = experiment.correlation_heatmap(data, [0, 2, 4], names, tmp_path / "c.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
