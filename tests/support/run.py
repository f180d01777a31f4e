"""The CLI as a real process, its usual arguments, and waiting for a condition."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

LOGCOUNT = [sys.executable, "-m", "logcount.cli"]
ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict | None = None, timeout: float = 600,
        check: bool = True) -> subprocess.CompletedProcess:
    """Run `logcount ARGS...` as a real process; return it with its stderr."""
    proc = subprocess.run([*LOGCOUNT, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"logcount {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stderr[-4000:]}")
    return proc


def start_cli(*args: str, env: dict | None = None,
              log_path: Path | None = None) -> subprocess.Popen[bytes]:
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen([*LOGCOUNT, *args], stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})}, cwd=ROOT)


def stage_args(endpoints, names, *extra: str, input_topic: str | None = None) -> list[str]:
    return ["run", "--bootstrap-servers", endpoints.bootstrap,
            "--input-topic", input_topic or names.topic("in"),
            "--output-topic", names.topic("out"),
            "--dlq-topic", names.topic("dlq"), "--group-id", names.group,
            "--transactional-id", names.txn_id, "--master", "local[2]",
            # Unpaced: a test waits for a caught-up stage's next batch (a test's own flag wins).
            "--min-batch-interval", "0", *extra]


def sink_args(endpoints, names, url, *extra: str) -> list[str]:
    return ["sink", "--bootstrap-servers", endpoints.bootstrap, "--topic", names.topic("out"),
            "--group-id", names.group + "-sink", "--mysql-url", mysql_url(url), *extra]


def mysql_url(url) -> str:
    pw = f":{url.password}" if url.password else ""
    return f"mysql://{url.user}{pw}@{url.host}:{url.port}/{url.database}"


def wait_for(pred, timeout_s: float, step_s: float = 0.25, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
