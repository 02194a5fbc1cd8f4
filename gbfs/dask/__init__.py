"""Data-parallel fits on a Dask cluster, in the manner of ``lightgbm.dask``.

:class:`DaskGBFSClassifier` and :class:`DaskGBFSRegressor` take Dask arrays or DataFrames
partitioned over the workers of a ``distributed`` cluster.  Every worker bins and keeps its own
rows and builds their histograms; the driver sums them in partition order and takes every split
with the library's own search, one Omega, budget and penalty (GT-GBM's group tests too, from
each partition's precompute).  ``to_local()`` returns the fitted model as the local estimator.
Needs the ``dask`` extra (``pip install "gbfs[dask]"``).
"""

from .estimators import DaskGBFSClassifier, DaskGBFSRegressor

__all__ = ["DaskGBFSClassifier", "DaskGBFSRegressor"]
