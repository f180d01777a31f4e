"""raw_python_consumer: a confluent-kafka loop that reads the topic to its end and only counts.

No parsing, no transactions, no output: the ceiling of a Python consumer on this machine.
Prints `progress R` at the first record and every PROGRESS_EVERY (logcount/bench/phases.py: cold
start
and steady state), then one JSON line: records, seconds (consumer created -> last record
counted).
"""

from __future__ import annotations

import argparse
import json
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

PROGRESS_EVERY = 100_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap-servers", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--records", type=int, required=True)
    ap.add_argument("--group-id", required=True)
    a = ap.parse_args()
    t0 = time.monotonic()
    c = Consumer({"bootstrap.servers": a.bootstrap_servers, "group.id": a.group_id,
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "enable.partition.eof": True, "log_level": 3,
                  # librdkafka backs off fetching for fetch.queue.backoff.ms (default 1 s) each
                  # time its local queue is full; a loop this fast drains it long before that.
                  "fetch.queue.backoff.ms": 1, "queued.min.messages": 1_000_000})
    parts = c.list_topics(a.topic, timeout=30).topics[a.topic].partitions
    c.assign([TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in parts])
    n = 0
    mark = 1  # the next `progress` line: the first record, then every PROGRESS_EVERY
    eof: set[int] = set()
    while n < a.records and len(eof) < len(parts):
        for m in c.consume(num_messages=10_000, timeout=1.0):
            err, partition = m.error(), m.partition()
            if err is None:
                n += 1
            elif err.code() == -191 and partition is not None:  # _PARTITION_EOF
                eof.add(partition)
        if n >= mark:
            print(f"progress {n}", flush=True)
            mark = (n // PROGRESS_EVERY + 1) * PROGRESS_EVERY
    seconds = time.monotonic() - t0
    c.close()
    print(json.dumps({"records": n, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
