"""Everything MLflow: the store and its runs' life cycle, the MLflow model, the UI's views, the
Hydra callbacks that log a sweep, and the servers the harness starts on 127.0.0.1.
"""
