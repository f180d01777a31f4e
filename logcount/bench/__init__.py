"""`logcount bench`: the side-by-side benchmark (runner.py drives it, report.py judges it)."""
