"""The histogram gradient-boosting learner: binning, the tree grower, the round loops.

It knows a penalty vector (a :class:`~gbfs.booster.usage.Usage`), a feature search and a row
sampler, and nothing of the papers' selection methods, which live in :mod:`gbfs.criteria`.
"""
