"""The pure-Python twin of the Spark plan (logcount/formats/spark.py): one record -> its minute and
level, or the reason it goes to the DLQ. `produce --expect`, the tests and the bench use it; the
stage itself parses in the JVM. tests/integration/test_spark_rule.py holds the two together, on
generated records and generated --time-pattern patterns; a pattern is read by
logcount/formats/pattern.py, java.time's own parser in Python.

A minute is an int, minutes since 0001-01-01 00:00 UTC (the state's minute index). Outcomes:
`Parsed(minute, level)` (counted when `level` is one of the format's levels),
`Malformed(reason)`, or with `--continuation-lines skip` `CONTINUED` (a stack trace's
continuation line, CONTINUATION: neither counted nor malformed).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from logcount.formats.spec import (
    DIM_MAX_BYTES,
    EPOCH_MINUTE,
    MINUTE_END,
    Dim,
    FormatError,
    LineFormat,
    TimePattern,
)

__all__ = ["Parsed", "Malformed", "Continued", "CONTINUED", "CONTINUATION", "is_continuation",
           "parse_record", "counted_minute", "expected_counts",
           "check_line_regex",
           "minute_label",
           "REASON_EMPTY", "REASON_FORMAT", "REASON_TIMESTAMP", "REASON_RANGE", "REASON_LATE",
           "REASON_NO_MATCH", "REASON_NOT_JSON", "REASON_LINE_FIELD", "REASON_TIME_FIELD",
           "REASON_NO_LEVEL", "REASON_DIMENSION", "REASONS", "cut_dimension", "expected_series",
           "ISO_TIME", "DEFAULT_LINE"]

REASON_EMPTY = "empty line"
REASON_FORMAT = "does not start with 'YYYY-MM-DD HH:MM:SS LEVEL'"
REASON_TIMESTAMP = "invalid timestamp"
REASON_RANGE = "timestamp out of range"
# A counted line older than --lateness-horizon allows (pipeline.state.late_before): well formed,
# but its minute is closed; it goes to the DLQ instead of changing a total.
REASON_LATE = "late"
REASON_NO_MATCH = "does not match --line-regex"
REASON_NOT_JSON = "not a JSON object"
REASON_LINE_FIELD = "line field missing or not a string"
REASON_TIME_FIELD = "time field missing or not a string or number"
REASON_NO_LEVEL = "no level"
# A --group-by field holding a JSON object or array (checked last: any other reason wins).
REASON_DIMENSION = "invalid dimension"
REASONS = (REASON_EMPTY, REASON_FORMAT, REASON_TIMESTAMP, REASON_RANGE, REASON_LATE,
           REASON_NO_MATCH, REASON_NOT_JSON, REASON_LINE_FIELD, REASON_TIME_FIELD,
           REASON_NO_LEVEL, REASON_DIMENSION)

# ISO 8601 as the default rule and --line-regex's time group take it. Both sides are ASCII-only
# (\d is 0-9 in Java without (?U), and in Python's bytes patterns and under re.ASCII).
ISO_TIME = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"
# The default line rule: the timestamp (bare or in square brackets), ONE space, the level word,
# then a space or the end. Shared with the Spark plan, which anchors it with ^ and ends with \z.
DEFAULT_LINE = rf"(?:\[({ISO_TIME})\]|({ISO_TIME})) ([A-Za-z]+)(?= |$)"
_DEFAULT = re.compile(DEFAULT_LINE.replace("$", r"\Z").encode())
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,]\d{1,9})?"
                  r"(Z|[+-]\d{2}:?\d{2})?", re.ASCII)
_EPOCH_SECONDS_BELOW = 1e11  # epoch seconds below 10^11 (year 5138), milliseconds above

# --continuation-lines skip: a line the line rule refuses that is empty or matches this is part
# of the event before it (docs/contract.md lists it). A Java regex (the plan's rlike) that Python
# reads alike: ASCII classes, \z its only end (Python's \Z).
_NAME = r"[A-Za-z_$][A-Za-z0-9_$]*"
CONTINUATION = (
    r"^(?:[ \t]"  # JVM frames, '\tCaused by:', '\t... 12 more', Python's '  File ...'
    r"|Caused by:|Suppressed:"  # Java's chained and suppressed exceptions
    r"|\.\.\. ?[0-9]+ (?:more|common frames omitted)"  # JVM and Logback, unindented
    r'|Exception in thread "'  # the JVM's uncaught exception handler
    r"|Traceback \(most recent call last\):"  # Python
    r"|During handling of the above exception|The above exception was the direct cause"
    # An exception's own line ('ValueError: bad', 'java.lang.IllegalStateException: x',
    # 'KeyboardInterrupt'): a dotted class name, or one ending as exception classes do.
    rf"|(?:(?:{_NAME}\.)+{_NAME}"
    r"|(?:[A-Za-z_$][A-Za-z0-9_$]*)?(?:Error|Exception|Exit|Interrupt|Warning|Iteration"
    r"|Throwable))(?::|\z))")
_CONTINUATION = re.compile(CONTINUATION.replace(r"\z", r"\Z"), re.ASCII)


@dataclass(frozen=True, slots=True)
class Parsed:
    minute: int  # UTC minute index
    level: str  # upper-cased
    dims: tuple[str, ...] = ()  # the --group-by values, in flag order


@dataclass(frozen=True, slots=True)
class Malformed:
    reason: str


@dataclass(frozen=True, slots=True)
class Continued:
    """A continuation line under --continuation-lines skip (CONTINUATION)."""


CONTINUED = Continued()


class _Bad(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def minute_label(idx: int) -> str:
    """Minute index -> 'YYYY-MM-DD HH:MM:00'."""
    days, m = divmod(idx, 1440)
    return f"{date.fromordinal(days + 1).isoformat()} {m // 60:02d}:{m % 60:02d}:00"


def strip_terminator(raw: bytes) -> bytes:
    """One trailing \\r\\n, \\n or \\r is ignored (Docker's json-file log keeps the \\n)."""
    if raw.endswith(b"\r\n"):
        return raw[:-2]
    if raw.endswith((b"\n", b"\r")):
        return raw[:-1]
    return raw


def parse_record(raw: bytes, fmt: LineFormat,
                 key: bytes | None = None) -> Parsed | Malformed | Continued:
    """One Kafka record (value, and key for a `key` dimension) -> Parsed, Malformed or (with
    --continuation-lines skip) CONTINUED, by `fmt`'s rule; a continuation has no dimensions."""
    try:
        if fmt.kind in ("default", "regex"):
            got = _line(raw, fmt)
            if isinstance(got, Continued):
                return got
            return _with_dims(got[0], fmt, None, got[1], key)
        obj = _json_object(raw)
        if fmt.kind == "json-line":
            line = _field(obj, fmt.json_line_field)
            if not isinstance(line, str):
                raise _Bad(REASON_LINE_FIELD)
            got = _line(line.encode("utf-8", "surrogatepass"), fmt)
            if isinstance(got, Continued):
                return got
            return _with_dims(got[0], fmt, obj, got[1], key)
        return _with_dims(_structured(obj, fmt), fmt, obj, {}, key)
    except _Bad as bad:
        return Malformed(bad.reason)


def cut_dimension(text: str) -> str:
    """A dimension value as the output holds it: at most DIM_MAX_BYTES bytes of UTF-8, cut at a
    character boundary; a lone surrogate (JSON's "\\ud800") is '?', as Spark's variant reads it."""
    b = text.encode("utf-8", "replace")
    return b[:DIM_MAX_BYTES].decode("utf-8", "ignore") if len(b) > DIM_MAX_BYTES else b.decode()


def _dim_value(d: Dim, parsed: Parsed, obj: dict | None, groups: dict, key: bytes | None) -> str:
    if d.kind == "level":
        return cut_dimension(parsed.level)
    if d.kind == "key":
        return cut_dimension((key or b"").decode("utf-8", "replace"))
    if d.kind == "group":
        return cut_dimension(groups.get(d.source) or "")
    assert obj is not None
    v = _field(obj, d.source)
    if isinstance(v, dict | list):
        raise _Bad(REASON_DIMENSION)
    return cut_dimension(_level_text(v))


def _with_dims(parsed: Parsed, fmt: LineFormat, obj: dict | None, groups: dict,
               key: bytes | None) -> Parsed:
    if not fmt.group_by:
        return parsed
    dims = tuple(_dim_value(d, parsed, obj, groups, key) for d in fmt.group_by)
    return Parsed(parsed.minute, parsed.level, dims)


def counted_minute(raw: bytes, fmt: LineFormat) -> str | None:
    """The minute ('YYYY-MM-DD HH:MM:00') a record counts for under `fmt`, None if it does not."""
    p = parse_record(raw, fmt)
    return minute_label(p.minute) if isinstance(p, Parsed) and fmt.counts(p.level) else None


def expected_series(records: Iterable[tuple[bytes | None, bytes]],
                    fmt: LineFormat) -> dict[tuple[str, ...], int]:
    """Counts per (minute label, *dimension values) of (key, value) records `fmt` counts."""
    out: dict[tuple[str, ...], int] = {}
    for key, raw in records:
        p = parse_record(raw, fmt, key)
        if isinstance(p, Parsed) and fmt.counts(p.level):
            k = (minute_label(p.minute), *p.dims)
            out[k] = out.get(k, 0) + 1
    return out


def expected_counts(records: Iterable[bytes], fmt: LineFormat) -> dict[str, int]:
    """Per-minute counts ('YYYY-MM-DD HH:MM:00' -> n) of the lines `fmt` counts."""
    out: dict[str, int] = {}
    for raw in records:
        key = counted_minute(raw, fmt)
        if key is not None:
            out[key] = out.get(key, 0) + 1
    return out


# --- text lines -------------------------------------------------------------------------------


def _line(raw: bytes, fmt: LineFormat) -> tuple[Parsed, dict] | Continued:
    if fmt.continuation == "dlq":
        return _log_line(raw, fmt)
    try:
        return _log_line(raw, fmt)
    except _Bad:
        if is_continuation(strip_terminator(raw)):
            return CONTINUED
        raise


def is_continuation(line: bytes) -> bool:
    """Whether a line (its terminator stripped) that the line rule refused is a continuation:
    empty, or matching CONTINUATION (on the text as Spark decodes it)."""
    return not line or _CONTINUATION.match(line.decode("utf-8", "replace")) is not None


def _log_line(raw: bytes, fmt: LineFormat) -> tuple[Parsed, dict]:
    """-> the parsed line and the regex's named groups (empty for the default rule)."""
    groups: dict = {}
    line = strip_terminator(raw)
    if not line:
        raise _Bad(REASON_EMPTY)
    if fmt.line_regex is None:
        found = _DEFAULT.match(line)
        if found is None:
            raise _Bad(REASON_FORMAT)
        text = (found.group(1) or found.group(2)).decode("ascii")
        level = found.group(3).decode("ascii")
    else:
        # Spark matches the decoded text (invalid UTF-8 becomes U+FFFD), so does the twin.
        m = _python_regex(fmt.line_regex).match(line.decode("utf-8", "replace"))
        if m is None:
            raise _Bad(REASON_NO_MATCH)
        text, level = m.group("time") or "", m.group("level") or ""
        groups = m.groupdict()
    minute = _time_text(text, fmt)
    if not level:
        raise _Bad(REASON_NO_LEVEL)
    return Parsed(minute, level.upper()), groups


# Java's line terminators: its '.' stops at each, its '$' matches before a final one (\r\n too).
_NOT_TERMINATOR = "[^\n\r\x85\u2028\u2029]"
_BEFORE_FINAL_TERMINATOR = "(?=(?:\r\n|[\n\r\x85\u2028\u2029])?\\Z)"


@functools.lru_cache(maxsize=8)
def _python_regex(java: str) -> re.Pattern:
    """A Java regex read by Python's re as Java reads it: named groups spelt (?P<name>); \\d, \\w
    and (?i) ASCII; '.', '$', \\z and \\Z with Java's line terminators (unless (?s) or (?m)
    appear). Java-only syntax (\\p{...}, \\h) fails here: the twin then cannot check that
    format; the stage itself uses Java's."""
    dotall, multiline = "(?s" in java, "(?m" in java
    out: list[str] = []
    i, in_class = 0, False
    while i < len(java):
        c = java[i]
        if c == "\\" and i + 1 < len(java):
            nxt = java[i + 1]
            if not in_class and nxt == "z":
                out.append("\\Z")
            elif not in_class and nxt == "Z":
                out.append(_BEFORE_FINAL_TERMINATOR)
            else:
                out.append(java[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            out.append(c)
            i += 1
            if java[i:i + 1] == "^":
                out.append("^")
                i += 1
            if java[i:i + 1] == "]":  # a ] right after [ or [^ is a literal
                out.append("]")
                i += 1
            continue
        elif c == "." and not dotall:
            c = _NOT_TERMINATOR
        elif c == "$" and not multiline:
            c = _BEFORE_FINAL_TERMINATOR
        elif java.startswith("(?<", i) and java[i + 3:i + 4].isalpha():
            c, i = "(?P<", i + 2
        out.append(c)
        i += 1
    try:
        return re.compile("".join(out), re.ASCII)
    except re.error as exc:
        raise FormatError(f"--line-regex: Python's re cannot read it ({exc}); the stage "
                          f"itself uses Java's") from None


def check_line_regex(fmt: LineFormat) -> None:
    """FormatError when the twin cannot read `fmt`'s --line-regex (Java-only syntax)."""
    if fmt.line_regex is not None:
        _python_regex(fmt.line_regex)


def _time_text(text: str, fmt: LineFormat) -> int:
    """A time as text -> UTC minute index (ISO 8601, or --time-pattern when given)."""
    pattern = fmt.pattern
    fields = _pattern_fields(text, pattern) if pattern else _iso_fields(text)
    year, month, day, hour, minute, second, zone = fields
    if zone is not None:
        # An explicit offset: plain arithmetic, which also takes a local year 0 that the offset
        # moves into year 1 (java.time reads year 0; the range is the UTC minute's).
        days = _days_from_civil(year, month, day)
        if days is None or hour > 23 or minute > 59 or second > 59:
            raise _Bad(REASON_TIMESTAMP)
        idx = ((days * 1440 + hour * 60 + minute) * 60 + second - zone * 60) // 60
        if not 0 <= idx < MINUTE_END:
            raise _Bad(REASON_RANGE)
        return idx
    if year == 0:
        raise _Bad(REASON_TIMESTAMP)
    if not 1 <= year <= 9999:  # only a pattern reads such a year (its date already checked)
        return _far_local(year, month, day, hour, minute, second, fmt.timezone)
    try:
        local = datetime(year, month, day, hour, minute, second)
    except ValueError:
        raise _Bad(REASON_TIMESTAMP) from None
    utc = _minus_offset(local, _zone_offset(local, fmt.timezone))
    return (utc.toordinal() - 1) * 1440 + utc.hour * 60 + utc.minute


def _days_from_civil(y: int, m: int, d: int) -> int | None:
    """Days since 0001-01-01 of a proleptic Gregorian date of any year (year 0 is a leap year
    before year 1); None for an invalid date."""
    if not 1 <= m <= 12:
        return None
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    if not 1 <= d <= (29 if m == 2 and leap else (28, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31,
                                                     30, 31)[m]):
        return None
    cycles, y400 = divmod(y - 1, 400)  # the calendar repeats every 400 years (146097 days)
    return cycles * 146097 + date(y400 + 1, m, d).toordinal() - 1


def _far_local(year: int, month: int, day: int, hour: int, minute: int, second: int,
               tz: str) -> int:
    """A zone-less local time outside the years 1-9999 (which a --time-pattern may read): only
    the first hours of 10000-01-01 can land inside year 9999 in UTC. Its offset is the one of
    the same local time 400 years earlier (the same calendar; zones keep their last rules)."""
    if year != 10000:
        raise _Bad(REASON_RANGE)
    off = _zone_offset(datetime(9600, month, day, hour, minute, second), tz)
    days = _days_from_civil(year, month, day)
    assert days is not None
    secs = days * 86400 + hour * 3600 + minute * 60 + second - int(off.total_seconds())
    idx = secs // 60
    if not 0 <= idx < MINUTE_END:
        raise _Bad(REASON_RANGE)
    return idx


def _iso_fields(text: str):
    m = _ISO.fullmatch(text)
    if m is None or m.group(1) == "0000":  # year 0000 is invalid in ISO text (the seed rule's)
        raise _Bad(REASON_TIMESTAMP)
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    return y, mo, d, h, mi, s, _offset_minutes(m.group(7))


def _pattern_fields(text: str, pattern: TimePattern):
    fields = pattern.read(text)
    if fields is None:
        raise _Bad(REASON_TIMESTAMP)
    *local, offset = fields
    return (*local, None if offset is None else offset // 60)


def _offset_minutes(zone: str | None) -> int | None:
    """'Z', '+08:00', '+0800', '+08' -> minutes east of UTC; None without a zone. java.time
    refuses offsets past ±18:00 and minutes past 59, and so does this."""
    if zone is None:
        return None
    if zone in ("Z", "z"):
        return 0
    digits = zone[1:].replace(":", "")
    hh, mm = int(digits[:2]), int(digits[2:] or 0)
    if mm > 59 or hh * 60 + mm > 18 * 60:
        raise _Bad(REASON_TIMESTAMP)
    return (hh * 60 + mm) * (-1 if zone[0] == "-" else 1)


def _zone_offset(local: datetime, tz: str) -> timedelta:
    """The UTC offset of a local time in `tz`, to the second (old local mean times have
    seconds: New York's was -4:56:02). fold=0 is java.time's rule: an ambiguous time takes the
    earlier offset, and a time in a gap keeps the offset before it, which is the same instant as
    moving it forward by the gap."""
    if tz == "UTC":
        return timedelta(0)
    if tz[0] in "+-":
        off = timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))
        return off if tz[0] == "+" else -off
    return local.replace(tzinfo=ZoneInfo(tz), fold=0).utcoffset() or timedelta(0)


def _minus_offset(local: datetime, offset: timedelta) -> datetime:
    try:
        utc = local - offset
    except OverflowError:
        raise _Bad(REASON_RANGE) from None
    return utc.replace(tzinfo=UTC)


# --- JSON ---------------------------------------------------------------------------------------


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


def _no_constant(name):
    raise ValueError(name)


class _Number(Decimal):
    """A JSON number with a fraction or exponent, as written: Spark's variant keeps one with an
    exponent as a double (50.0) and one without as a decimal (50)."""

    exponent_form: bool

    def __new__(cls, text: str):
        obj = super().__new__(cls, text)
        obj.exponent_form = "e" in text or "E" in text
        return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_float=_Number,
                            parse_constant=_no_constant)


def _json_object(raw: bytes) -> dict:
    """Spark's try_parse_json: the first JSON value of the text (what follows it is ignored),
    duplicate keys refused; invalid UTF-8 becomes U+FFFD first. It must be an object."""
    text = raw.decode("utf-8", "replace").lstrip(" \t\n\r")
    try:
        obj, _end = _DECODER.raw_decode(text)
    except (ValueError, RecursionError):
        raise _Bad(REASON_NOT_JSON) from None
    if not isinstance(obj, dict) or _lone_surrogate(obj):
        raise _Bad(REASON_NOT_JSON)
    return obj


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value) -> bool:
    """An escaped lone surrogate (`\\ud800`) anywhere: Spark 4.2's try_parse_json refuses the
    document (4.0 read it as '?'). A valid pair is one character once decoded."""
    todo = [value]
    while todo:  # a loop, not recursion: the document may nest as deep as the decoder allows
        v = todo.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v) is not None:
                return True
        elif isinstance(v, dict):
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
    return False


