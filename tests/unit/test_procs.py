"""logcount/bench/procs.py's /proc readers: stat and status parsing, the process tree, and one
process's sample."""

import os
import sys

from logcount.bench import procs


def test_proc_status_and_stat():
    status = "Name:\tjava\nVmHWM:\t 1200000 kB\nVmRSS:\t 1153024 kB\nThreads:\t259\n"
    assert procs.parse_status(status) == {"rss_kb": 1153024, "threads": 259}
    # comm may hold spaces and parentheses: the last ')' ends it
    assert procs.parse_stat("4242 (Executor (x) 1) S 4000 4242 4242 0 -1") == ("Executor (x) 1",
                                                                              4000)


def test_descendants_walks_the_tree_below_the_root_only():
    parents = {10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20}
    assert procs.descendants(10, parents) == [11, 13, 12]
    assert procs.descendants(12, parents) == []


def test_status_takes_the_keys_asked_for():
    status = "Name:\tjava\nVmHWM:\t 1200000 kB\nVmRSS:\t 1153024 kB\nThreads:\t259\n"
    assert procs.parse_status(status, {"VmHWM": "hwm_kb"}) == {"hwm_kb": 1200000}


def test_a_process_sample_of_this_process_and_of_none():
    got = procs.proc_sample(os.getpid())
    assert got is not None and got["rss_mb"] > 0 and got["threads"] >= 1 and got["fds"] >= 1
    assert procs.proc_sample(2**22 + 1) is None  # above Linux's largest pid


def test_a_child_s_cpu_is_read_once_it_has_exited_before_it_is_reaped():
    """No sampler at all: the CPU comes from the exited process's own /proc/PID/stat, read
    between its exit and its reaping (a sample every SAMPLE_S alone may miss a short one)."""
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    child = procs.Child([sys.executable, "-c", busy], sample=False)
    assert child.wait(60) == 0
    assert child.stats.cpu_seconds >= 0.25, child.stats
