"""gbfs: feature-selecting gradient boosting (GBFS, A-GBM) on a numba histogram learner."""

from .estimators import GBFSClassifier, GBFSRegressor
from .model_io import load_model

__version__ = "0.1.0"
__all__ = ["GBFSClassifier", "GBFSRegressor", "load_model", "__version__"]
