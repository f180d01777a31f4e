"""A minute and an hour as ints, and an hour's totals as the state topic's record.

A minute is an int: minutes since 0001-01-01 00:00 (proleptic Gregorian), an hour is minute // 60.
The state topic is compacted and holds one record per hour, key `hour_key(h)`, value
`encode_hour(...)` (a tombstone once the hour is evicted); pipeline/totals.py holds them in memory.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from datetime import date
from operator import index

import numpy as np

MINUTE_TEXT_LEN = 16  # 'YYYY-MM-DD HH:MM'
# One past the last minute of 9999-12-31: minute indexes are 0 <= m < MINUTE_END.
MINUTE_END = date.max.toordinal() * 1440
HOUR_END = MINUTE_END // 60
# Versioned, so a later layout can sit beside this one in the same compacted topic.
HOUR_MAGIC = b"LCH1"
HOUR_KEY_PREFIX = b"totals/"
# The largest total an int64 record field holds.
INT64_MAX = 2**63 - 1
# Total bytes per encoded minute: a uint8 offset and an int64 total.
_MINUTE_RECORD_BYTES = 1 + 8
_I64 = np.dtype("<i8")


def minute_index(text: str | bytes) -> int:
    """'YYYY-MM-DD HH:MM' or 'YYYY-MM-DD HH:MM:00' (str or ASCII bytes) -> minutes since
    0001-01-01 00:00: (date.toordinal() - 1) * 1440 + hh * 60 + mm. ValueError on anything else
    (other seconds than :00 included)."""
    s = bytes(text).decode("ascii") if isinstance(text, bytes | bytearray | memoryview) else text
    if not isinstance(s, str):
        raise TypeError(f"minute text must be str or bytes, not {type(text).__name__}")
    if len(s) == MINUTE_TEXT_LEN + 3 and s.endswith(":00"):
        s = s[:MINUTE_TEXT_LEN]
    if (len(s) != MINUTE_TEXT_LEN or s[4] != "-" or s[7] != "-" or s[10] != " " or s[13] != ":"
            # isascii: str.isdigit also takes other scripts' digits, which int() would parse.
            or not s.isascii() or not (s[:4] + s[5:7] + s[8:10] + s[11:13] + s[14:16]).isdigit()):
        raise ValueError(f"not a minute 'YYYY-MM-DD HH:MM[:00]': {text!r}")
    hh, mm = int(s[11:13]), int(s[14:16])
    if hh > 23 or mm > 59:
        raise ValueError(f"not a minute 'YYYY-MM-DD HH:MM[:00]': {text!r}")
    # date() rejects year 0000, month 13, 2001-02-29 ... with ValueError.
    day = date(int(s[:4]), int(s[5:7]), int(s[8:10]))
    return (day.toordinal() - 1) * 1440 + hh * 60 + mm


def minute_text(idx: int) -> str:
    """Inverse of minute_index: -> 'YYYY-MM-DD HH:MM:00'."""
    idx = index(idx)
    if not 0 <= idx < MINUTE_END:
        raise ValueError(f"minute index out of range: {idx}")
    days, m = divmod(idx, 1440)
    return f"{date.fromordinal(days + 1).isoformat()} {m // 60:02d}:{m % 60:02d}:00"


def hour_key(hour: int) -> bytes:
    """Hour index (= minute // 60) -> b'totals/YYYY-MM-DD HH'."""
    hour = index(hour)
    if not 0 <= hour < HOUR_END:
        raise ValueError(f"hour index out of range: {hour}")
    return HOUR_KEY_PREFIX + minute_text(hour * 60)[:13].encode("ascii")


def parse_hour_key(key: bytes | None) -> int | None:
    """Inverse of hour_key; None for any key that is not a well-formed totals key."""
    if key is None or len(key) != len(HOUR_KEY_PREFIX) + 13 or not key.startswith(HOUR_KEY_PREFIX):
        return None
    try:
        return minute_index(key[len(HOUR_KEY_PREFIX):] + b":00") // 60
    except ValueError:
        return None


def encode_hour(minutes: Mapping[int, int]) -> bytes:
    """{minute-of-hour 0..59: total} -> b'LCH1', n uint8 offsets ascending, n '<i8' totals.

    Entries whose total is 0 are left out (a minute exists only with a positive total).
    """
    items = sorted((index(o), index(t)) for o, t in minutes.items() if t)
    for o, t in items:
        if not 0 <= o < 60 or not 0 < t <= INT64_MAX:
            raise ValueError(f"bad hour entry: minute {o}, total {t}")
    return b"".join((HOUR_MAGIC, bytes(o for o, _ in items),
                     struct.pack(f"<{len(items)}q", *(t for _, t in items))))


def split_hour(value: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Magic and length checked; read-only views (no copy) of the offsets and the totals."""
    body = len(value) - len(HOUR_MAGIC)
    if not value.startswith(HOUR_MAGIC):
        raise ValueError(f"not a totals hour record (magic {bytes(value[:4])!r})")
    if body % _MINUTE_RECORD_BYTES:
        raise ValueError(f"totals hour record of bad length {len(value)}")
    n = body // _MINUTE_RECORD_BYTES
    start = len(HOUR_MAGIC)
    return (np.frombuffer(value, np.uint8, n, start),
            np.frombuffer(value, _I64, n, start + n))


def decode_hour(value: bytes) -> tuple[np.ndarray, np.ndarray]:
    """-> (uint8 minute offsets, int64 totals), read-only views of `value`.

    ValueError on a bad magic or length, and on offsets not ascending in 0..59 or a total <= 0.
    """
    offsets, totals = split_hour(value)
    # Compared, not np.diff'ed: a uint8 difference wraps (1 - 2 == 255).
    if (len(offsets) and offsets[-1] >= 60) or (offsets[1:] <= offsets[:-1]).any() \
            or (totals <= 0).any():
        raise ValueError("totals hour record: offsets not ascending in 0..59 or a total <= 0")
    return offsets, totals
