"""pipeline/jvm_launch: the driver JVM a start launched, found among this process's children and
stopped with everything under it when the start is abandoned."""

from __future__ import annotations

import subprocess
import time

from logcount.pipeline.jvm_launch import launched_jvms, stop_trees


def _gone(proc: subprocess.Popen, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return True
        time.sleep(0.02)
    return False


def test_only_the_launches_of_this_process_are_found_and_stopped_with_their_children():
    # A stand-in for pyspark's launch: its last argument, and a child of its own (the launcher).
    launch = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait", "sh", "pyspark-shell"],
                              stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen(["sleep", "60"])  # a child of ours that is no launch
    try:
        assert launch.stdout is not None
        grandchild = int(launch.stdout.readline())
        assert launched_jvms() == {launch.pid}
        stop_trees({launch.pid})
        assert _gone(launch)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{grandchild}/stat") as f:
                    if f.read().split(")")[-1].split()[0] == "Z":
                        break
            except OSError:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the launch's child lives on")
        assert other.poll() is None and launched_jvms() == set()
    finally:
        for p in (launch, other):
            p.kill()
            p.wait()
