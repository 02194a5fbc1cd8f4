"""Optuna and Hydra sweeps: the study and its workers, one trial, the search space, the objective,
the checks of a study's config, and the Hydra callbacks that set up and summarise a sweep."""
