"""The records the stage writes to Kafka, encoded and decoded in one place (docs/contract.md).

    output  key: the minute (`YYYY-MM-DD HH:MM:00`); value: that minute's absolute total
            `{"log_time": ..., "log_count": N, "level": LABEL}`
    DLQ     key: `topic/partition/offset` of the line; value: where it was, why, and its first
            bytes as base64 and as text

The driver encodes them; the sink, the bench and the tests decode them with the same functions.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class MinuteTotal:
    """One output record: a minute's absolute total of the counted lines."""

    minute: str
    count: int
    level: str


@dataclass(frozen=True)
class DeadLetter:
    """One DLQ record: a line the stage did not count, and why."""

    topic: str
    partition: int
    offset: int
    reason: str
    raw_length: int
    raw_prefix: bytes


def encode_total(total: MinuteTotal) -> tuple[bytes, bytes]:
    value = {"log_time": total.minute, "log_count": total.count, "level": total.level}
    return total.minute.encode(), json.dumps(value).encode()


def decode_total(value: bytes) -> MinuteTotal:
    """The output record's value; ValueError (KeyError, TypeError included) when it is not one."""
    try:
        v = json.loads(value)
        return MinuteTotal(str(v["log_time"]), int(v["log_count"]), str(v.get("level", "")))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not an output record: {exc!r}") from exc


def encode_dead_letter(d: DeadLetter) -> tuple[bytes, bytes]:
    value = {
        "topic": d.topic, "partition": d.partition, "offset": d.offset,
        "reason": d.reason, "raw_length": d.raw_length,
        "raw_prefix_base64": base64.b64encode(d.raw_prefix).decode(),
        "raw_prefix_text": d.raw_prefix.decode("utf-8", errors="replace"),
    }
    return f"{d.topic}/{d.partition}/{d.offset}".encode(), json.dumps(value).encode()


def decode_dead_letter(value: bytes) -> DeadLetter:
    v = json.loads(value)
    return DeadLetter(v["topic"], int(v["partition"]), int(v["offset"]), v["reason"],
                      int(v["raw_length"]), base64.b64decode(v["raw_prefix_base64"]))
