"""Growing one tree: the best-first grower, the row partition, and the feature search of a node
(which features its split search scans, numeric and categorical).
"""

from __future__ import annotations

import numpy as np

from .exact import ExactGrower
from .feature_search import FeatureSearch
from .grower import GrowthParams, TreeGrower


def _histogram(X_binned, X, bin_mapper, params: GrowthParams, search: FeatureSearch | None) -> TreeGrower:
    return TreeGrower(X_binned, bin_mapper, params, search)


def _exact(X_binned, X, bin_mapper, params: GrowthParams, search: FeatureSearch | None) -> TreeGrower:
    if X is None:
        raise ValueError("split_search='exact' needs the raw training values X")
    return ExactGrower(X_binned, X, bin_mapper, params, search)


#: the growers by ``GrowthParams.split_search``: each builds from the binned matrix, the raw values
#: (None when the fit kept none), the bin mapper, the settings and the feature search
GROWERS = {"histogram": _histogram, "exact": _exact}


def make_grower(X_binned, X: np.ndarray | None, bin_mapper, params: GrowthParams,
                search: FeatureSearch | None = None) -> TreeGrower:
    """A grower of ``params.split_search`` (:data:`GROWERS`)."""
    return GROWERS[params.split_search](X_binned, X, bin_mapper, params, search)
