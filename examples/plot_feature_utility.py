"""
Would a new feature help? The Koepke–Bilenko utility test
=========================================================

:func:`gbfs.feature_utility` tests candidate features against a fitted model without refitting it
(Koepke and Bilenko, ICML 2012, Algorithm 1): it regresses the model's standardised negative loss
gradient on each candidate and compares the fit with a bootstrap null of independence, giving a
p-value and a utility z-score per candidate.

Here a model is fitted on 4 columns of synthetic data whose target depends on 6. The candidates
are the 2 informative columns the model never saw, a noisy copy of one of them and 3 pure-noise
columns.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from gbfs import GBFSRegressor, feature_utility

rng = np.random.default_rng(0)
n = 3000
X = rng.normal(size=(n, 6))
y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * X[:, 2] ** 2 + X[:, 3] + 0.8 * X[:, 4] + 0.6 * np.abs(X[:, 5])
y = y + rng.normal(scale=0.5, size=n)
train, held_out = slice(0, 2000), slice(2000, n)

# %%
# The model sees columns 0-3 only.
model = GBFSRegressor(method="agbm", mu=0.0, n_estimators=200, max_depth=3, random_state=0, n_threads=1)
model.fit(X[train, :4], y[train])

# %%
# The candidates, on rows the model was not fitted on (as the paper's cross-validation folds).
candidates = pd.DataFrame({
    "x4 (informative)": X[held_out, 4],
    "x5 (informative)": X[held_out, 5],
    "x4 + noise": X[held_out, 4] + rng.normal(scale=1.0, size=n - 2000),
    "noise a": rng.normal(size=n - 2000),
    "noise b": rng.uniform(size=n - 2000),
    "noise c": rng.exponential(size=n - 2000),
})
result = feature_utility(model, X[held_out, :4], y[held_out], candidates, n_bootstrap=50, random_state=0)
print(result.to_frame()[["feature", "z", "p_value"]].round(3))

# %%
# The informative candidates stand far above the null; the noise columns do not.
fig, ax = plt.subplots(figsize=(6, 3.5))
colors = ["C2" if p < 0.05 else "C7" for p in result.p_value]
ax.barh(result.features[::-1], result.z[::-1], color=colors[::-1])
ax.axvline(1.645, color="k", lw=0.8, ls="--")
ax.set(xlabel="utility z-score (green: p < 0.05)", title="New-feature utility test")
fig.tight_layout()
plt.show()
