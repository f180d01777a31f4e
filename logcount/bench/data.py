"""The benchmark's input: synthetic lines generated once, written to as many topics as needed."""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import Producer

from logcount.connectors import kafka_io
from logcount.connectors.produce import deliver_all
from logcount.formats.shapes import expected_from_records, synthetic_lines, synthetic_records


def generate(n: int, seed: int) -> list[bytes]:
    return list(synthetic_lines(n, seed))


def generate_with_totals(n: int, seed: int) -> tuple[list[bytes], dict[str, int]]:
    """generate()'s lines and their ERROR count per minute, in one pass: the totals come from the
    generator's own record of each line (logcount/formats/shapes.py), not from any contender's
    parser."""
    lines: list[bytes] = []

    def kept(records):
        for r in records:
            lines.append(r.value)
            yield r

    totals = expected_from_records(kept(synthetic_records("seed", n, seed)), ("ERROR",))
    return lines, totals


def write_topic(bootstrap: str, topic: str, lines: Sequence[bytes], partitions: int,
                repeat: int = 1, on_progress=None) -> int:
    """Write `lines` (`repeat` times) round-robin in blocks over `partitions`; return the count.

    Each record is keyed by its partition number: Quix Streams' windows need a key, and keying
    here spares Quix a repartition topic (generous to it); no other contender reads the key.
    """
    kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, partitions)
    p = Producer(kafka_io.client_config(bootstrap, None, **{
        "linger.ms": 20, "batch.size": 1_000_000, "compression.type": "lz4",
        "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000}))
    keys = [str(i).encode() for i in range(partitions)]
    block = 1000

    def records():
        n = 0
        for _ in range(repeat):
            for i, line in enumerate(lines):
                part = (i // block) % partitions
                yield line, keys[part], part
                n += 1
                if on_progress and n % 100_000 == 0:
                    on_progress(100_000)

    return deliver_all(p, topic, records())
