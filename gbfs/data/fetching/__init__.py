"""Downloading real data sets: transfers, locks, the manifest of checksums, sanity checks."""
