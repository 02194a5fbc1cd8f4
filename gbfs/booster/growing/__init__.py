"""Growing one tree: the best-first grower, the row partition, and the feature search of a node
(which features its split search scans, numeric and categorical).
"""
