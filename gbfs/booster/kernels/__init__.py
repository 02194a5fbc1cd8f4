"""numba kernels over arrays: histograms, split scans, fixed-order sums and sorts, and the dtypes."""
