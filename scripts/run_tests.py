"""The whole test suite, side by side: `.venv/bin/python scripts/run_tests.py`.

The suite is cut into jobs (a test file, or a few that share a fixture), and LANES lanes take
them from one queue, longest first. Where this machine lets us make network namespaces (root
and `ip netns`), each lane is one of its own, with its own embedded stack on the contract's
ports (127.0.0.1:9092 and :3306 are the lane's alone) and its own state directory, so one
lane's broker bounces and MariaDB kills never touch another lane's tests. The jobs that hold a
stage to a time run two at most at once, at full priority; the others niced (`pick`), each job
a session of its own so that its niceness holds for all its processes together. The docker tier
runs in the machine's own namespace, in a timed slot: its containers cannot be niced. Four lanes
by default (LOGCOUNT_TEST_LANES=N sets another count); with LOGCOUNT_TEST_LANES=1, and where
namespaces cannot be made, every tier runs in one pytest, one after another, as plain `pytest`
does.

Arguments, if any, go to one plain pytest run instead (`scripts/run_tests.py tests/unit -x`).
Each job's output is printed whole when it ends; then the run's time and CPU, the slowest tests,
the costliest (machine CPU while each ran: on two cores the suite's time is bounded by its CPU)
and one closing line, `tests: N passed, N failed, N skipped`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the tests' own CPU reader below
from tests.support.cpu_log import (  # noqa: E402
    CPU_FD,
    busy_seconds,
    cgroup_seconds,
    counter,
    handed,
    new_cgroup,
)
from tests.support.stacks import STACKS  # noqa: E402

TESTS = ROOT / "tests"
OUT = ROOT / ".cache" / "lanes"
SLOWEST = 20
COSTLIEST = 20
# A job still running after this is hung, not slow (the longest took 845 s in CI's slowest run):
# its threads' stacks and processes are printed and it is killed, so a hang costs one job and
# says where it stood, not the whole run its CI limit. Figures: docs/tuning.md#test-suite-time
JOB_LIMIT_S = float(os.environ.get("LOGCOUNT_TEST_JOB_LIMIT_S", "1800"))
# Four lanes: one pytest alone used 1.04 cores of two, two lanes 1.66, three 1.79; the untimed
# lanes fill what the two timed jobs leave while they wait on outages. Each job is a session of
# its own, niced as a whole (`own_group`), so the timed ones keep their pace.
# Figures: docs/tuning.md#test-suite-time
LANES = int(os.environ.get("LOGCOUNT_TEST_LANES", "4"))

# The docker tier, in the machine's own namespace (its engine publishes ports there); its
# containers are in sessions of their own, which no nice reaches, so it takes a timed slot.
DOCKER = ("tests/docker",)
# Jobs whose tests hold a stage to a time (a resume within 15 s of a heal, batches inside a
# fault window, a soak's samples), and the docker tier: at most two at once, at full priority;
# every other job runs niced, in the CPU they leave. Longest first; each is one pytest run.
TIMED: tuple[tuple[str, ...], ...] = (
    # One secured cluster (a session fixture) for both tiers: started once, not per file.
    ("tests/secured", "tests/network"),
    DOCKER,  # ~11 minutes on a fresh machine (the engine, the images), 3 once they are built
    ("tests/chaos/test_chaos.py",),
    ("tests/bench",),
    ("tests/chaos/test_chaos_final.py",),
    ("tests/chaos/test_heal.py",),
    ("tests/chaos/test_faults.py",),
    ("tests/chaos/test_bad_input.py",),
    ("tests/integration/test_stage.py",),
)
TIMED_AT_ONCE = 2
# The JIT of each lane's broker (JAVA_TOOL_OPTIONS of its `stack up`): C1 only, as the secured
# cluster's brokers, less CPU to start and under the tests' load.
# Figures: docs/tuning.md#test-suite-time
BROKER_JIT = "-XX:TieredStopAtLevel=1"
# CFS gives a nice-10 group ~1/10 of a nice-0 one's share when both want a core: the untimed
# jobs' sessions (autogroups), so a many-threaded JVM in one counts once, not per thread.
NICE = 10
# The untimed jobs that go first, longest first (seconds in a run of three lanes, 2026-11-29),
# so no long one is left for the end while the other lanes idle; every other file after them.
FIRST: tuple[tuple[str, ...], ...] = (
    *TIMED,
    ("tests/integration/test_state_drift.py",),  # 623 s
    ("tests/integration/test_spark_rule.py",),  # 395
    ("tests/integration/test_formats.py",),  # 332
    ("tests/integration/test_partitions.py",),  # 266
    ("tests/integration/test_final_minutes.py",),  # 160
    ("tests/integration/test_cluster.py",),  # 140
    ("tests/integration/test_real_program_recipes.py",),  # 120
    ("tests/chaos/test_final_faults.py",),  # 110
    ("tests/unit",),  # 99
    ("tests/integration/test_demo.py",),  # 93
    ("tests/newcomer",),  # 83
    ("tests/integration/test_group_by.py",),  # 83
    ("tests/integration/test_group_by_inputs.py",),  # 70
)
# What a job cannot fetch in its namespace (nothing there but loopback), made here beforehand:
# the bench's Quix Streams venv, installed with pip on first use.
PREPARE = {"tests/bench": [sys.executable, "-c",
                           "from logcount.bench.runner import quix_python; quix_python()"]}
# Each job's and each lane's stack's processes in a cgroup of their own under this one, where the
# machine lets us make one: each test's own CPU, not its neighbours' (support/cpu_log.py).
RUN_GROUP = f"lc-tests-{os.getpid()}"
TIERS = ("bench", "chaos", "integration", "network", "newcomer", "secured", "unit")


@dataclass(frozen=True)
class Case:
    nodeid: str
    seconds: float
    status: str  # passed | failed | error | skipped


@dataclass
class Done:
    paths: tuple[str, ...]
    returncode: int
    seconds: float
    junit: Path
    cpu_log: Path
    own_cpu_s: float | None = None  # its cgroup's: its processes', the lane's stack not


def jobs(tests: Path = TESTS) -> list[tuple[str, ...]]:
    """FIRST (the docker tier among them), then each file of a tier that FIRST does not name."""
    named = {p for job in FIRST for p in job}
    rest = []
    for tier in TIERS:
        if f"tests/{tier}" in named:
            continue
        for f in sorted((tests / tier).glob("test_*.py")):
            rel = f"tests/{tier}/{f.name}"
            if rel not in named:
                rest.append((rel,))
    return [*FIRST, *rest]


def pick(queue: list[tuple[str, ...]], timed_running: int) -> int | None:
    """The index of the first job that may start now, or None to wait: a timed job while fewer
    than TIMED_AT_ONCE run, any other job."""
    for i, job in enumerate(queue):
        if job in TIMED and timed_running >= TIMED_AT_ONCE:
            continue
        return i
    return None


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


def cpu_rows(log: Path) -> list[tuple[float, float, str]]:
    """(CPU s, wall s, nodeid) of each test one pytest run logged (support/cpu_log.py): its own
    processes' CPU where its job had a cgroup, else the machine's while it ran."""
    if not log.exists():
        return []
    rows = (json.loads(line) for line in log.read_text().splitlines() if line.strip())
    return [(r.get("own_cpu_s", r["cpu_s"]), r["wall_s"], r["nodeid"]) for r in rows]


def in_cgroup(group: Path | None) -> list[str]:
    """A command prefix that moves the command into `group` before it starts, so every process
    it starts is counted there (nothing where there is no group). Before `ip netns exec`: in the
    namespace's own /sys there is no cgroup hierarchy to write to."""
    if group is None:
        return []
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs")]


