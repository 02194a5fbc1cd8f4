"""Row sampling compared as in the MVS paper's Section 5 (Tables 2-4): ``python -m runners.sampling``.

The comparison is :mod:`runners.paper.mvs.comparison`; its outputs :mod:`runners.paper.mvs.report`.
"""

from runners.paper.mvs.comparison import main

if __name__ == "__main__":
    raise SystemExit(main())
