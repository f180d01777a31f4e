"""Restore time and driver RSS for a stage state of N minutes.

    python -m tools.state_restore [--minutes 1440,525600,2628000] [--bootstrap-servers B]

For each size: writes a state topic as the stage writes it (a progress record and one record per
hour, every minute of every hour counted, from 2015-01-01 on), then restores it in a fresh
interpreter exactly as a stage start does (read the topic to its end, decode, check against the
cluster's facts) and reports that process's restore seconds and peak RSS (VmHWM), beside the
peak RSS of the same interpreter with the same imports and no state (the baseline).
Prints one JSON object per size. Uses the embedded stack's broker by default.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from logcount.connectors import kafka_io, state_topic
from logcount.pipeline.hour_records import encode_hour, hour_key, minute_index
from logcount.pipeline.state import PROGRESS_KEY, Identity, ProgressRecord

START = minute_index("2015-01-01 00:00")
IDENT = Identity("bench-in", "IN", "bench-out", "OUT", "ERROR")
# The checkout: the child runs as `-m tools.state_restore` from there, wherever this was started.
CHECKOUT = Path(__file__).resolve().parents[1]


def write_state(bootstrap: str, topic: str, minutes: int) -> None:
    adm = kafka_io.admin(bootstrap)
    kafka_io.ensure_topic(adm, topic, 1, state_topic.STATE_TOPIC_CONFIG)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    hours = (minutes + 59) // 60
    for h in range(START // 60, START // 60 + hours):
        n = min(60, START + minutes - h * 60)
        value = encode_hour({m: 1 + (h + m) % 97 for m in range(n)})
        while True:
            try:
                p.produce(topic, value, hour_key(h))
                break
            except BufferError:
                p.poll(0.1)
    p.produce(topic, ProgressRecord(IDENT, {0: 10}, START + minutes - 1).encode(), PROGRESS_KEY)
    assert p.flush(60) == 0


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def restore(bootstrap: str, topic: str) -> dict:
    """In this (fresh) process: what a stage start does with the state topic."""
    from logcount.pipeline.state import StartFacts, Wanted, check_start, decode_records

    adm = kafka_io.admin(bootstrap)
    base = _peak_rss_mb()
    t0 = time.monotonic()
    table = state_topic.read_table(adm, bootstrap, topic, {}, "bench-state-reader")
    t1 = time.monotonic()
    progress, hours = decode_records(table, topic)
    del table
    facts = StartFacts("IN", "OUT", {0: 0}, {0: 10}, {0: 10})
    start = check_start(progress, hours, facts, Wanted("bench-in", "bench-out", "ERROR"))
    t2 = time.monotonic()
    return {"minutes": len(start.state.totals), "hours": len(hours),
            "read_s": round(t1 - t0, 3), "restore_s": round(t2 - t0, 3),
            "totals_mb": round(start.state.totals.nbytes / 2**20, 1),
            "baseline_rss_mb": round(base, 1), "peak_rss_mb": round(_peak_rss_mb(), 1)}


def measure(bootstrap: str, minutes: int) -> dict:
    topic = f"bench-state-{uuid.uuid4().hex[:8]}"
    t0 = time.monotonic()
    write_state(bootstrap, topic, minutes)
    written = time.monotonic() - t0
    proc = subprocess.run([sys.executable, "-m", "tools.state_restore", "--restore", topic,
                           "--bootstrap-servers", bootstrap], capture_output=True, text=True,
                          timeout=600, cwd=CHECKOUT)
    if proc.returncode != 0:
        raise SystemExit(f"restore failed: {proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    adm = kafka_io.admin(bootstrap)
    adm.delete_topics([topic])[topic].result(30)
    return {"state_minutes": minutes, "write_s": round(written, 2), **out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", default="1440,525600,2628000")
    ap.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    ap.add_argument("--restore", help=argparse.SUPPRESS)  # the child's role
    a = ap.parse_args(argv)
    if a.restore:
        print(json.dumps(restore(a.bootstrap_servers, a.restore)))
        return 0
    for n in (int(x) for x in a.minutes.split(",")):
        print(json.dumps(measure(a.bootstrap_servers, n)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
