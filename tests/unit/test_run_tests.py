"""scripts/run_tests.py: every tier runs in exactly one lane, and its report counts what ran."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import scripts.run_tests as run_tests
from scripts.run_tests import (
    DOCKER,
    FIRST,
    TIERS,
    TIMED,
    TIMED_AT_ONCE,
    Case,
    cases,
    close_cgroup,
    closing_line,
    cpu_rows,
    group_processes,
    in_cgroup,
    jobs,
    kill_group,
    own_group,
    pick,
    weigh,
)
from tests.support.cpu_log import (
    CPU_FD,
    busy_seconds,
    cgroup_seconds,
    counter,
    handed,
    hierarchy,
    new_cgroup,
    own_cgroup,
)

ROOT = Path(__file__).resolve().parents[2]
OPT_IN = {"compat"}  # collected only when named (tests/conftest.py)


def test_every_test_file_runs_in_exactly_one_job():
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"]["markers"]
    assert {m.split(":")[0] for m in markers} - OPT_IN == {*TIERS, "docker"}

    def files(path: str) -> set[str]:
        p = ROOT / path
        return {path} if p.is_file() else {
            f.relative_to(ROOT).as_posix() for f in p.rglob("test_*.py")}

    covered = [f for job in jobs() for path in job for f in files(path)]
    every = {f.relative_to(ROOT).as_posix() for tier in (*TIERS, "docker")
             for f in (ROOT / "tests" / tier).rglob("test_*.py")}
    assert sorted(covered) == sorted(every)  # each once, none left out


def test_the_named_jobs_come_first_with_the_timed_ones_at_the_head():
    got = jobs()
    assert got[:len(FIRST)] == list(FIRST)
    assert got[:len(TIMED)] == list(TIMED)
    assert got.count(DOCKER) == 1 and DOCKER in TIMED  # its containers take a timed slot


def test_pick_holds_timed_jobs_to_two_at_once():
    untimed = ("tests/unit",)
    queue = [*TIMED, untimed]
    assert pick(queue, 0) == 0
    assert pick(queue, TIMED_AT_ONCE - 1) == 0
    assert pick(queue, TIMED_AT_ONCE) == len(TIMED)  # the first job not timed
    assert pick([DOCKER, untimed], TIMED_AT_ONCE) == 1
    assert pick([DOCKER, untimed], 1) == 0  # beside one timed job, as any timed job
    assert pick([TIMED[0]], TIMED_AT_ONCE) is None
    assert pick([], 0) is None


def test_a_junit_report_is_read_with_each_status(tmp_path: Path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="suite.test_a" name="test_ok" time="1.5"/>'
        '<testcase classname="suite.test_a" name="test_bad" time="0.2">'
        '<failure message="x"/></testcase>'
        '<testcase classname="suite.test_a" name="test_err" time="0.1">'
        '<error message="x"/></testcase>'
        '<testcase classname="suite.test_b" name="test_skip[1]" time="0">'
        '<skipped message="x"/></testcase>'
        '</testsuite></testsuites>')
    got = cases(junit)
    assert got[0] == Case("suite/test_a.py::test_ok", 1.5, "passed")
    assert [c.status for c in got] == ["passed", "failed", "error", "skipped"]
    assert closing_line(got) == "tests: 1 passed, 2 failed, 1 skipped"
    assert closing_line(got[:1]) == "tests: 1 passed, 0 failed"
    assert cases(tmp_path / "missing.xml") == []


def test_the_cpu_log_is_read_back_and_the_machine_busy_time_counts_every_busy_field(
        tmp_path: Path):
    log = tmp_path / "cpu.jsonl"
    log.write_text('{"nodeid": "t.py::a", "cpu_s": 12.5, "wall_s": 9.0}\n\n'
                   '{"nodeid": "t.py::b", "cpu_s": 0.25, "wall_s": 1.0}\n')
    assert cpu_rows(log) == [(12.5, 9.0, "t.py::a"), (0.25, 1.0, "t.py::b")]
    assert cpu_rows(tmp_path / "missing.jsonl") == []
    log.write_text('{"nodeid": "t.py::a", "cpu_s": 12.5, "wall_s": 9.0, "own_cpu_s": 3.5}\n')
    assert cpu_rows(log) == [(3.5, 9.0, "t.py::a")]  # its own processes' where it had a cgroup
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice: idle and iowait are not busy
    stat.write_text("cpu  100 20 30 5000 70 4 6 10 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert busy_seconds(str(stat)) * os.sysconf("SC_CLK_TCK") == 170


def test_a_job_s_session_is_niced_as_a_whole(tmp_path: Path):
    if not Path("/proc/self/autogroup").exists():
        pytest.skip("this kernel has no autogroups: each job's `nice -n` does it per process")
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                           start_new_session=True)
    try:
        own_group(job.pid, 7)
        mine = Path("/proc/self/autogroup").read_text()
        assert Path(f"/proc/{job.pid}/autogroup").read_text().split()[-1] == "7"
        assert Path("/proc/self/autogroup").read_text() == mine  # ours is untouched
    finally:
        job.kill()
        job.wait()
    own_group(job.pid, 7)  # a job already gone: nothing to do, no error


def test_a_process_s_cgroup_is_found_in_either_hierarchy_and_its_cpu_read(tmp_path: Path):
    v1 = tmp_path / "v1"
    (v1 / "cpuacct" / "lc" / "job01").mkdir(parents=True)
    (v1 / "cpuacct" / "cpuacct.usage").write_text("9000000000\n")
    (v1 / "cpuacct" / "lc" / "job01" / "cpuacct.usage").write_text("2500000000\n")
    procs = tmp_path / "cgroup"
    procs.write_text("4:memory:/elsewhere\n2:cpu,cpuacct:/lc/job01\n0::/\n")
    assert hierarchy(v1) == v1 / "cpuacct"
    assert own_cgroup(str(procs), v1) == v1 / "cpuacct" / "lc" / "job01"
    assert cgroup_seconds(v1 / "cpuacct" / "lc" / "job01") == 2.5
    v2 = tmp_path / "v2"
    (v2 / "lc").mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    (v2 / "lc" / "cpu.stat").write_text("usage_usec 1250000\nuser_usec 1000000\n")
    procs.write_text("0::/lc\n")
    assert hierarchy(v2) == v2 and own_cgroup(str(procs), v2) == v2 / "lc"
    assert cgroup_seconds(v2 / "lc") == 1.25 and counter(v2 / "lc") == v2 / "lc" / "cpu.stat"
    assert hierarchy(tmp_path / "none") is None and own_cgroup(str(procs), tmp_path) is None
    assert cgroup_seconds(tmp_path / "none") is None and in_cgroup(None) == []


def test_a_job_started_in_its_cgroup_counts_its_children_s_cpu_there():
    group = new_cgroup(f"lc-unit-{os.getpid()}")
    if group is None:
        pytest.skip("no cgroup can be made here: the run reports the machine's CPU per test")
    # The job reads its cgroup's counter through the descriptor it was handed, before and after
    # a child of its own burnt half a second.
    burn = ("import subprocess, sys\nfrom tests.support.cpu_log import job_seconds\n"
            "before = job_seconds()\nsubprocess.run([sys.executable, '-c', 'import time\\n"
            "t = time.process_time()\\nwhile time.process_time() - t < 0.5: pass'])\n"
            "print(job_seconds() - before)")
    (group / "job01").mkdir()  # a job's group left behind goes with its run's
    fd = os.open(counter(group), os.O_RDONLY)
    try:
        r = subprocess.run([*in_cgroup(group), sys.executable, "-c", burn], check=True, cwd=ROOT,
                           env={**os.environ, CPU_FD: handed(fd)}, pass_fds=(fd,),
                           capture_output=True, text=True)
        assert 0.45 < float(r.stdout) < 3, r.stdout
        # A process with another file at that number (a pytest a test started) reads nothing.
        other = subprocess.run([sys.executable, "-c", "import os\nfrom tests.support.cpu_log "
                                f"import job_seconds\nos.dup2(os.open('/dev/null', 0), {fd})\n"
                                "print(job_seconds())"], cwd=ROOT, capture_output=True,
                               text=True, env={**os.environ, CPU_FD: handed(fd)}, check=True)
        assert other.stdout.strip() == "None", other.stdout
        assert 0.45 < (cgroup_seconds(group) or 0) < 5
    finally:
        os.close(fd)
        seconds = close_cgroup(group)
    assert seconds is not None and seconds > 0.45 and not group.exists()


def test_a_job_past_its_limit_is_killed_with_its_threads_stacks_and_processes(
        tmp_path, monkeypatch, capsys):
    """A hung job costs the run one job and says where it stood, not the whole CI limit."""
    hangs = tmp_path / "test_hangs.py"
    hangs.write_text("import subprocess, sys, time\n\n\ndef test_waits_on_a_child():\n"
                     "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
                     " start_new_session=True)\n"
                     "    time.sleep(300)\n")
    monkeypatch.setattr(run_tests, "JOB_LIMIT_S", 6.0)
    monkeypatch.setattr(run_tests, "OUT", tmp_path / "lanes")
    monkeypatch.setattr(run_tests, "RUN_GROUP", f"lc-unit-hang-{os.getpid()}")
    runner = run_tests.Runner()
    runner.count = 900  # job901: its --basetemp is no real job's
    try:
        runner.run((str(hangs),), None)
    finally:
        close_cgroup(new_cgroup(run_tests.RUN_GROUP))
    out = capsys.readouterr().out
    [done] = runner.done
    assert done.returncode != 0 and done.seconds < 30, out
    assert "still running after 6 s: killed" in out, out
    assert "in test_waits_on_a_child" in out, out  # the pytest's main thread, where it waited
    if own_cgroup() is not None:  # the processes are listed from the job's cgroup
        assert "time.sleep(300)" in out, out
        left = subprocess.run(["pgrep", "-f", "import time; time.sleep(300)"],
                              capture_output=True, text=True).stdout.split()
        assert not left, left  # its child in a session of its own died with it too


def test_a_group_s_processes_are_listed_and_killed(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "g" / "sub").mkdir(parents=True)
        (tmp_path / "g" / "cgroup.procs").write_text("")
        (tmp_path / "g" / "sub" / "cgroup.procs").write_text(f"{child.pid}\n999999999\n")
        [line] = group_processes(tmp_path / "g")  # a pid gone is left out, not an error
        assert line.startswith(f"{child.pid} ") and "time.sleep(60)" in line
        kill_group(tmp_path / "g")
        assert child.wait(timeout=10) == -9
    finally:
        child.kill()
    assert group_processes(None) == [] and kill_group(None) is None


@pytest.mark.parametrize(("name", "nice", "value"), [
    ("cpu.shares", 10, "110"), ("cpu.shares", 0, "1024"), ("cpu.weight.nice", 10, "10")])
def test_a_group_that_schedules_gets_the_weight_of_its_nice(tmp_path, name, nice, value):
    (tmp_path / name).write_text("default")
    weigh(tmp_path, nice)
    assert (tmp_path / name).read_text() == value
    weigh(None, 10)
    empty = tmp_path / "cpuacct-only"
    empty.mkdir()
    weigh(empty, 10)  # v1's cpuacct alone does not schedule: nothing written
    assert list(empty.iterdir()) == []
