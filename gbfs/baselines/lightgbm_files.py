"""The model files of the LightGBM baselines: JSON in the envelope of every gbfs model
(:mod:`gbfs.io.envelope`), LightGBM's model text inside, never pickle.

:class:`LightGBMModelFile` is the persistence half of
:class:`~gbfs.baselines.lightgbm_baseline.LightGBMBaseline` (and of its subclasses for other tasks):
what a file holds, and the checks a file read back must pass before it becomes a fitted estimator.
"""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..estimators.model_io import params_json
from ..io import envelope
from ..io.categorical_io import categories_from_json, categories_json


class LightGBMModelFile:
    """``save_model`` / ``load_model`` of a fitted LightGBM baseline (a mixin: the estimator provides
    ``_classes_body``, ``_restore_classes`` and ``_set_fitted``)."""

    def save_model(self, path) -> None:
        """Write the fitted model as JSON (never pickle), atomically, in the envelope of every gbfs
        model (:mod:`gbfs.io.envelope`); ``gbfs.load_model`` or :meth:`load_model` reads it.

        Keys besides the envelope's: ``params``, ``classes``, ``n_features_in``, ``feature_names_in``,
        ``columns``, ``selected_features``, ``best_iteration``, ``booster`` (LightGBM's model text).
        """
        envelope.save(self, path)

    def _model_body(self) -> dict:
        check_is_fitted(self, "booster_")
        names = getattr(self, "feature_names_in_", None)
        return {"params": params_json(self), "classes": self._classes_body(),
                "n_features_in": int(self.n_features_in_),
                "feature_names_in": None if names is None else [str(c) for c in names],
                "columns": self.columns_.tolist(), "selected_features": self.selected_features_.tolist(),
                "best_iteration": self.best_iteration_,
                "booster": self.booster_.model_to_string(num_iteration=-1),
                **({"categorical": categories_json(self)} if len(self.categorical_features_) else {})}

    @classmethod
    def _from_model_body(cls, body: dict) -> LightGBMModelFile:
        try:
            return cls(**body["params"])._restore(body)
        except lgb.basic.LightGBMError as e:
            raise ValueError(f"malformed model file (LightGBMError: {e})") from e

    @classmethod
    def load_model(cls, path) -> LightGBMModelFile:
        """Read a file written by :meth:`save_model` (or by an older gbfs, whose baseline files had
        their own ``gbfs-lightgbm-baseline`` envelope); returns a fitted estimator.

        Raises
        ------
        ValueError
            If the file is not valid JSON, has another format or version, fails its checksum, holds
            another estimator or is inconsistent (columns, selected features, booster).
        """
        return envelope.load_model(path, cls)

    def _restore(self, body: dict) -> LightGBMModelFile:
        d = body["n_features_in"]
        if not isinstance(d, int) or d < 1:
            raise ValueError("n_features_in must be a positive int")
        self.n_features_in_ = d
        if body["feature_names_in"] is not None:
            if len(body["feature_names_in"]) != d:
                raise ValueError("feature_names_in has the wrong length")
            self.feature_names_in_ = np.asarray(body["feature_names_in"], dtype=object)
        self._restore_classes(body["classes"])
        columns = np.asarray(body["columns"], dtype=np.int64)
        booster = lgb.Booster(model_str=body["booster"])
        if (columns.ndim != 1 or columns.shape[0] != booster.num_feature() or np.unique(columns).size
                != columns.size or columns.min() < 0 or columns.max() >= d):
            raise ValueError("columns do not match the booster's features")
        if body["best_iteration"] is not None and not isinstance(body["best_iteration"], int):
            raise ValueError("best_iteration must be an int or null")
        none = (np.zeros(0, np.int64), [])
        self.categorical_features_, self.categories_ = (
            categories_from_json(body["categorical"], d) if "categorical" in body else none)
        self._set_fitted(booster, columns, [], body["best_iteration"])
        if self.selected_features_.tolist() != body["selected_features"]:
            raise ValueError("selected_features do not match the booster's splits")
        return self
