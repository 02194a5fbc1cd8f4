"""gbfs: feature-selecting gradient boosting (GBFS, A-GBM) on a numba histogram learner."""

from .estimators import GBFSClassifier, GBFSRegressor
from .model_io import load_model
from .path import SelectionPath, selection_path
from .stability import selection_stability

__version__ = "0.1.0"
__all__ = ["GBFSClassifier", "GBFSRegressor", "SelectionPath", "load_model", "selection_path",
           "selection_stability", "__version__"]
