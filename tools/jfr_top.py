"""The top of a Java Flight Recording's CPU samples: `python -m tools.jfr_top FILE.jfr
[--top N] [--thread SUBSTRING]`.

Reads the jdk.ExecutionSample events (`jfr print --json`, the JDK's own tool) and prints the
methods most often on top of a sampled stack (self) and anywhere in it (inclusive, once per
sample), with their share of the samples. Used on `python -m tools.cycle --jfr`'s
cycle.jfr for the profile behind docs/benchmarks.md's CPU floor.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess


def frames_of(event: dict) -> list[str]:
    """One sample's stack, top first, as `package.Class.method` (pure)."""
    out = []
    for f in (event.get("values", {}).get("stackTrace") or {}).get("frames", []):
        m = f.get("method", {})
        cls = (m.get("type") or {}).get("name", "?")
        out.append(f"{cls}.{m.get('name', '?')}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--thread", default=None, help="only samples of threads named like this")
    args = ap.parse_args()
    text = subprocess.run(["jfr", "print", "--json", "--stack-depth", "96", "--events",
                           "jdk.ExecutionSample", args.file], capture_output=True, text=True,
                          check=True).stdout
    events = json.loads(text)["recording"]["events"]
    selfs: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    threads: collections.Counter = collections.Counter()
    n = 0
    for e in events:
        thread = ((e.get("values", {}).get("sampledThread") or {}).get("javaName")) or "?"
        if args.thread and args.thread not in thread:
            continue
        frames = frames_of(e)
        if not frames:
            continue
        n += 1
        threads[thread.rstrip("0123456789 -")] += 1
        selfs[frames[0]] += 1
        inclusive.update(set(frames))
    print(f"{n} samples")
    for title, counter in (("threads", threads), ("self", selfs), ("inclusive", inclusive)):
        print(f"\n{title}:")
        for name, k in counter.most_common(args.top):
            print(f"{100 * k / max(n, 1):5.1f}%  {k:6d}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
