"""Row samplers (SGB, GOSS, MVS): a registry of sampler classes and their numba kernels."""
