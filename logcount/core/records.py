"""The records the stage writes to Kafka, encoded and decoded in one place (docs/contract.md).

    output  key: the minute (`YYYY-MM-DD HH:MM:00`); value: that minute's absolute total
            `{"log_time": ..., "log_count": N, "level": LABEL}`; with --group-by the key is the
            compact JSON array `["YYYY-MM-DD HH:MM:00","v1",...]` (UTF-8, unambiguous for any
            value) and the value adds `"dims": {"NAME": "v1", ...}`, that series' total
    DLQ     key: `topic/partition/offset` of the line; value: where it was, why, and its first
            bytes as base64 and as text
    final   (--emit-final) key: the window's start `YYYY-MM-DD HH:MM:00` for every record of the
            window, so they keep their order; value: a series' final total, as the output's
            plus `"final": true` and the window (`window_start`, `window_end`, `grace`), or,
            last, the window's closed record (`"closed": true`, `series`, `log_count`: lines)

The driver encodes them; the sink, the bench and the tests decode them with the same functions.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MinuteTotal:
    """One output record: a minute's absolute total of the counted lines."""

    minute: str
    count: int
    level: str
    dims: tuple[tuple[str, str], ...] = ()  # (NAME, value) in --group-by order; () without

    @property
    def dims_dict(self) -> dict[str, str]:
        return dict(self.dims)


@dataclass(frozen=True)
class DeadLetter:
    """One DLQ record: a line the stage did not count, and why."""

    topic: str
    partition: int
    offset: int
    reason: str
    raw_length: int
    raw_prefix: bytes


# The encoders json.dumps would build on every call with these arguments (the same bytes): a
# grouped batch encodes a record per series, 10,000 at the --max-series default.
# Figures: docs/tuning.md#chunked-series-records
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_UNESCAPED = json.JSONEncoder(ensure_ascii=False)


def series_key(minute: str, values: tuple[str, ...]) -> bytes:
    """A grouped record's key: the minute and the values as a compact JSON array, UTF-8."""
    return _COMPACT.encode([minute, *values]).encode()


def encode_total(total: MinuteTotal) -> tuple[bytes, bytes]:
    value: dict = {"log_time": total.minute, "log_count": total.count, "level": total.level}
    if not total.dims:
        return total.minute.encode(), json.dumps(value).encode()
    value["dims"] = dict(total.dims)
    return (series_key(total.minute, tuple(v for _, v in total.dims)),
            _UNESCAPED.encode(value).encode())


_MINUTES_HELD = 4096  # the encoder's minutes, kept between batches up to this many


class TotalEncoder:
    """encode_total of ungrouped totals, byte for byte, with each minute's key and the value's
    head made once and kept between batches (a caught-up batch touches the same minutes again):
    ~1,250 records a batch at 20,000 lines/s of a day's replay.
    Figures: docs/tuning.md#total-records"""

    def __init__(self, level: str) -> None:
        self.tail = (', "level": ' + json.dumps(level) + "}").encode()
        self.minutes: dict[Any, tuple[bytes, bytes]] = {}

    def encode_all(self, totals: Iterable[tuple[Any, int]],
                   text: Callable[[Any], str] = str) -> list[tuple[bytes, bytes]]:
        """The (key, value) of each (minute, count); `text(minute)`: the minute as text, read
        once per minute held."""
        minutes, tail = self.minutes, self.tail
        out = []
        for minute, count in totals:
            m = minutes.get(minute)
            if m is None:
                if len(minutes) >= _MINUTES_HELD:
                    minutes.clear()
                t = text(minute)
                head = '{"log_time": ' + json.dumps(t) + ', "log_count": '
                m = minutes[minute] = (t.encode(), head.encode())
            out.append((m[0], b"".join((m[1], b"%d" % int(count), tail))))
        return out


