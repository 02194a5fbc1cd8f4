"""
Importances and learning curves, as LightGBM plots them
=======================================================

A fitted estimator records every iteration (``history_``, and by data set and metric in
``evals_result_``, as LightGBM's) and the total split gain of each feature
(``feature_importances_``). :func:`gbfs.plot_importance` and :func:`gbfs.plot_metric` draw them with
matplotlib, as ``lightgbm.plot_importance`` and ``lightgbm.plot_metric`` do.
"""

# %%
import matplotlib.pyplot as plt
import pandas as pd
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from gbfs import GBFSClassifier, plot_importance, plot_metric

data = load_breast_cancer(as_frame=True)
X: pd.DataFrame = data.data
X_train, X_val, y_train, y_val = train_test_split(X, data.target, test_size=0.3, stratify=data.target,
                                                  random_state=0)

# %%
# An A-GBM fit on a DataFrame: the selected features keep their column names.
est = GBFSClassifier(method="agbm", mu=0.01, n_estimators=150, max_depth=3, early_stopping_rounds=20,
                     random_state=0, n_threads=1)
est.fit(X_train, y_train, eval_set=(X_val, y_val))
print(f"{est.n_features_selected_} features, best iteration {est.best_iteration_}")
print(est.selected_feature_names_)

# %%
# The importance of the selected features, and the validation AUC tree by tree.
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
plot_importance(est, max_num_features=10, ax=axes[0])
plot_metric(est, "auc", ax=axes[1])
fig.tight_layout()
plt.show()
