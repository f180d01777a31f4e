"""An independent reading of docs/contract.md's default input line rule, for checking logcount.

Written char by char from the contract's words (no regex, no strptime, no datetime), sharing
nothing with logcount/formats/ (logcount/formats/rule.py uses a regex and datetime,
logcount/formats/spark.py Spark SQL), so
that they can be held against each other. The rule: `[DATE[T| ]TIME[fraction][zone]] LEVEL ...`,
the timestamp bare or in square brackets, ONE space, a level word of ASCII letters, then a space
or the end; one trailing \\r\\n, \\n or \\r is ignored. A time without a zone is UTC (the
reference knows no --timezone); a zoned one is converted to UTC, which must lie in years 1-9999.
"""

from __future__ import annotations

from collections import Counter

DIGITS = frozenset(b"0123456789")
LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
# YYYY-MM-DD?HH:MM:SS: which positions hold digits, which hold which separator (? is T or space).
_SHAPE = "dddd-dd-dd?dd:dd:dd"
COUNTED_LEVEL = "ERROR"


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _digits(raw: bytes, i: int, n: int) -> int | None:
    """The n-digit number at raw[i:i+n], or None when any of them is not an ASCII digit."""
    if i + n > len(raw):
        return None
    value = 0
    for c in raw[i:i + n]:
        if c not in DIGITS:
            return None
        value = value * 10 + c - 48
    return value


def _zone(raw: bytes, i: int) -> tuple[int | None, int] | None:
    """The optional zone at raw[i:]: (minutes east of UTC or None, index after it); None when a
    zone starts there but is not one (Z, ±HH:MM or ±HHMM, at most ±18:00, minutes below 60)."""
    if i >= len(raw) or raw[i] not in b"Z+-":
        return None, i
    if raw[i] == ord("Z"):
        return 0, i + 1
    sign = -1 if raw[i] == ord("-") else 1
    hh = _digits(raw, i + 1, 2)
    if hh is None:
        return None
    j = i + 3
    if j < len(raw) and raw[j] == ord(":"):
        j += 1
    mm = _digits(raw, j, 2)
    if mm is None or mm > 59 or hh * 60 + mm > 18 * 60:
        return None
    return sign * (hh * 60 + mm), j + 2


def _shift(y: int, mo: int, d: int, minutes: int) -> tuple[int, int, int, int]:
    """Day y-mo-d plus `minutes` (less than a day either way, from 00:00) -> (y, mo, d, minute
    of day), the day carried by hand."""
    if minutes < 0:
        minutes += 1440
        d -= 1
        if d == 0:
            mo -= 1
            if mo == 0:
                y, mo = y - 1, 12
            d = _days_in_month(y, mo)
    elif minutes >= 1440:
        minutes -= 1440
        d += 1
        if d > _days_in_month(y, mo):
            d, mo = 1, mo + 1
            if mo == 13:
                y, mo = y + 1, 1
    return y, mo, d, minutes


def reference_parse(raw: bytes) -> tuple[str, str] | None:
    """(UTC minute 'YYYY-MM-DD HH:MM:00', level as written) for a line that counts for its
    minute, None for a malformed one."""
    if raw[-2:] == b"\r\n":
        raw = raw[:-2]
    elif raw[-1:] in (b"\n", b"\r"):
        raw = raw[:-1]
    bracket = raw[:1] == b"["
    i = 1 if bracket else 0
    if len(raw) < i + len(_SHAPE):
        return None
    for k, shape in enumerate(_SHAPE):
        c = raw[i + k]
        if shape == "d":
            if c not in DIGITS:
                return None
        elif shape == "?":
            if c not in b"T ":
                return None
        elif c != ord(shape):
            return None
    y, mo, d = _digits(raw, i, 4), _digits(raw, i + 5, 2), _digits(raw, i + 8, 2)
    h, mi, s = _digits(raw, i + 11, 2), _digits(raw, i + 14, 2), _digits(raw, i + 17, 2)
    j = i + len(_SHAPE)
    if j < len(raw) and raw[j] in b".,":  # a fraction: 1 to 9 digits, ignored
        k = j + 1
        while k < len(raw) and raw[k] in DIGITS:
            k += 1
        if not 1 <= k - j - 1 <= 9:
            return None
        j = k
    zone = _zone(raw, j)
    if zone is None:
        return None
    offset, j = zone
    if bracket:
        if j >= len(raw) or raw[j] != ord("]"):
            return None
        j += 1
    if j >= len(raw) or raw[j] != ord(" "):
        return None
    n = j + 1
    j = n
    while j < len(raw) and raw[j] in LETTERS:
        j += 1
    if j == n or (j < len(raw) and raw[j] != ord(" ")):
        return None  # no level, or the level runs into something other than a space
    # The shape above let only digits through: every field parsed.
    assert y is not None and mo is not None and d is not None
    assert h is not None and mi is not None and s is not None
    if not (y >= 1 and 1 <= mo <= 12 and 1 <= d <= _days_in_month(y, mo)):
        return None
    if not (h <= 23 and mi <= 59 and s <= 59):
        return None
    y, mo, d, minute = _shift(y, mo, d, h * 60 + mi - (offset or 0))
    if not 1 <= y <= 9999:
        return None
    stamp = f"{y:04d}-{mo:02d}-{d:02d} {minute // 60:02d}:{minute % 60:02d}:00"
    return stamp, raw[n:j].decode("ascii")


def is_counted(level: str) -> bool:
    """The stage counts ERROR lines by default, the level compared case-insensitively."""
    return level.upper() == COUNTED_LEVEL


def expectation(committed, everything) -> tuple[Counter, set, set]:
    """What the stage must produce from its input, recomputed with the parser above: from the
    input's records read read_committed (`committed`) and read_uncommitted (`everything`), the
    ERROR count per minute, the (partition, offset) of every committed malformed line, and those
    of the aborted records."""
    committed_at = {(m.partition(), m.offset()) for m in committed}
    aborted_at = {(m.partition(), m.offset()) for m in everything} - committed_at
    expected: Counter = Counter()
    malformed = set()
    for m in committed:
        parsed = reference_parse(m.value() or b"")
        if parsed is None:
            malformed.add((m.partition(), m.offset()))
        elif is_counted(parsed[1]):
            expected[parsed[0]] += 1
    return expected, malformed, aborted_at