def close_cgroup(group: Path | None) -> float | None:
    """The CPU seconds `group` counted; the group removed when no process is left in it."""
    if group is None:
        return None
    seconds = cgroup_seconds(group)
    # A job's group still held a process when the job ended (a broker it bounced): empty now,
    # at the run's end, it goes with the run's group.
    for child in (p for p in group.iterdir() if p.is_dir()) if group.is_dir() else ():
        with contextlib.suppress(OSError):
            child.rmdir()
    with contextlib.suppress(OSError):
        group.rmdir()
    return seconds


# The kernel's weight of a nice 0 and a nice 10 task (sched_prio_to_weight): v1's cpu.shares.
SHARES = {0: 1024, 10: 110}


def weigh(group: Path | None, nice: int) -> None:
    """Give `group` the CPU weight of `nice` where its hierarchy also schedules (v2's cpu
    controller, v1's cpu,cpuacct): there a task's nice counts only within its group, and a job
    left at the default weight would take as much as a timed one."""
    if group is None:
        return
    for name, value in (("cpu.weight.nice", nice), ("cpu.shares", SHARES.get(nice))):
        if value is not None and (group / name).exists():
            with contextlib.suppress(OSError):
                (group / name).write_text(str(value))
            return


def group_pids(group: Path | None) -> list[int]:
    """The processes still in `group` and its children."""
    if group is None:
        return []
    return [int(pid) for procs in sorted(group.rglob("cgroup.procs"))
            for pid in procs.read_text().split()]


