"""An independent reading of docs/contract.md's input line rule, for checking logcount.

Written char by char from the contract's words, sharing nothing with pipeline/lines.py (which
uses a regex and strptime), so that the two can be held against each other.
"""

from __future__ import annotations

from collections import Counter

DIGITS = frozenset(b"0123456789")
LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
# YYYY-MM-DD HH:MM:SS: which positions hold digits, which hold which separator.
_SHAPE = "dddd-dd-dd dd:dd:dd"


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def reference_parse(raw: bytes) -> tuple[str, str] | None:
    """(minute 'YYYY-MM-DD HH:MM:00', level) for a line that counts, None for a malformed one."""
    if raw[-1:] == b"\r":  # a trailing \r is ignored (one)
        raw = raw[:-1]
    if len(raw) < len(_SHAPE) + 2:  # timestamp, a space, at least one letter
        return None
    for i, shape in enumerate(_SHAPE):
        c = raw[i]
        if (shape == "d" and c not in DIGITS) or (shape != "d" and c != ord(shape)):
            return None
    if raw[19] != ord(" "):
        return None
    n = len(_SHAPE) + 1
    j = n
    while j < len(raw) and raw[j] in LETTERS:
        j += 1
    if j == n or (j < len(raw) and raw[j] != ord(" ")):
        return None  # no level, or the level runs into something other than a space
    y, mo, d = int(raw[0:4]), int(raw[5:7]), int(raw[8:10])
    h, mi, s = int(raw[11:13]), int(raw[14:16]), int(raw[17:19])
    if not (y >= 1 and 1 <= mo <= 12 and 1 <= d <= _days_in_month(y, mo)):
        return None
    if not (h <= 23 and mi <= 59 and s <= 59):
        return None
    return raw[0:16].decode("ascii") + ":00", raw[n:j].decode("ascii")


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
        elif parsed[1] == "ERROR":
            expected[parsed[0]] += 1
    return expected, malformed, aborted_at
