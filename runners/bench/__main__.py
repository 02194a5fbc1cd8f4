"""``python -m runners.bench <suite>``."""

from runners.bench import main

raise SystemExit(main())
