"""Everything MLflow: the store and its runs' life cycle, the one object every write to a run goes
through, the MLflow model, the UI's views, the figures a run logs (and the papers' figures drawn from
runs), and the servers the harness starts on 127.0.0.1.
"""
