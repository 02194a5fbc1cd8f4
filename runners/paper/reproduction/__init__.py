"""``python -m runners.reproduce``: a reproduction of the papers' tables and figures.

:mod:`.plan` reads the scale's settings and rows, :mod:`.run` runs the units under one MLflow parent
run and writes the tables, :mod:`.ranking` the ranking tables, :mod:`.parts` the experiments made in
one run each (the GBFS, utility and MVS papers'), :mod:`.lock` keeps one process per reproduction and
:mod:`.jobs` runs its independent parts in worker processes.
"""
