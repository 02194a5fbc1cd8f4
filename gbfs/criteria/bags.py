"""Feature bags from the data or the column names: the ``feature_bags`` of the estimators.

A bag is a group of features paid for once (GBFS paper, Section 4.2: once any feature of a bag is
used, the whole bag is free; budgets count bags).  The paper takes the bags as given; these rules
build them where they are not, each a small class registered in :data:`BAG_RULES` by name (the
harness's ``bags`` config names one):

* ``correlation`` (:class:`CorrelationBags`): columns clustered by correlation, Ward linkage on the
  standardised columns (scikit-learn's ``FeatureAgglomeration``), unsupervised: the labels are never
  read.  The GBFS paper's gene bags (Figure 2) are of this kind.
* ``prefix`` (:class:`PrefixBags`): columns whose names share the part before a separator, such as
  the one-hot columns ``colour=red``, ``colour=blue`` of one categorical variable.
* ``groups`` (:class:`ColumnGroups`): lists of column names (or indices) given by the user; a column
  in no list is a bag of its own.

Every rule returns one integer bag id per column, ``0 .. n_bags - 1``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

from .. import validation as V


class BagRule(Protocol):
    """A rule that puts every column of ``X`` in a bag."""

    def bags(self, X: np.ndarray, feature_names: Sequence[str]) -> np.ndarray:
        """One bag id per column of ``X`` (``feature_names`` are its columns' names)."""


@dataclass(frozen=True)
class CorrelationBags:
    """``n_bags`` bags of correlated columns: Ward agglomeration of the standardised columns.

    Missing values count as their column's mean for the clustering only (the bags are all it
    produces); a constant column standardises to zero.
    """

    n_bags: int

    def __post_init__(self) -> None:
        V.check_int("n_bags", self.n_bags, 1)

    def bags(self, X, feature_names: Sequence[str] = ()) -> np.ndarray:
        from scipy import sparse
        from sklearn.cluster import FeatureAgglomeration

        if sparse.issparse(X):
            raise TypeError("the correlation rule clusters dense columns; give X as an array (or use "
                            "the prefix or groups rule on sparse data)")
        from sklearn.preprocessing import StandardScaler

        X = np.asarray(X, dtype=np.float64)
        if self.n_bags > X.shape[1]:
            raise ValueError(f"n_bags={self.n_bags} exceeds the {X.shape[1]} columns of X")
        # standardised columns; a missing value sits at its column's mean (0) for the clustering
        Z = np.nan_to_num(StandardScaler().fit_transform(X), nan=0.0)
        return FeatureAgglomeration(n_clusters=self.n_bags).fit(Z).labels_.astype(np.int64)


@dataclass(frozen=True)
class PrefixBags:
    """Columns whose names agree up to the first ``separator`` share a bag; a name without it is
    a bag of its own."""

    separator: str = "="

    def __post_init__(self) -> None:
        if not isinstance(self.separator, str) or not self.separator:
            raise ValueError(f"separator must be a non-empty string, got {self.separator!r}")

    def bags(self, X, feature_names: Sequence[str]) -> np.ndarray:
        prefixes = [str(name).split(self.separator, 1)[0] for name in _names(X, feature_names)]
        return pd.factorize(pd.Series(prefixes, dtype=object))[0].astype(np.int64)


@dataclass(frozen=True)
class ColumnGroups:
    """The bags ``groups`` names (group name -> list of column names or indices); every other
    column is a bag of its own.  A column in two groups, or one that ``X`` does not have, is
    refused."""

    groups: Mapping[str, Sequence] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.groups, Mapping):
            raise TypeError(f"groups must map a group's name to its columns, "
                            f"got {type(self.groups).__name__}")
        for name, cols in self.groups.items():
            if isinstance(cols, (str, bytes)) or not isinstance(cols, Sequence) or not cols:
                raise ValueError(f"groups[{name!r}] must be a non-empty list of columns, got {cols!r}")

    def bags(self, X, feature_names: Sequence[str]) -> np.ndarray:
        names = _names(X, feature_names)
        where = {name: j for j, name in enumerate(names)}
        group_of = np.full(len(names), -1, dtype=np.int64)
        for g, (name, cols) in enumerate(self.groups.items()):
            for col in cols:
                j = _column(col, where, len(names), name)
                if group_of[j] >= 0:
                    raise ValueError(f"column {names[j]!r} is in two groups "
                                     f"({list(self.groups)[group_of[j]]!r} and {name!r})")
                group_of[j] = g
        # a column in no group gets a code of its own after the groups' codes
        alone = group_of < 0
        group_of[alone] = len(self.groups) + np.arange(int(alone.sum()))
        return _renumbered(group_of)


#: the rules by name (the harness's ``bags.rule``)
BAG_RULES: dict[str, type] = {"correlation": CorrelationBags, "prefix": PrefixBags, "groups": ColumnGroups}


def bag_rule(rule: str, **args) -> BagRule:
    """The rule ``rule`` of :data:`BAG_RULES` with its arguments, checked (errors name them)."""
    V.check_choice("rule", rule, tuple(BAG_RULES))
    try:
        return BAG_RULES[rule](**args)
    except TypeError as e:
        if "unexpected keyword" in str(e) or "missing" in str(e):
            raise TypeError(f"bag rule {rule!r}: {e}".replace("__init__() ", "")) from e
        raise


def feature_bags(X, rule: str, feature_names: Sequence[str] | None = None, **args) -> np.ndarray:
    """The bag of every column of ``X`` by the rule ``rule`` (:data:`BAG_RULES`) and its
    ``args``: the ``feature_bags`` of the estimators.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
        The training rows (the correlation rule reads them; never the labels).
    rule : {"correlation", "prefix", "groups"}
    feature_names : sequence of str, optional
        The columns' names (default: a DataFrame's columns, else ``x0``, ``x1``, ...).
    **args
        The rule's arguments: ``n_bags`` (correlation), ``separator`` (prefix), ``groups``.

    Returns
    -------
    ndarray of int64, shape (n_features,)
        Bag ids ``0 .. n_bags - 1``.

    Examples
    --------
    >>> import numpy as np
    >>> feature_bags(np.zeros((2, 3)), "prefix", ["colour=red", "colour=blue", "size"])
    array([0, 0, 1])
    """
    fitted = bag_rule(rule, **args)
    if feature_names is None and isinstance(X, pd.DataFrame):
        feature_names = [str(c) for c in X.columns]
    if isinstance(X, pd.DataFrame):
        X = X.to_numpy()
    return fitted.bags(X, feature_names or ())


def _names(X, feature_names: Sequence[str]) -> list[str]:
    n = X.shape[1]
    names = [str(s) for s in feature_names] if len(feature_names) else [f"x{j}" for j in range(n)]
    if len(names) != n:
        raise ValueError(f"feature_names has {len(names)} names but X has {n} columns")
    return names


def _column(col, where: Mapping[str, int], n: int, group: str) -> int:
    if isinstance(col, (int, np.integer)) and not isinstance(col, bool):
        if not 0 <= col < n:
            raise ValueError(f"groups[{group!r}]: column index {col} is outside 0 .. {n - 1}")
        return int(col)
    if str(col) not in where:
        raise ValueError(f"groups[{group!r}]: X has no column {col!r}")
    return where[str(col)]


def _renumbered(labels: np.ndarray) -> np.ndarray:
    """Bag ids in order of each bag's first column: the same bags always get the same ids."""
    return pd.factorize(pd.Series(np.asarray(labels)))[0].astype(np.int64)
