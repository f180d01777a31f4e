"""A flood of distinct dimension values, written fast: `n` Fluent Bit records of one minute, each
from its own namespace (`ns-0000000`, `ns-0000001`, ...), so every record is a new series."""

from __future__ import annotations

import time

from confluent_kafka import Producer


def flood_value(i: int, line: bytes) -> bytes:
    return (b'{"log":"%s","kubernetes":{"namespace_name":"ns-%07d","container_name":"flood"}}'
            % (line, i))


def write_flood(bootstrap: str, topic: str, n: int, line: bytes) -> float:
    """Write the flood (`line`: the log line every record carries); return the seconds taken."""
    t0 = time.monotonic()
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "linger.ms": 50, "batch.size": 1_000_000, "compression.type": "lz4",
                  "queue.buffering.max.messages": 1_000_000})
    for i in range(n):
        value = flood_value(i, line)
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(300) == 0
    return time.monotonic() - t0
