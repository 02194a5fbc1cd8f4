"""
Selection against the penalty ``mu``: GBFS and A-GBM
=====================================================

GBFS (Xu et al., KDD 2014) charges ``mu`` for the first use of a feature on the split gain;
A-GBM (Han et al., AISTATS 2020) charges it on the gain divided by the SSE of the residuals at the
tree's root, so its ``mu`` lives in [0, 1] whatever the scale of the target. This example fits both
on scikit-learn's breast cancer data (569 rows, 30 features) over a grid of ``mu`` and plots how
many features each model selects and its validation AUC.
"""

# %%
# Data: a stratified train/validation split of the breast cancer data.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from gbfs import GBFSClassifier

X, y = load_breast_cancer(return_X_y=True)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)

# %%
# One fit per method and ``mu``. A-GBM's ``mu`` is a share of the root's SSE, in [0, 1]; GBFS's is
# in units of the gain itself (the SSE reduction of the residuals), which here start near
# ``n_train / 4`` (about 100) at the first tree's root and shrink as the model fits.
grids = {"agbm": np.geomspace(1e-4, 0.3, 8), "gbfs": np.geomspace(1e-2, 30, 8)}
results = {}
for method, grid in grids.items():
    rows = []
    for mu in grid:
        est = GBFSClassifier(method=method, mu=float(mu), n_estimators=60, max_depth=3,
                             early_stopping_rounds=10, random_state=0, n_threads=1)
        est.fit(X_train, y_train, eval_set=(X_val, y_val))
        rows.append((mu, est.n_features_selected_, est.history_[est.best_iteration_]["val_auc"]))
    results[method] = np.array(rows)
    print(method, [(f"{mu:.2g}", int(k)) for mu, k, _ in rows])

# %%
# More ``mu``, fewer features; the validation AUC holds until only a handful remain.
fig, axes = plt.subplots(2, 2, figsize=(9, 6), sharey="row")
for col, (method, rows) in enumerate(results.items()):
    axes[0, col].semilogx(rows[:, 0], rows[:, 1], "o-")
    axes[1, col].semilogx(rows[:, 0], rows[:, 2], "o-", color="C1")
    axes[0, col].set(title=method.upper().replace("AGBM", "A-GBM"))
    axes[1, col].set(xlabel="mu")
axes[0, 0].set(ylabel="selected features")
axes[1, 0].set(ylabel="validation AUC")
fig.tight_layout()
plt.show()
