"""What the tests share: ports, /metrics, topic readers, the exactness check, names, input.

Plain Python, no test in here: tests import from this package, never from one another.
"""
