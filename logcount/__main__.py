"""`python -m logcount`: the `logcount` console script (and the file spark-submit runs)."""

import os
import sys

if not __package__:
    # Run as a file (spark-submit logcount/__main__.py), this folder is sys.path[0]: its core/ and
    # bench/ must not shadow other distributions' top-level names.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]

from logcount.cli import main  # noqa: E402 - after the path is set

sys.exit(main())
