"""This machine's java started with a set of options: what HotSpot makes of them."""

from __future__ import annotations

import shlex
import subprocess


def final_flags(options: str) -> dict[str, str]:
    """`java <options> -XX:+PrintFlagsFinal -version`: its final flags, name -> value. A flag
    HotSpot does not take stops the JVM: that fails here with its message."""
    done = subprocess.run(["java", *shlex.split(options), "-XX:+PrintFlagsFinal", "-version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return {line.split()[1]: line.split()[3] for line in done.stdout.splitlines()
            if line.count("=") == 1 and len(line.split()) >= 4}
