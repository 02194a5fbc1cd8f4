"""gbfs: feature-selecting gradient boosting (GBFS, A-GBM, GT-GBM) on a numba histogram learner, with
hard feature budgets, a selection path over budgets, relaxed refits and selection stability."""

from .estimators import GBFSClassifier, GBFSRegressor
from .model_io import load_model
from .multitask import GBFSMultitaskClassifier, GBFSMultitaskRegressor
from .path import SelectionPath, selection_path
from .stability import selection_stability

__version__ = "0.1.0"
__all__ = ["GBFSClassifier", "GBFSMultitaskClassifier", "GBFSMultitaskRegressor", "GBFSRegressor",
           "SelectionPath", "load_model", "selection_path",
           "selection_stability", "__version__"]
