"""connectors/stack's wait for a starting service: probed until it answers, an exit at once."""

from __future__ import annotations

import itertools
import shutil
import socket
import subprocess
import sys
import time

import pytest

from logcount.connectors import stack
from logcount.core.errors import StackError


class _Starting(stack.Service):
    """A service whose probe fails `failures` times, then answers."""

    def __init__(self, failures: int) -> None:
        super().__init__("fake", (1,))
        self.failures, self.probes = failures, 0

    def probe(self) -> None:
        self.probes += 1
        if self.probes <= self.failures:
            raise ConnectionRefusedError(f"refused {self.probes}")


def test_a_starting_service_is_probed_until_it_answers(sleeps):
    svc = _Starting(3)
    svc._wait_ready(lambda: None)
    assert svc.probes == 4 and sleeps == [stack.READY_POLL_S] * 3


def test_a_process_that_exits_during_start_is_one_line_at_once(sleeps):
    svc = _Starting(99)
    exits = itertools.chain([None, None], itertools.repeat(1))
    with pytest.raises(StackError, match=r"^fake: exited during start; see .*out\.log$") as got:
        svc._wait_ready(lambda: next(exits))
    assert svc.probes == 2 and len(sleeps) == 2 and got.value.__cause__ is None


def test_a_service_that_never_answers_is_given_up_after_the_start_timeout(sleeps, monkeypatch):
    monkeypatch.setattr(stack, "START_TIMEOUT_S", 0.0)  # the budget is spent at the first probe
    with pytest.raises(StackError, match=r"^fake: not answering after 0s \(refused 1\); see "):
        _Starting(99)._wait_ready(lambda: None)
    assert sleeps == []


def test_a_mariadb_bootstrap_that_died_part_way_is_begun_anew_then_said_in_one_line(
        tmp_path, monkeypatch):
    monkeypatch.setenv("LOGCOUNT_STATE_DIR", str(tmp_path))
    db = stack.MariaDB()
    data = db.dir / "data"
    runs: list[bool] = []

    def install(rc: int):
        def run(cmd, **kw):
            runs.append((data / "mysql").exists())  # what the bootstrap found
            (data / "mysql").mkdir(parents=True)  # it gets as far as its folder, either way
            return subprocess.CompletedProcess(cmd, rc, "", "ERROR: bootstrap died\n")
        return run

    outcomes = iter([1, 0])
    monkeypatch.setattr(stack.subprocess, "run", lambda cmd, **kw: install(next(outcomes))(
        cmd, **kw))
    db.prepare()
    assert runs == [False, False]  # the half-made folder was gone before the second try
    db.prepare()  # a made data directory is kept
    assert len(runs) == 2

    runs.clear()
    monkeypatch.setattr(stack.subprocess, "run", install(1))
    shutil.rmtree(data)
    with pytest.raises(StackError, match=r"failed twice \(exit 1\): ERROR: bootstrap died"):
        db.prepare()
    assert runs == [False, False] and not data.exists()  # nothing a later start would trust


class _Listening(stack.Service):
    """A process that listens on a free port and, told to stop, exits while a child of its own
    keeps the socket open a moment longer: gone by its pid, its port still held."""

    HOLD = "import os, signal, socket, sys, time\n" \
           "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n" \
           "def stop(*_):\n" \
           "    if os.fork() == 0:\n" \
           "        time.sleep(1.5); os._exit(0)\n" \
           "    os._exit(0)\n" \
           "signal.signal(signal.SIGTERM, stop)\n" \
           "print('ready', flush=True); time.sleep(60)\n"

    def __init__(self, port: int) -> None:
        super().__init__("listening", (port,))

    def command(self) -> list[str]:
        return [sys.executable, "-c", self.HOLD, str(self.ports[0]), str(self.dir)]


def test_a_stopped_service_is_down_only_once_its_ports_are_free(tmp_path, monkeypatch):
    monkeypatch.setenv("LOGCOUNT_STATE_DIR", str(tmp_path))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    svc = _Listening(port)
    svc.dir.mkdir(parents=True)
    proc = subprocess.Popen(svc.command(), stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        svc.pid_file.write_text(str(proc.pid))
        assert svc.pid() == proc.pid and stack.port_open(port)
        began = time.monotonic()
        svc.down(log=lambda line: None)
        assert not stack.port_open(port), "down returned while the port was still held"
        assert time.monotonic() - began >= 1.0  # it waited for the child that held it
    finally:
        proc.kill()
        proc.wait()
