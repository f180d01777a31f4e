"""The whole test suite, its tiers side by side: `.venv/bin/python scripts/run_tests.py`.

The tiers fall into lanes (LANES). Where this machine lets us make network namespaces (root and
`ip netns`), each lane runs in one of its own, with its own embedded stack on the contract's
ports (127.0.0.1:9092 and :3306 are the lane's alone) and its own state directory, so one lane's
broker bounces and MariaDB kills never touch another's tests. The lanes of PARALLEL run at once;
the docker tier runs last, alone, in the machine's own namespace (it starts a Docker engine and
fills both cores). Elsewhere every tier runs in one pytest, one after another, as plain `pytest`.

Arguments, if any, go to one plain pytest run instead (`scripts/run_tests.py tests/unit -x`).
Each lane's output is printed whole when it ends; then the slowest tests of the whole run and
one closing line, `tests: N passed, N failed, N skipped`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".cache" / "lanes"
SLOWEST = 20


@dataclass(frozen=True)
class Lane:
    name: str
    paths: tuple[str, ...]


# Side by side: measured with this script's own per-lane times (docs/tuning.md#test-suite-time).
PARALLEL = (
    Lane("core", ("tests/unit", "tests/integration", "tests/newcomer", "tests/bench")),
    Lane("chaos", ("tests/chaos",)),
    Lane("secured", ("tests/secured", "tests/network")),
)
LAST = Lane("docker", ("tests/docker",))
LANES = (*PARALLEL, LAST)


@dataclass
class Outcome:
    lane: Lane
    returncode: int
    seconds: float
    log: Path
    junit: Path


@dataclass(frozen=True)
class Case:
    nodeid: str
    seconds: float
    status: str  # passed | failed | error | skipped


def cases(junit: Path) -> list[Case]:
    """The test cases of a JUnit XML report (pytest's --junitxml), with their status."""
    if not junit.exists():
        return []
    found = []
    for tc in ET.parse(junit).getroot().iter("testcase"):
        status = "passed"
        for child in tc:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
                break
        module = tc.get("classname", "").replace(".", "/")
        found.append(Case(f"{module}.py::{tc.get('name')}", float(tc.get("time", 0)), status))
    return found


def closing_line(all_cases: list[Case]) -> str:
    count = {s: sum(c.status == s for c in all_cases) for s in ("passed", "failed", "error",
                                                                  "skipped")}
    line = f"tests: {count['passed']} passed, {count['failed'] + count['error']} failed"
    return line + (f", {count['skipped']} skipped" if count["skipped"] else "")


def namespaces_work() -> bool:
    """Root with a working `ip netns` (gVisor, VMs and containers with CAP_SYS_ADMIN do)."""
    if os.geteuid() != 0 or not shutil.which("ip") or os.environ.get("LOGCOUNT_LANES") == "off":
        return False
    probe = f"lc-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0
    if made:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return made


class Namespace:
    """A network namespace with only its loopback, up."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> Namespace:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)  # a stale one
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        subprocess.run(["ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up"],
                       check=True)
        return self

    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def __exit__(self, *exc: object) -> None:
        # Whatever a lane left running dies with its namespace, not after the run.
        pids = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True,
                              text=True).stdout.split()
        for pid in pids:
            subprocess.run(["kill", "-9", pid], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def pytest_command(lane: Lane, out: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
            f"--junitxml={out / 'junit.xml'}", f"--basetemp=/tmp/lc-{lane.name}",
            "-o", "junit_family=xunit1", *lane.paths]


def start(lane: Lane, ns: Namespace | None) -> tuple[subprocess.Popen, Path]:
    out = OUT / lane.name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ)
    if ns is not None:
        env.update({
            "LOGCOUNT_STATE_DIR": str(out / "stack"),  # the lane's own embedded stack
            "LOGCOUNT_TEST_STACK": "embedded",  # a Docker engine's ports are not in this namespace
            "SPARK_LOCAL_IP": "127.0.0.1",
        })
    cmd = (ns.prefix() if ns else []) + pytest_command(lane, out)
    log = out / "pytest.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    return proc, log


def run_lanes(lanes: tuple[Lane, ...], isolated: bool) -> list[Outcome]:
    """Start every lane, wait for all; print each lane's output as it ends."""
    running = []
    began = time.monotonic()
    for lane in lanes:
        ns = Namespace(f"lc-{lane.name}").__enter__() if isolated else None
        proc, log = start(lane, ns)
        print(f"lanes: {lane.name} started ({' '.join(lane.paths)})", flush=True)
        running.append((lane, ns, proc, log))
    outcomes = []
    while running:
        for item in list(running):
            lane, ns, proc, log = item
            if proc.poll() is None:
                continue
            running.remove(item)
            if ns is not None:
                ns.__exit__(None, None, None)
            seconds = time.monotonic() - began
            print(f"\n===== lane {lane.name}: exit {proc.returncode} after {seconds:.0f} s =====",
                  flush=True)
            sys.stdout.write(log.read_text(errors="replace"))
            sys.stdout.flush()
            outcomes.append(Outcome(lane, proc.returncode, seconds, log,
                                    OUT / lane.name / "junit.xml"))
        time.sleep(1)
    return outcomes


def report(outcomes: list[Outcome], seconds: float) -> int:
    all_cases = [c for o in outcomes for c in cases(o.junit)]
    print(f"\n===== the run: {seconds:.0f} s =====")
    for o in outcomes:
        mine = cases(o.junit)
        print(f"lane {o.lane.name:8} exit {o.returncode}  {o.seconds:6.0f} s  "
              f"{closing_line(mine).removeprefix('tests: ')}")
    print(f"\n{SLOWEST} slowest tests:")
    for c in sorted(all_cases, key=lambda c: -c.seconds)[:SLOWEST]:
        print(f"{c.seconds:8.1f} s  {c.nodeid}")
    bad = [c.nodeid for c in all_cases if c.status in ("failed", "error")]
    if bad:
        print("\nfailed:", *bad, sep="\n  ")
    print("\n" + closing_line(all_cases))
    if not all_cases:
        print("lanes: no test ran - treating that as a failure", file=sys.stderr)
        return 1
    # pytest's exit 5 ("no tests collected") in a lane is a broken lane, not a green one.
    return max((0 if o.returncode == 0 else 1) for o in outcomes)


def main(argv: list[str]) -> int:
    if argv:
        return subprocess.call([sys.executable, "-m", "pytest", *argv], cwd=ROOT)
    began = time.monotonic()
    if not namespaces_work():
        print("lanes: no network namespaces here (root and `ip netns` needed): "
              "every tier in one pytest, one after another", flush=True)
        outcomes = run_lanes((Lane("all", tuple(p for lane in LANES for p in lane.paths)),),
                             isolated=False)
    else:
        outcomes = run_lanes(PARALLEL, isolated=True)
        outcomes += run_lanes((LAST,), isolated=False)
    return report(outcomes, time.monotonic() - began)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
