"""Optuna: the study and its workers, one trial, the search space and the objective."""
