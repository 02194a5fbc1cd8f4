"""The harness's core: what every runner does with a config (data, method, fit, evaluation), its
checks, budgets, tasks, and the summaries a run prints.
"""
