"""The input line format of docs/contract.md, as a pure reference definition.

`YYYY-MM-DD HH:MM:SS LEVEL message`: a line counts for its minute when it starts with a valid
timestamp, one space and a LEVEL word (letters), followed by a space or the end of the line. The
message is never interpreted and may hold any bytes. One trailing `\\r` is ignored. Anything else is
malformed. The Spark job implements the same rule in SQL (pipeline/job.py); a test holds the two
together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Malformed", "Parsed", "parse_line", "REASON_EMPTY", "REASON_FORMAT",
           "REASON_TIMESTAMP", "REASON_LATE", "minute_of"]

REASON_EMPTY = "empty line"
REASON_FORMAT = "does not start with 'YYYY-MM-DD HH:MM:SS LEVEL'"
REASON_TIMESTAMP = "invalid timestamp"
# A counted line older than --lateness-horizon allows (pipeline.state.late_before): well formed,
# but its minute is closed; it goes to the DLQ instead of changing a total.
REASON_LATE = "late"

# \d on a bytes pattern is ASCII 0-9 only; \Z is the very end (no newline allowance in Python).
_PREFIX = re.compile(rb"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) ([A-Za-z]+)(?: |\Z)")


@dataclass(frozen=True, slots=True)
class Parsed:
    minute: str  # "YYYY-MM-DD HH:MM:00"
    level: str


@dataclass(frozen=True, slots=True)
class Malformed:
    reason: str


def minute_of(timestamp: str) -> str:
    """'2017-07-30 14:09:08' -> '2017-07-30 14:09:00' (the text is already validated)."""
    return timestamp[:17] + "00"


def parse_line(raw: bytes) -> Parsed | Malformed:
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if not raw:
        return Malformed(REASON_EMPTY)
    m = _PREFIX.match(raw)
    if m is None:
        return Malformed(REASON_FORMAT)
    ts = m.group(1).decode("ascii")
    try:
        # Calendar and clock check: 2017-02-30, hour 25, second 60 and year 0000 are invalid.
        datetime.strptime(ts, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return Malformed(REASON_TIMESTAMP)
    return Parsed(minute_of(ts), m.group(2).decode("ascii"))


def expected_counts(lines, level: str = "ERROR") -> dict[str, int]:
    """Per-minute counts of `level` lines: what the stage must produce for these lines."""
    out: dict[str, int] = {}
    for raw in lines:
        p = parse_line(raw)
        if isinstance(p, Parsed) and p.level == level:
            out[p.minute] = out.get(p.minute, 0) + 1
    return out