def group_processes(group: Path | None) -> list[str]:
    """`pid command line` of each process still in `group`, for a hung job's report."""
    lines = []
    for pid in group_pids(group):
        with contextlib.suppress(OSError):  # gone since
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            lines.append(f"{pid} {cmd.decode(errors='replace').strip()[:300]}")
    return lines


def kill_group(group: Path | None) -> None:
    """SIGKILL every process left in `group` (a hung job's, whatever session it made)."""
    for pid in group_pids(group):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def closing_line(all_cases: list[Case]) -> str:
    count = {s: sum(c.status == s for c in all_cases) for s in ("passed", "failed", "error",
                                                                  "skipped")}
    line = f"tests: {count['passed']} passed, {count['failed'] + count['error']} failed"
    return line + (f", {count['skipped']} skipped" if count["skipped"] else "")


def own_group(pid: int, nice: int) -> None:
    """Give the session `pid` leads (its autogroup: every process it starts that stays in the
    session) the weight of `nice`. Where the kernel has no autogroups, the job's `nice -n` does
    it per process."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))


def namespaces_work() -> bool:
    """Root with a working `ip netns` (gVisor, VMs and containers with CAP_SYS_ADMIN do)."""
    if os.geteuid() != 0 or not shutil.which("ip") or LANES < 2:
        return False
    probe = f"lc-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0
    if made:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return made


class Lane:
    """A network namespace with only its loopback, and an embedded stack of its own in it."""

    def __init__(self, index: int) -> None:
        self.name = f"lc-lane{index}"
        self.dir = OUT / self.name
        self.cgroup = new_cgroup(f"{RUN_GROUP}/{self.name}")  # its stack's CPU
        self.cpu_s: float | None = None
        self.env = {**os.environ,
                    "LOGCOUNT_STATE_DIR": str(self.dir / "stack"),
                    # A Docker engine's published ports are not in this namespace.
                    "LOGCOUNT_TEST_STACK": "embedded",
                    "SPARK_LOCAL_IP": "127.0.0.1"}

    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def open(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)  # a stale one
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        subprocess.run([*self.prefix(), "ip", "link", "set", "lo", "up"], check=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        # Up before the first job, so the session fixture finds it and leaves it up for the next.
        # Its broker C1-only (BROKER_JIT): only this start sees the variable, not the tests' own
        # JVMs, whose stderr some tests read; a broker a chaos test bounces comes back as shipped.
        jit = " ".join(filter(None, (os.environ.get("JAVA_TOOL_OPTIONS"), BROKER_JIT)))
        subprocess.run([*in_cgroup(self.cgroup), *self.prefix(), sys.executable, "-m",
                        "logcount.cli", "stack", "up"],
                       env={**self.env, "JAVA_TOOL_OPTIONS": jit}, cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)

    def close(self) -> None:
        subprocess.run([*self.prefix(), sys.executable, "-m", "logcount.cli", "stack", "down"],
                       env=self.env, cwd=ROOT, capture_output=True)
        # Whatever a job left running dies with its namespace, not after the run.
        pids = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True,
                              text=True).stdout.split()
        for pid in pids:
            subprocess.run(["kill", "-9", pid], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        self.cpu_s = close_cgroup(self.cgroup)


class Runner:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: list[Done] = []
        self.count = 0
        self.prepared: dict[str, threading.Thread] = {}
        self.unrun: list[tuple[str, ...]] = []  # jobs no lane could take
        self.stacks: dict[str, float | None] = {}  # each lane's stack's CPU seconds

    def prepare(self) -> None:
        """Start PREPARE's commands; a job that needs one waits for it."""
        def one(path: str, cmd: list[str]) -> None:
            r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"run_tests: preparing {path} failed:\n{r.stderr[-2000:]}", flush=True)

        for path, cmd in PREPARE.items():
            self.prepared[path] = threading.Thread(target=one, args=(path, cmd))
            self.prepared[path].start()

    def run(self, paths: tuple[str, ...], lane: Lane | None, nice: int = 0,
            stream: bool = False) -> None:
        """One pytest run of `paths`; its output printed whole when it ends, or as it comes
        (`stream`: nothing beside it, so nothing to keep apart)."""
        for path in paths:
            if path in self.prepared:
                self.prepared[path].join()
        with self.lock:
            self.count += 1
            n = self.count
        out = OUT / f"job{n:02d}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        junit, log, cpu_log = out / "junit.xml", out / "pytest.log", out / "cpu.jsonl"
        group = new_cgroup(f"{RUN_GROUP}/job{n:02d}")
        weigh(group, nice)
        print(f"run_tests: job{n:02d} starts {' '.join(paths)} in "
              f"{lane.name if lane else 'the machine namespace'}", flush=True)
        cmd = [*in_cgroup(group), *(lane.prefix() if lane else []),
               *(["nice", "-n", str(nice)] if nice else []),
               sys.executable, "-m", "pytest",
               "-p", "no:cacheprovider", "-p", "tests.support.stacks", f"--junitxml={junit}",
               f"--basetemp=/tmp/lc-job{n:02d}",
               *paths]
        began = time.monotonic()
        stacks = out / "stacks.txt"
        env = {**(lane.env if lane else os.environ), "LOGCOUNT_TEST_CPU_LOG": str(cpu_log),
               STACKS: str(stacks)}
        fds: tuple[int, ...] = ()
        if group is not None:  # each test's own CPU (support/cpu_log.py reads it)
            with contextlib.suppress(OSError):
                fds = (os.open(counter(group), os.O_RDONLY),)
                env[CPU_FD] = handed(fds[0])
        with open(log, "wb") as f:
            out_to = {} if stream else {"stdout": f, "stderr": subprocess.STDOUT}
            # A session of its own: its autogroup is the job's, niced as a whole (own_group).
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                    start_new_session=True, pass_fds=fds, **out_to)
            own_group(proc.pid, nice)
            try:
                rc = proc.wait(timeout=None if stream else JOB_LIMIT_S)  # stream: the suite
                hung = ""
            except subprocess.TimeoutExpired:
                hung = self.stop_hung(proc, group, stacks)
                rc = proc.wait()
            except BaseException:
                os.killpg(proc.pid, 9)  # not in our session: no Ctrl-C reaches it
                raise
        seconds = time.monotonic() - began
        for fd in fds:
            os.close(fd)
        own_cpu = close_cgroup(group)
        with self.lock:
            where = lane.name if lane else "here"
            print(f"\n===== {' '.join(paths)} ({where}): exit {rc} after {seconds:.0f} s =====",
                  flush=True)
            if not stream:
                sys.stdout.write(log.read_text(errors="replace"))
            sys.stdout.write(hung)
            sys.stdout.flush()
            self.done.append(Done(paths, rc, seconds, junit, cpu_log, own_cpu))

    @staticmethod
    def stop_hung(proc: subprocess.Popen, group: Path | None, stacks: Path) -> str:
        """Kill a job past JOB_LIMIT_S; what it was doing: its pytest's threads (SIGUSR1,
        tests/conftest.py) and the processes it still had."""
        with contextlib.suppress(OSError):
            os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(2)  # the dump is a few kB, written from a signal handler
        held = group_processes(group)
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        kill_group(group)
        dump = stacks.read_text(errors="replace") if stacks.exists() else "(no stacks written)\n"
        return (f"\nrun_tests: still running after {JOB_LIMIT_S:.0f} s: killed. Its pytest's "
                f"threads:\n{dump}Its processes then:\n" + "".join(f"  {p}\n" for p in held))

    def lanes(self, queue: list[tuple[str, ...]], count: int) -> None:
        """`count` lanes take jobs from the queue until it is empty (`pick` says which)."""
        take = threading.Condition()
        timed_running = [0]

        def work(index: int) -> None:
            lane = Lane(index)
            try:
                lane.open()
            except subprocess.CalledProcessError as exc:
                # The other lanes take its jobs; with none left, the run fails (main).
                print(f"run_tests: {lane.name} could not start its stack ({exc}); it takes "
                      "no job", flush=True)
                lane.close()
                return
            try:
                while True:
                    with take:
                        while (i := pick(queue, timed_running[0])) is None and queue:
                            take.wait()
                        if i is None:
                            return
                        paths = queue.pop(i)
                        timed = paths in TIMED
                        timed_running[0] += timed
                    try:
                        if paths == DOCKER:
                            self.run(paths, None)
                        else:
                            self.run(paths, lane, nice=0 if timed else NICE)
                    finally:
                        with take:
                            timed_running[0] -= timed
                            take.notify_all()
            finally:
                lane.close()
                self.stacks[lane.name] = lane.cpu_s

        threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.unrun += queue

    def report(self, seconds: float, cpu_s: float) -> int:
        all_cases = [c for d in self.done for c in cases(d.junit)]
        print(f"\n===== the run: {seconds:.0f} s, the machine busy {cpu_s:.0f} CPU-s "
              f"({cpu_s / max(seconds, 1):.2f} cores) =====")
        for d in sorted(self.done, key=lambda d: -d.seconds):
            own = f"{d.own_cpu_s:6.0f} CPU-s  " if d.own_cpu_s is not None else ""
            print(f"{d.seconds:6.0f} s  {own}exit {d.returncode}  {' '.join(d.paths)}  "
                  f"({closing_line(cases(d.junit)).removeprefix('tests: ')})")
        stacks = {k: v for k, v in sorted(self.stacks.items()) if v is not None}
        if stacks:
            jobs_cpu = sum(d.own_cpu_s or 0 for d in self.done)
            print(f"the jobs' own {jobs_cpu:.0f} CPU-s; the lanes' stacks "
                  + ", ".join(f"{k} {v:.0f}" for k, v in stacks.items()) + " CPU-s")
        print(f"\n{SLOWEST} slowest tests:")
        for c in sorted(all_cases, key=lambda c: -c.seconds)[:SLOWEST]:
            print(f"{c.seconds:8.1f} s  {c.nodeid}")
        costly = sorted((r for d in self.done for r in cpu_rows(d.cpu_log)), reverse=True)
        owned = any(d.own_cpu_s is not None for d in self.done)
        print(f"\n{COSTLIEST} costliest tests (" + ("their own processes' CPU" if owned else
              "machine CPU while each ran; in lanes, their neighbours' too") + "):")
        for cpu, wall, nodeid in costly[:COSTLIEST]:
            print(f"{cpu:8.1f} CPU-s {wall:7.1f} s  {nodeid}")
        bad = [c.nodeid for c in all_cases if c.status in ("failed", "error")]
        if bad:
            print("\nfailed:", *bad, sep="\n  ")
        print("\n" + closing_line(all_cases))
        if self.unrun:
            print("run_tests: no lane could run " + ", ".join(" ".join(j) for j in self.unrun),
                  file=sys.stderr)
            return 1
        if not all_cases:
            print("run_tests: no test ran - treating that as a failure", file=sys.stderr)
            return 1
        # pytest's exit 5 ("no tests collected") in a job is a broken job, not a green one.
        return 0 if all(d.returncode == 0 for d in self.done) else 1


def main(argv: list[str]) -> int:
    if argv:
        return subprocess.call([sys.executable, "-m", "pytest", *argv], cwd=ROOT)
    began, busy = time.monotonic(), busy_seconds()
    runner = Runner()
    if namespaces_work():
        print(f"run_tests: {LANES} lanes, each in a network namespace with its own stack",
              flush=True)
        runner.prepare()
        runner.lanes(jobs(), LANES)
    else:
        why = ("LOGCOUNT_TEST_LANES=1" if LANES < 2 else
               "no network namespaces here (root and `ip netns` needed)")
        print(f"run_tests: every tier in one pytest, one after another ({why})", flush=True)
        runner.run(tuple(f"tests/{t}" for t in (*TIERS, "docker")), None, stream=True)
    rc = runner.report(time.monotonic() - began, busy_seconds() - busy)
    close_cgroup(new_cgroup(RUN_GROUP))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
