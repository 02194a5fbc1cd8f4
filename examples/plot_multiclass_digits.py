"""
Multiclass selection: which pixels does a digit classifier need?
================================================================

With more than two labels :class:`gbfs.GBFSClassifier` boosts the softmax: every round grows one
tree per class, and all classes share one set of used features, so a pixel is paid for once for
the whole model. On scikit-learn's 8 x 8 digits (1797 images, 64 pixels), A-GBM's ``mu`` trades
pixels for accuracy; the selected pixels are shown as an image.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from gbfs import GBFSClassifier

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)

# %%
# Two penalties: a small one, and one ten times larger.
models = {}
for mu in (0.01, 0.1):
    est = GBFSClassifier(method="agbm", mu=mu, n_estimators=60, max_depth=3, learning_rate=0.3,
                         random_state=0, n_threads=1)
    est.fit(X_train, y_train)
    models[mu] = est
    print(f"mu={mu}: {est.n_features_selected_} of 64 pixels, test accuracy {est.score(X_test, y_test):.3f}")

# %%
# The selected pixels (bright) on the 8 x 8 grid, next to the mean image.
fig, axes = plt.subplots(1, 3, figsize=(9, 3.2))
axes[0].imshow(X.mean(axis=0).reshape(8, 8), cmap="gray")
axes[0].set_title("mean digit")
for ax, (mu, est) in zip(axes[1:], models.items()):
    mask = np.zeros(64)
    mask[est.selected_features_] = 1
    ax.imshow(mask.reshape(8, 8), cmap="viridis")
    ax.set_title(f"mu={mu}: {est.n_features_selected_} pixels")
for ax in axes:
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
plt.show()
