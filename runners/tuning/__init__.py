"""Optuna and Hydra sweeps: the study and its workers, its MLflow parent run, one invocation of it,
one trial, the refit, the search space, the objective, the checks of a study's config, and the Hydra
callbacks that set up and summarise a sweep."""
