"""All dtypes and fixed constants of the learner, in one place.

Binned training data is ``uint8``: 255 value bins (0..254) plus one missing-value
bin (255), so any feature fits in one byte.  Gradients may be float64 or float32,
but histogram sums are always float64: with ~10^5 rows per node a float32
accumulator loses ~3 significant digits, enough to change which split wins
(pygbm's float32 sums are a known weakness we avoid on purpose).
"""

import numpy as np

X_BINNED_DTYPE = np.uint8
X_DTYPE = np.float64
Y_DTYPE = np.float64
G_H_DTYPE = np.float64  # residuals, hessians and row weights
HISTOGRAM_DTYPE = np.float64  # (n_features, N_BINS, 3): sum(w*r), sum(w*h or w), count
ROW_DTYPE = np.int32  # row indices inside the grower's partition

MAX_BINS = 255  # value bins per feature
MISSING_BIN = 255  # bin that holds NaN
N_BINS = 256  # histogram width: value bins + missing bin

# channels of a histogram bin
G_CH, H_CH, C_CH = 0, 1, 2

#: largest ``n_rows * max|y|`` of a regression target.  Residuals are at most ``2 max|y|`` at the
#: first tree, so their sums over the rows stay below 2e150 and the squares of those sums (split
#: gains, A-GBM's SSE_root) below 4e300, inside float64 (1.8e308).  The booster stops with an
#: error if its residuals outgrow ``2 * MAX_TARGET_SCALE`` (a diverging learning rate).
MAX_TARGET_SCALE = 1e150
