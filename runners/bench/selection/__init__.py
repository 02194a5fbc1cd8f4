"""The feature-selection benchmark: its data sets, method families, peers, report, and the cost
and tiny-data scenarios.
"""