_MISSING = object()


def _field(obj: dict, path: str | None):
    """PATH as one literal key first (ECS's "log.level"), else a dotted path into objects.
    A literal key holding JSON null does not count as present."""
    assert path is not None
    if obj.get(path) is not None:
        return obj[path]
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def _structured(obj: dict, fmt: LineFormat) -> Parsed:
    t = _field(obj, fmt.json_time_field)
    if isinstance(t, str):
        minute = _time_text(t, fmt)
    elif isinstance(t, int | Decimal) and not isinstance(t, bool):
        minute = _epoch_minute(float(t))
    else:
        raise _Bad(REASON_TIME_FIELD)
    level = _level_text(_field(obj, fmt.json_level_field))
    if not level:
        raise _Bad(REASON_NO_LEVEL)
    return Parsed(minute, level.upper())


def _epoch_minute(v: float) -> int:
    """Epoch seconds (below 10^11) or milliseconds -> minute index, in double arithmetic as the
    Spark plan does it (floor of v / 60 or v / 60000)."""
    if not math.isfinite(v):
        raise _Bad(REASON_RANGE)
    unix = math.floor(v / 60.0) if abs(v) < _EPOCH_SECONDS_BELOW else math.floor(v / 60000.0)
    idx = unix + EPOCH_MINUTE
    if not 0 <= idx < MINUTE_END:
        raise _Bad(REASON_RANGE)
    return idx


def _level_text(v) -> str:
    """A level field as Spark's variant_get(..., 'string') gives it: text as is, numbers as
    written (decimals without trailing zeros), true/false, objects as JSON."""
    if v is _MISSING or v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, _Number) and v.exponent_form:  # the variant holds a double
        return _java_double(float(v))
    if isinstance(v, Decimal):
        text = format(v, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    return json.dumps(v, separators=(",", ":"), default=str)


def _java_double(x: float) -> str:
    """Java's Double.toString for the values a level can plausibly hold."""
    if x == int(x) and 1e-3 <= abs(x) < 1e7:
        return f"{int(x)}.0"
    if 1e-3 <= abs(x) < 1e7:
        return repr(x)
    mant, _, exp = f"{x:.17e}".partition("e")
    return f"{float(mant)!r}E{int(exp)}"
