"""`python -m logcount`: the same as the `logcount` console script."""

import sys

from logcount.cli import main

sys.exit(main())
