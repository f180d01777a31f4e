"""A deterministic synthetic log: realistic lines, minutes out of order, some malformed (pure)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta

__all__ = ["synthetic_lines"]

_BASE = datetime(2017, 7, 30)
# Padded levels as in the seed data ("INFO " is a level followed by padding).
_LEVELS = (b"DEBUG", b"INFO ", b"WARN ", b"ERROR")
_WEIGHTS = (25, 45, 15, 15)
_MESSAGES = (
    b"connection to db-primary timed out after 30000 ms",
    b"user login succeeded for account",
    b"cache miss for key session",
    b"request completed in 23 ms status=200 path=/api/v1/orders",
    b"disk usage at 91 percent on /var/lib/data",
    b"retrying upstream call attempt 3 of 5",
)
_MALFORMED = (
    b"",
    b"\x00\x01\x02binary garbage\xff\xfe",
    b"2017-02-30 10:00:00 ERROR february has no 30th",
    b"2017-07-30 25:00:00 ERROR hour 25",
    b"Jul 30 14:09:08 ERROR wrong timestamp format",
    b"2017-07-30 14:09:08",
    b"2017-07-30T14:09:08 ERROR iso separator",
)


def synthetic_lines(n: int, seed: int, malformed_ratio: float = 0.01,
                    span_minutes: int = 24 * 60) -> Iterator[bytes]:
    """`n` lines of 60-100 bytes over `span_minutes` minutes, in random order.

    About `malformed_ratio` of them are malformed; some valid ones carry non-UTF-8 message bytes
    or a trailing \\r, which the contract counts normally.
    """
    rng = random.Random(seed)
    span_s = span_minutes * 60
    for i in range(n):
        r = rng.random()
        if r < malformed_ratio:
            yield _MALFORMED[rng.randrange(len(_MALFORMED))]
            continue
        ts = (_BASE + timedelta(seconds=rng.randrange(span_s))).strftime("%Y-%m-%d %H:%M:%S")
        level = rng.choices(_LEVELS, _WEIGHTS)[0]
        msg = _MESSAGES[rng.randrange(len(_MESSAGES))]
        line = b"%s %s %s id=%d" % (ts.encode(), level, msg, i)
        if r > 0.998:
            line += b" \xc3\x28 invalid utf-8"
        elif r > 0.996:
            line += b"\r"
        yield line
