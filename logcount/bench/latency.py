"""Steady-state latency and recovery: a producer at a fixed rate, a read_committed reader.

Probe lines carry minutes of their own (one new minute per probe, far from the data's), so the
first time the reader sees a probe's minute in a committed total, that total includes the probe:
its latency is that moment minus the moment it was handed to the producer. Filler lines (the
synthetic data) make up the rest of the rate, so the stage works at the full load.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from logcount.connectors import kafka_io

TICK_S = 0.05  # the producer sends rate*TICK_S lines per tick, one of them a probe
_PROBE_BASE = datetime(2031, 1, 1)


def probe_minute(k: int) -> str:
    return (_PROBE_BASE + timedelta(minutes=k)).strftime("%Y-%m-%d %H:%M:00")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (pure): the smallest value with at least q% at or below it."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


class ProbeReader(threading.Thread):
    """Reads the output topic (read_committed) and notes when each probe minute first shows."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.seen: dict[Any, float] = {}  # probe -> when it was first seen
        self.stop = threading.Event()
        self.c = Consumer(kafka_io.client_config(bootstrap, None, **{
            "group.id": group, "isolation.level": "read_committed",
            "enable.auto.commit": False}))
        parts = self.c.list_topics(topic, timeout=30).topics[topic].partitions
        self.c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])

    def run(self) -> None:
        # poll(), not consume(num_messages=...): librdkafka's batch consume returns only when
        # the batch is full or its timeout passes, so every latency included up to 50 ms of the
        # instrument's own wait; poll() hands over each record as soon as the client has it.
        while not self.stop.is_set():
            m = self.c.poll(0.05)
            if m is not None and m.error() is None and m.key():
                self.record(m, time.monotonic())
        self.c.close()

    def record(self, m, now: float) -> None:
        """A committed output record: its probe minute was first seen now, if not before (a
        grouped record's key is a JSON array, the minute first: logcount/core/records.py)."""
        key = m.key().decode()
        self.seen.setdefault(json.loads(key)[0] if key.startswith("[") else key, now)


class RateProducer(threading.Thread):
    """`rate` lines/s for `seconds`: filler lines and one probe per tick."""

    def __init__(self, bootstrap: str, topic: str, filler: Sequence[bytes], rate: int,
                 seconds: float, partitions: int, first_probe: int = 0,
                 keys: Sequence[bytes] | None = None) -> None:
        super().__init__(daemon=True)
        self.sent: dict[str, float] = {}
        self.lines = 0
        self.keys = keys  # the filler's record keys, in turn (None: no key)
        self.args = (topic, filler, rate, seconds, partitions, first_probe)
        self.stop = threading.Event()
        # linger 5 ms: a record waits at most that long in the client; the latency is the stage's.
        self.p = Producer(kafka_io.client_config(bootstrap, None, **{
            "linger.ms": 5, "enable.idempotence": True, "compression.type": "lz4"}))

    def run(self) -> None:
        topic, filler, rate, seconds, partitions, k = self.args
        per_tick = max(1, int(rate * TICK_S))
        start = time.monotonic()
        i = 0
        tick = 0
        while not self.stop.is_set() and time.monotonic() - start < seconds:
            minute = probe_minute(k)
            self.p.produce(topic, f"{minute[:17]}07 ERROR probe {k}".encode(),
                           partition=k % partitions)
            self.sent[minute] = time.monotonic()
            k += 1
            for _ in range(per_tick - 1):
                self.p.produce(topic, filler[i % len(filler)], partition=(i // 100) % partitions,
                               key=self.keys[i % len(self.keys)] if self.keys else None)
                i += 1
            self.lines += per_tick
            self.p.poll(0)
            tick += 1
            delay = start + tick * TICK_S - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.p.flush(30)
        self.next_probe = k

    def achieved_rate(self, seconds: float) -> float:
        return self.lines / seconds if seconds else 0.0
