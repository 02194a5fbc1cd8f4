"""gbfs: feature-selecting gradient boosting (GBFS, A-GBM, GT-GBM) on a numba histogram learner, with
hard feature budgets, a selection path over budgets, relaxed refits and selection stability."""

from ._threading import configure_waiting

configure_waiting()  # before numba starts its OpenMP threads (gbfs._threading)

from .estimators.model_io import load_model  # noqa: E402
from .estimators.multitask import GBFSMultitaskClassifier, GBFSMultitaskRegressor  # noqa: E402
from .estimators.ranker import GBFSRanker  # noqa: E402
from .estimators.single_task import GBFSClassifier, GBFSRegressor  # noqa: E402 (after configure_waiting)
from .plotting import plot_importance, plot_metric  # noqa: E402
from .selection.feature_utility import feature_utility  # noqa: E402
from .selection.path import SelectionPath, selection_path  # noqa: E402
from .selection.stability import selection_stability  # noqa: E402

__version__ = "0.1.0"
__all__ = ["GBFSClassifier", "GBFSMultitaskClassifier", "GBFSMultitaskRegressor", "GBFSRanker",
           "GBFSRegressor", "SelectionPath", "feature_utility", "load_model", "plot_importance",
           "plot_metric", "selection_path", "selection_stability", "__version__"]