class SeriesEncoder:
    """encode_total of grouped totals, byte for byte, with each series' JSON text (its key's
    tail, its "dims" object) made once: ~1,000 records a batch at 10,000 live series. Holds one
    entry per series encoded (the named set, bounded by --max-series).
    Figures: docs/tuning.md#collected-rows"""

    def __init__(self, level: str, names: tuple[str, ...]) -> None:
        self.level = (', "level": ' + _UNESCAPED.encode(level) + ', "dims": ').encode()
        self.names = names
        self.series: dict[tuple[str, ...], tuple[bytes, bytes]] = {}
        self.minutes: dict[str, tuple[bytes, bytes]] = {}  # a batch's records share a few

    def encode(self, minute: str, values: tuple[str, ...], count: int) -> tuple[bytes, bytes]:
        return self.encode_all([(minute, values, count)])[0]

    def encode_all(self, totals: Iterable[tuple[Any, tuple[str, ...], int]],
                   text: Callable[[Any], str] = str) -> list[tuple[bytes, bytes]]:
        """The (key, value) of each (minute, dimension values, count); `text(minute)`: the
        minute as text. A run of one minute's totals reads its text once."""
        series, minutes, level = self.series, self.minutes, self.level
        out = []
        last = m = None
        for minute, values, count in totals:
            if minute != last or m is None:
                last, t = minute, text(minute)
                m = minutes.get(t)
                if m is None:
                    if len(minutes) >= _MINUTES_HELD:
                        minutes.clear()
                    m = minutes[t] = (
                        ("[" + _COMPACT.encode(t)).encode(),
                        ('{"log_time": ' + _UNESCAPED.encode(t) + ', "log_count": ').encode())
            s = series.get(values)
            if s is None:
                s = series[values] = (
                    ("".join("," + _COMPACT.encode(v) for v in values) + "]").encode(),
                    (_UNESCAPED.encode(dict(zip(self.names, values, strict=True))) + "}")
                    .encode())
            out.append((m[0] + s[0], b"".join((m[1], b"%d" % int(count), level, s[1]))))
        return out


def decode_total(value: bytes) -> MinuteTotal:
    """The output record's value; ValueError (KeyError, TypeError included) when it is not one."""
    try:
        return _total(json.loads(value))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not an output record: {exc!r}") from exc


def _dims(v: dict) -> tuple[tuple[str, str], ...]:
    dims = v.get("dims") or {}
    if not isinstance(dims, dict):
        raise TypeError("dims is not an object")
    return tuple((str(k), str(x)) for k, x in dims.items())


def _total(v: dict) -> MinuteTotal:
    return MinuteTotal(str(v["log_time"]), int(v["log_count"]), str(v.get("level", "")),
                       _dims(v))


@dataclass(frozen=True)
class FinalRecord:
    """One final topic record: a series' final total of a window, or (`closed`) the record that
    says the window is closed, with how many series records came before it and their lines."""

    window_start: str  # 'YYYY-MM-DD HH:MM:00'
    window_end: str
    grace: str  # the --emit-final it closed with, as written ('1m')
    level: str
    count: int  # the series' total, or, closed, the window's lines
    dims: tuple[tuple[str, str], ...] = ()
    closed: bool = False
    series: int = 0  # closed: the series records of the window


def encode_final(r: FinalRecord) -> tuple[bytes, bytes]:
    value: dict = {"log_time": r.window_start, "log_count": r.count, "level": r.level}
    if r.dims:
        value["dims"] = dict(r.dims)
    value.update({"final": True, "window_start": r.window_start, "window_end": r.window_end,
                  "grace": r.grace})
    if r.closed:
        value.update({"closed": True, "series": r.series})
    return r.window_start.encode(), _UNESCAPED.encode(value).encode()


def decode_final(value: bytes) -> FinalRecord:
    """A final topic record's value; ValueError when it is not one."""
    try:
        v = json.loads(value)
        if v.get("final") is not True:
            raise TypeError("no \"final\": true")
        return _final(v)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a final record: {exc!r}") from exc


def _final(v: dict) -> FinalRecord:
    return FinalRecord(str(v["window_start"]), str(v["window_end"]), str(v["grace"]),
                       str(v.get("level", "")), int(v["log_count"]), _dims(v),
                       v.get("closed") is True, int(v.get("series", 0)))


def decode_record(value: bytes) -> MinuteTotal | FinalRecord:
    """What the sink reads, parsed once: a final topic record when it has `"final": true`
    (decode_final), else an output record (decode_total); ValueError when it is neither."""
    try:
        v = json.loads(value)
        if not isinstance(v, dict):
            raise TypeError(f"a JSON {type(v).__name__}, not an object")
        return _final(v) if v.get("final") is True else _total(v)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not an output or final record: {exc!r}") from exc


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
