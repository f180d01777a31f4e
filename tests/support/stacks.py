"""A pytest plugin scripts/run_tests.py loads into each job (`-p tests.support.stacks`): on
SIGUSR1, every thread's stack goes to the file LOGCOUNT_TEST_STACKS names. The runner sends it
to a job it is about to kill as hung; a file, since a test's own stderr is captured and would
go with the process."""

from __future__ import annotations

import faulthandler
import os
import signal

import pytest

STACKS = "LOGCOUNT_TEST_STACKS"


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(STACKS)
    if path:
        # Open for the session: the handler writes to it from the signal, long after here.
        faulthandler.register(signal.SIGUSR1, file=open(path, "a"),  # noqa: SIM115
                              all_threads=True)
