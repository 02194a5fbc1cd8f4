"""
The selection path: the best model at each feature budget
==========================================================

:func:`gbfs.selection_path` answers "give me the best K features and a good model on them" for
several budgets K at once. It shares one binning between its fits, probes ``mu`` downwards from
``mu_max`` (the penalty at which nothing is selected), collects candidates for every budget (the
penalised selections, rankings by importance, recursive elimination) and keeps, per budget, the
candidate that validates best; the test set is scored after the choice, never used for it.

Here on scikit-learn's breast cancer data with budgets of 2, 4 and 8 features.
"""

# %%
import matplotlib.pyplot as plt
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from gbfs import GBFSClassifier, selection_path

X, y = load_breast_cancer(return_X_y=True)
X_fit, X_test, y_fit, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
X_train, X_val, y_train, y_val = train_test_split(X_fit, y_fit, test_size=0.25, stratify=y_fit,
                                                  random_state=0)

# %%
# The template sets the method and the trees; the path sets ``mu``, ``max_features`` and ``refit``.
template = GBFSClassifier(method="agbm", n_estimators=60, max_depth=3, early_stopping_rounds=10,
                          random_state=0, n_threads=1)
path = selection_path(template, X_train, y_train, eval_set=(X_val, y_val), budgets=(2, 4, 8),
                      test_set=(X_test, y_test))
print(path.to_frame()[["budget", "n_features", "source", "val_score", "test_score"]])

# %%
# Each budget's chosen model (line) among every candidate the path refitted (grey points).
ax = path.plot()
ax.set_title("A-GBM selection path, breast cancer")
plt.show()
