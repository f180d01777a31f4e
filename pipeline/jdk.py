"""The JDK the stage's own driver JVM runs on, and the options that depend on its version.

pyspark starts `$JAVA_HOME/bin/java`, else the `java` on the PATH; the JDK's `release` file says
its version and C library. A HotSpot flag the JDK does not know stops the JVM at start, so an
option newer than the oldest supported JDK (17) is added only where the version has it.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

# glibc keeps the C heap's freed pages (~1-2 MB/s of them here) as RSS; HotSpot hands them back
# each second with malloc_trim (~0.7 ms a trim): the JVM's RSS then holds at most a second's.
# Figures: docs/tuning.md#native-heap-trim
TRIM_INTERVAL_MS = 1_000
# The first JDK of each line with -XX:TrimNativeHeapInterval as a product flag (JDK-8325496 and
# its backports; earlier 17.0.x and 21.0.x had it experimental or not at all): none for older.
_TRIM_PRODUCT_SINCE = {17: (0, 12), 21: (0, 4), 22: (0, 2)}
_TRIM_ALL_SINCE = 23
_VERSION = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def java_home() -> Path | None:
    """The JDK pyspark's launcher uses: $JAVA_HOME, else the one the PATH's `java` is in."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return Path(home)
    java = shutil.which("java")
    return Path(os.path.realpath(java)).parent.parent if java else None


def release_facts(text: str) -> dict[str, str]:
    """KEY="value" lines of a JDK's `release` file (pure)."""
    facts = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            facts[key.strip()] = value.strip().strip('"')
    return facts


def trims_native_heap(facts: dict[str, str]) -> bool:
    """Whether a JDK with these `release` facts takes -XX:TrimNativeHeapInterval as a product
    flag and can act on it (Linux with glibc: elsewhere HotSpot warns at every start) (pure)."""
    m = _VERSION.match(facts.get("JAVA_VERSION", ""))
    if not m or facts.get("OS_NAME") != "Linux" or facts.get("LIBC", "gnu") != "gnu":
        return False
    feature, update = int(m[1]), (int(m[2] or 0), int(m[3] or 0))
    if feature >= _TRIM_ALL_SINCE:
        return True
    since = _TRIM_PRODUCT_SINCE.get(feature)
    return since is not None and update >= since


def native_trim_option(home: Path | None = None) -> str:
    """-XX:TrimNativeHeapInterval for the driver JVM when its JDK has it, else ""."""
    home = home or java_home()
    try:
        text = (home / "release").read_text() if home else ""
    except OSError:  # no release file (a JRE image without one): no flag rather than no start
        return ""
    return f"-XX:TrimNativeHeapInterval={TRIM_INTERVAL_MS}" if trims_native_heap(
        release_facts(text)) else ""
