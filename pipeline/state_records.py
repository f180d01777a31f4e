"""The state topic's records (pure): their keys, the progress record's JSON, the claim, and the
reading of the topic's last value per key back into them (pipeline/state.py says what each
holds)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from logcount.core.errors import StateRefused
from logcount.pipeline.closing import ClosingState
from logcount.pipeline.hour_records import minute_index, minute_text, parse_hour_key
from logcount.pipeline.series import (
    cell_key,
    chunk_key,
    name_key,
    parse_cell_key,
    parse_chunk_key,
    parse_name_key,
)
from logcount.pipeline.state_identity import Identity

__all__ = ["CLAIM_KEY", "FORMAT", "PROGRESS_KEY", "STATE_SUFFIX", "ProgressRecord",
           "SeriesRecords", "claim_value", "claimant", "decode_records", "decode_series",
           "state_topic_name"]

FORMAT = 1
STATE_SUFFIX = "-state"
PROGRESS_KEY = b"progress"
CLAIM_KEY = b"claim"


def state_topic_name(output_topic: str) -> str:
    """The state topic's name: the output topic plus a suffix, so one prefixed ACL covers both."""
    return output_topic + STATE_SUFFIX


@dataclass(frozen=True)
class ProgressRecord:
    identity: Identity
    offsets: dict[int, int]  # input partition -> position the totals include (exclusive)
    watermark: int | None = None  # minute index, see FUTURE_SLACK_MINUTES
    # Minutes before this were evicted (--lateness-horizon): closed for good, whatever a later
    # start's horizon says, since their totals are no longer known.
    closed_before: int | None = None
    # --emit-final's: the final topic, the grace and the closing facts (pipeline/closing.py).
    # Absent without the flag, so such a record stays byte for byte what it was.
    closing: ClosingState | None = None

    def encode(self) -> bytes:
        i = self.identity
        more = {} if self.closing is None else {"closing": self.closing.to_json()}
        return json.dumps({
            "format": FORMAT, "input_topic": i.input_topic, "input_topic_id": i.input_topic_id,
            "output_topic": i.output_topic, "output_topic_id": i.output_topic_id,
            "level": i.level, "counting": dict(i.counting),
            "offsets": {str(p): o for p, o in sorted(self.offsets.items())},
            "watermark": None if self.watermark is None else minute_text(self.watermark),
            "closed_before": (None if self.closed_before is None
                              else minute_text(self.closed_before)),
            **more,
        }, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> ProgressRecord:
        try:
            v = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"progress record is not JSON: {exc}") from None
        if not isinstance(v, dict) or v.get("format") != FORMAT:
            got = v.get("format") if isinstance(v, dict) else None
            raise ValueError(f"progress record has format {got!r}; this logcount reads {FORMAT}")
        counting = v.get("counting") or {}
        if not isinstance(counting, dict):
            raise ValueError("progress record's counting settings are not an object")
        ident = Identity(v["input_topic"], v["input_topic_id"], v["output_topic"],
                         v["output_topic_id"], v["level"],
                         tuple(sorted((str(k), str(x)) for k, x in counting.items())))
        wm, closed = v.get("watermark"), v.get("closed_before")
        closing = None if v.get("closing") is None else ClosingState.from_json(v["closing"])
        return cls(ident, {int(p): int(o) for p, o in v["offsets"].items()},
                   None if wm is None else minute_index(wm),
                   None if closed is None else minute_index(closed), closing)


def claim_value(instance: str, host: str, pid: int, at: str) -> bytes:
    """The claim record's value: who took the transactional id, and when (for an operator)."""
    return json.dumps({"instance": instance, "host": host, "pid": pid, "at": at}).encode()


def claimant(records: Mapping[bytes, bytes]) -> str | None:
    """The instance whose claim is the state topic's last (None: no claim, or unreadable).

    The rule of a stage whose Kafka call hung (pipeline/clients.py): it may replace its clients,
    and so fence whoever holds the transactional id, only while this is still itself."""
    raw = records.get(CLAIM_KEY)
    if raw is None:
        return None
    try:
        got = json.loads(raw).get("instance")
    except (ValueError, AttributeError):
        return None
    return got if isinstance(got, str) else None


def decode_records(records: Mapping[bytes, bytes], topic: str
                   ) -> tuple[ProgressRecord | None, dict[int, bytes]]:
    """The state topic's last value per key -> (progress or None, {hour: encoded totals})."""
    progress = None
    hours: dict[int, bytes] = {}
    for key, value in records.items():
        if key == PROGRESS_KEY:
            try:
                progress = ProgressRecord.decode(value)
            except (ValueError, KeyError, TypeError) as exc:
                raise StateRefused(f"state topic {topic}: {exc}; it was written by another "
                                   f"program or version - use another output topic") from None
            continue
        if key == CLAIM_KEY:  # who holds the transactional id: not part of the counts
            continue
        if (parse_cell_key(key) is not None or parse_chunk_key(key) is not None
                or parse_name_key(key) is not None):
            continue  # a series' (decode_series)
        hour = parse_hour_key(key)
        if hour is None:
            raise StateRefused(f"state topic {topic} holds a record with key {key[:40]!r} that "
                               f"logcount did not write - use another output topic")
        hours[hour] = value
    return progress, hours


@dataclass(frozen=True)
class SeriesRecords:
    """The state topic's --group-by records: names {id: tuple JSON}, chunks {(chunk, hour):
    bytes}, and the first layout's cells {(id, hour): bytes}."""

    names: dict[int, bytes] = field(default_factory=dict)
    cells: dict[tuple[int, int], bytes] = field(default_factory=dict)
    chunks: dict[tuple[int, int], bytes] = field(default_factory=dict)

    def keys(self) -> list[bytes]:
        return ([name_key(i) for i in sorted(self.names)]
                + [cell_key(i, h) for i, h in sorted(self.cells)]
                + [chunk_key(c, h) for c, h in sorted(self.chunks)])


def decode_series(records: Mapping[bytes, bytes]) -> SeriesRecords:
    """The state topic's last value per key -> its series records."""
    out = SeriesRecords()
    for key, value in records.items():
        cell = parse_cell_key(key)
        if cell is not None:
            out.cells[cell] = value
            continue
        chunk = parse_chunk_key(key)
        if chunk is not None:
            out.chunks[chunk] = value
            continue
        sid = parse_name_key(key)
        if sid is not None:
            out.names[sid] = value
    return out
