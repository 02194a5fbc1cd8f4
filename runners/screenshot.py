"""A screenshot of the MLflow UI comparing a sweep's runs: ``python -m runners.screenshot``.

How it is taken: :mod:`runners.tracking.screenshot`.
"""

from runners.tracking.screenshot import main

if __name__ == "__main__":
    raise SystemExit(main())
