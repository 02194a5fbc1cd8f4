"""The model-file envelope shared by every estimator (JSON, format, version, checksum)."""
