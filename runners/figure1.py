"""GT-GBM Figure 1: root candidate-set recovery vs dimension and sample size (``python -m runners.figure1``).

The experiment is :mod:`runners.paper.figure1`.
"""

from runners.paper.figure1 import main

if __name__ == "__main__":
    raise SystemExit(main())
