"""Losses (residuals, hessians, links) and the metrics recorded in ``history_``."""
