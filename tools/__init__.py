"""Experiment instruments: one-off measurements behind figures in docs/, run from a checkout as
`python -m tools.X` (the repository root on sys.path). Not installed: `pip install .` ships
the stage and `logcount bench` (logcount/bench/), and nothing installed imports these."""
