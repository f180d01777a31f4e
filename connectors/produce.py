"""`logcount produce`: load log lines (a file, stdin or synthetic) into a topic."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from confluent_kafka import KafkaException, Producer

from connectors import kafka_io
from core.errors import ConfigError, DependencyError
from core.settings import ProduceSettings
from pipeline.lines import Parsed, parse_line
from pipeline.synthetic import synthetic_lines

log = logging.getLogger("logcount.produce")


def file_lines(path: str) -> Iterator[bytes]:
    """Lines of a file (or stdin for '-') as raw bytes, split on \\n only: a \\r stays."""
    if path == "-":
        stream = sys.stdin.buffer
    else:
        try:
            stream = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise ConfigError(f"--file {path}: {exc.strerror}") from exc
    try:
        pending = b""
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            yield from lines
        if pending:
            yield pending
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def deliver_all(producer: Producer, topic: str,
                records: Iterable[tuple[bytes, bytes | None, int]]) -> int:
    """Produce every (value, key, partition) record (partition -1: the partitioner's choice),
    waiting out a full local queue; raise DependencyError unless all were delivered."""
    failed: list[str] = []

    def on_delivery(err, _msg):
        if err is not None:
            failed.append(err.str())

    n = 0
    for value, key, partition in records:
        while True:
            try:
                producer.produce(topic, value, key, partition, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
            except KafkaException as exc:
                raise DependencyError(f"producing to {topic}: {exc.args[0].str()}") from exc
        n += 1
        if n % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left or failed:
        raise DependencyError(f"producing to {topic}: {left} undelivered, {len(failed)} failed"
                              + (f" ({failed[0]})" if failed else ""))
    return n


def produce_lines(bootstrap: str, topic: str, lines: Iterable[bytes], partitions: int = 4,
                  extra: dict[str, str] | None = None, level: str = "ERROR",
                  producer_config: dict | None = None) -> tuple[int, dict[str, int]]:
    """Write every line as one record; return (lines written, expected per-minute counts)."""
    kafka_io.ensure_topic(kafka_io.admin(bootstrap, extra), topic, partitions)
    conf = kafka_io.client_config(bootstrap, extra, **{
        "linger.ms": 20, "batch.size": 1_000_000, "compression.type": "lz4",
        "enable.idempotence": True,
    })
    conf.update(producer_config or {})
    expected: dict[str, int] = {}

    def records():
        for line in lines:
            p = parse_line(line)
            if isinstance(p, Parsed) and p.level == level:
                expected[p.minute] = expected.get(p.minute, 0) + 1
            yield line, None, -1

    n = deliver_all(Producer(conf), topic, records())
    return n, expected


def run_produce(s: ProduceSettings) -> int:
    lines = (file_lines(s.file) if s.file is not None
             else synthetic_lines(s.synthetic or 0, s.seed))
    n, expected = produce_lines(s.bootstrap_servers, s.topic, lines, s.partitions,
                                s.kafka_client_config, s.level)
    if s.expect:
        Path(s.expect).write_text(json.dumps(dict(sorted(expected.items())), indent=1))
    log.info("produced %d lines to %s (%d minutes with %s lines)", n, s.topic, len(expected),
             s.level)
    return 0
