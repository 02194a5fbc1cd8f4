"""Tools built on the estimators: the selection path over budgets, recursive elimination,
selection stability and the new-feature utility test.
"""
