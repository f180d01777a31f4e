"""`logcount produce`: load log lines (a file, stdin or synthetic) into a topic."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from confluent_kafka import KafkaException, Producer

from logcount.connectors import kafka_io
from logcount.core.errors import AuthorizationError, ConfigError, DependencyError
from logcount.core.settings import ProduceSettings
from logcount.formats.rule import check_line_regex, counted_minute, minute_label
from logcount.formats.shapes import SeriesCounts, SyntheticRecord, synthetic_records
from logcount.formats.spec import ALL_LEVELS, FormatError, LineFormat

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


# What a record adds to its value on the wire (batch and record headers): a line this close to
# the limit would be refused by the broker after earlier lines were already written.
RECORD_OVERHEAD = 512
# A loader run by hand: a broker that does not answer within this is reported, not waited for.
BROKER_WAIT_S = 15.0
# librdkafka's default message.max.bytes, when --kafka-config does not set it.
PRODUCER_MAX_BYTES = 1_000_000


@dataclass
class _TooLarge:
    line_no: int = 0
    size: int = 0


def produce_lines(bootstrap: str, topic: str, lines: Iterable[bytes | tuple[bytes, bytes | None]],
                  partitions: int = 4,
                  extra: Mapping[str, str] | None = None,
                  producer_config: dict | None = None) -> int:
    """Write every line (a value, or a (value, key) pair) as one record; return how many were
    written.

    A line over the topic's (or the producer's) message size limit stops the load before it is
    sent: the lines before it are all written (flushed), and the error says which line it was
    and how to resume after it; nothing after it is written."""
    adm = kafka_io.wait_for_broker(bootstrap, extra, BROKER_WAIT_S)
    kafka_io.ensure_topic(adm, topic, partitions)
    conf = kafka_io.client_config(bootstrap, extra, **{
        "linger.ms": 20, "batch.size": 1_000_000, "compression.type": "lz4",
        "enable.idempotence": True,
    })
    conf.update(producer_config or {})
    try:
        topic_max = int(kafka_io.topic_config(adm, topic).get("max.message.bytes",
                                                               PRODUCER_MAX_BYTES))
    except AuthorizationError:  # a loader may lack DescribeConfigs: the producer's limit holds
        topic_max = PRODUCER_MAX_BYTES
    limit = min(topic_max, int(conf.get("message.max.bytes", PRODUCER_MAX_BYTES)))
    limit -= RECORD_OVERHEAD
    too_large = _TooLarge()

    def records():
        for i, line in enumerate(lines, 1):
            value, key = line if isinstance(line, tuple) else (line, None)
            if len(value) > limit:
                too_large.line_no, too_large.size = i, len(value)
                return
            yield value, key, -1

    n = deliver_all(Producer(conf), topic, records())
    if too_large.line_no:
        raise InputTooLarge(
            f"line {too_large.line_no} is {too_large.size:,} bytes, over the limit of "
            f"{limit + RECORD_OVERHEAD:,} (the topic's max.message.bytes and the producer's "
            f"message.max.bytes); the {n:,} lines before it were written to {topic}, nothing "
            f"after; to go on after it: tail -n +{too_large.line_no + 1} FILE | logcount "
            f"produce --file - --topic {topic}", n)
    return n


def recent_records(shape: str, n: int, seed: int, minutes: int, timezone: str = "UTC",
                   dimensions: bool = False) -> list[SyntheticRecord]:
    """`n` synthetic records of the `minutes` whole minutes before now (UTC), in time order (the
    malformed ones first): lines a stage with --emit-final closes live, none of them late."""
    now = datetime.now(UTC).replace(tzinfo=None, second=0, microsecond=0)
    records = synthetic_records(shape, n, seed, timezone=timezone, span_minutes=minutes,
                                start=now - timedelta(minutes=minutes), dimensions=dimensions)
    return sorted(records, key=lambda r: (r.minute is not None, r.minute or 0))


def synthetic_values(records: Iterable[SyntheticRecord], levels: Collection[str],
                     expected: dict[str, int]) -> Iterator[bytes]:
    """The records' values; each record of one of `levels` adds to `expected` (minute -> n) by
    how it was generated, not by parsing it."""
    for r in records:
        if r.minute is not None and (r.level in levels or ALL_LEVELS in levels):
            key = minute_label(r.minute)
            expected[key] = expected.get(key, 0) + 1
        yield r.value


def keyed_values(records: Iterable[SyntheticRecord], levels: Collection[str],
                 expected: dict[str, int], series: SeriesCounts | None
                 ) -> Iterator[tuple[bytes, bytes | None]]:
    """synthetic_values with the records' keys, each counted record also adding to `series`
    (by what the generator wrote, not by parsing)."""
    for r in records:
        if r.minute is not None and (r.level in levels or ALL_LEVELS in levels):
            key = minute_label(r.minute)
            expected[key] = expected.get(key, 0) + 1
        if series is not None:
            series.add(r)
        yield r.value, r.key


def file_values(lines: Iterable[bytes], fmt: LineFormat,
                expected: dict[str, int]) -> Iterator[bytes]:
    """The lines as they are; each that `fmt` counts adds to `expected` (logcount/formats/rule.py,
    the
    pure twin of the stage's rule)."""
    for line in lines:
        key = counted_minute(line, fmt)
        if key is not None:
            expected[key] = expected.get(key, 0) + 1
        yield line


def check_twin(fmt: LineFormat) -> None:
    """The pure twin reads --line-regex with Python's re; a regex only Java reads cannot be
    counted here. One ConfigError line, before any topic is touched."""
    try:
        check_line_regex(fmt)
    except FormatError as exc:
        raise ConfigError(f"{exc}; produce --expect cannot count --file by it: leave out "
                          f"--expect, or write the regex in syntax both read") from None


class InputTooLarge(ConfigError):
    """A line the broker would refuse; `written` lines before it were delivered."""

    def __init__(self, message: str, written: int) -> None:
        super().__init__(message)
        self.written = written


def run_produce(s: ProduceSettings) -> int:
    fmt = s.line_format
    expected: dict[str, int] | None = None
    series: SeriesCounts | None = None
    lines: Iterable[bytes | tuple[bytes, bytes | None]]
    if s.file is not None:
        lines = file_lines(s.file)
        if s.expect:
            check_twin(fmt)
            expected = {}
            lines = file_values(lines, fmt, expected)
    else:
        expected = {}
        records: Iterable[SyntheticRecord]
        if s.recent is not None:
            records = recent_records(s.shape, s.synthetic or 0, s.seed, s.recent,
                                     timezone=s.timezone, dimensions=s.dimensions)
        else:
            records = synthetic_records(s.shape, s.synthetic or 0, s.seed, timezone=s.timezone,
                                        dimensions=s.dimensions)
        if s.dimensions or s.expect_group_by:
            series = SeriesCounts(s.group_by_dims, fmt.levels) if s.expect_group_by else None
            lines = keyed_values(records, fmt.levels, expected, series)
        else:
            lines = synthetic_values(records, fmt.levels, expected)
    try:
        n = produce_lines(s.bootstrap_servers, s.topic, lines, s.partitions,
                          s.kafka_client_config)
    except FormatError as exc:  # the twin met a setting it cannot read: one line, exit 2
        raise ConfigError(str(exc)) from None
    if s.expect and expected is not None:
        # Written whole, then renamed: a reader polling for it (the docker demo's check) never
        # sees half a file.
        tmp = Path(f"{s.expect}.tmp")
        doc = dict(sorted(expected.items())) if series is None else series.document()
        tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False))
        tmp.replace(s.expect)
    if expected is None:
        log.info("produced %d lines to %s", n, s.topic)
    else:
        log.info("produced %d lines to %s (%d minutes with %s lines)", n, s.topic,
                 len(expected), fmt.level_label)
    return 0
