"""quixstreams_eos: the same per-minute ERROR count in Quix Streams, exactly-once.

Runs in its own virtualenv (quixstreams pins an older confluent-kafka than logcount), so it
imports nothing of logcount. The count is a 1-minute tumbling window over the line's own
timestamp with a day of grace (the synthetic minutes arrive out of order), `.final()`: no
output until a window closes, which is the least work Quix can do for the count, so the
comparison is generous to it. Stops after --records input messages (on_message_processed), then
shuts down cleanly (a last checkpoint commit). Prints `progress R` at the first message and
every 100,000 (logcount/bench/phases.py; Quix commits on its own timer, so these are records
processed,
not committed), then one JSON line: records, seconds.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from datetime import UTC, datetime, timedelta

from quixstreams import Application

_PREFIX = re.compile(rb"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) ([A-Za-z]+)(?: |\Z)")


def _parse(raw: bytes | None):
    raw = (raw or b"").removesuffix(b"\r")
    m = _PREFIX.match(raw)
    if not m:
        return None
    try:
        ts = datetime.strptime(m.group(1).decode(), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return ts.replace(tzinfo=UTC), m.group(2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap-servers", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--output-topic", required=True)
    ap.add_argument("--group-id", required=True)
    ap.add_argument("--records", type=int, required=True)
    a = ap.parse_args()
    t0 = time.monotonic()
    seen = 0

    def processed(topic: str, partition: int, offset: int) -> None:
        nonlocal seen
        seen += 1
        if seen == 1 or seen % 100_000 == 0:
            print(f"progress {seen}", flush=True)
        if seen >= a.records:
            app.stop()

    def timestamp(value, headers, ts_ms, ts_type) -> int:
        p = _parse(value)
        return int(p[0].timestamp() * 1000) if p else ts_ms

    with tempfile.TemporaryDirectory() as state_dir:
        app = Application(broker_address=a.bootstrap_servers, consumer_group=a.group_id,
                          auto_offset_reset="earliest", processing_guarantee="exactly-once",
                          state_dir=state_dir, loglevel="WARNING",
                          on_message_processed=processed)
        topic = app.topic(a.topic, value_deserializer="bytes", timestamp_extractor=timestamp)
        out = app.topic(a.output_topic, value_serializer="json")
        sdf = app.dataframe(topic)
        sdf = sdf.filter(lambda v: (p := _parse(v)) is not None and p[1] == b"ERROR")
        sdf = sdf.tumbling_window(timedelta(minutes=1), grace_ms=timedelta(days=1)).count().final()
        sdf.to_topic(out)
        app.run()
    print(json.dumps({"records": seen, "seconds": time.monotonic() - t0}), flush=True)


if __name__ == "__main__":
    main()
