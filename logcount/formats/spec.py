"""What decides what a record counts as: one `LineFormat`, validated where it is read (pure).

A format says how to get a record's time and level:
- the default line rule `[DATE[T| ]TIME[fraction][zone]] LEVEL ...` (brackets optional),
- `--line-regex` (Java regex with named groups `time` and `level`, matched at the start),
- `--json-line-field` (a JSON object whose string field is the line, then one of the above),
- `--json-time-field` with `--json-level-field` (structured JSON logs).
`--time-pattern` reads a time that is not ISO 8601, `--timezone` places times without a zone,
`--level` is the comma-separated list of levels counted, `--continuation-lines` what becomes of a
stack trace's continuation lines (rule.CONTINUATION). All of it is the state's identity
(`identity()`, by schema names): totals counted under one format must never be continued
under another.

The pure twin of the rule is logcount/formats/rule.py, the Spark plan logcount/formats/spark.py;
tests/integration/test_spark_rule.py holds the two together record by record.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

from logcount.formats import pattern as _pat

__all__ = ["FormatError", "LineFormat", "DEFAULT_LEVELS", "EPOCH_MINUTE", "MINUTE_END",
           "ALL_LEVELS", "Dim", "DEFAULT_MAX_SERIES", "MAX_DIMS", "DIM_MAX_BYTES", "OVERFLOW",
           "parse_group_by", "parse_levels", "parse_field_path", "check_timezone",
           "java_regex_groups", "TimePattern", "CONTINUATION_MODES", "IDENTITY_FLAGS",
           "identity_name"]



class FormatError(ValueError):
    """A counting setting that cannot be used; the settings turn it into a ConfigError (exit 2).
    This package is the ground floor: it imports nothing of the project."""


DEFAULT_LEVELS = ("ERROR",)
# --continuation-lines: "dlq" (a continuation line is malformed, as before the flag) or "skip".
CONTINUATION_MODES = ("dlq", "skip")
# Minutes since 0001-01-01 00:00 (the state's minute index, pipeline/totals.py) of the Unix epoch,
# and one past the last minute of 9999-12-31: a record's UTC minute must lie in [0, MINUTE_END).
EPOCH_MINUTE = (date(1970, 1, 1).toordinal() - 1) * 1440
MINUTE_END = date.max.toordinal() * 1440

# A level in --level: letters, digits or _ (pino writes numbers: --level 50,60).
_LEVEL = re.compile(r"[A-Za-z0-9_]+")
# ±HH:MM, as --timezone takes it besides IANA names (java.time accepts up to ±18:00).
_OFFSET = re.compile(r"([+-])(\d{2}):(\d{2})")


# --level '*': every line with a valid time and a level counts, whatever the level.
ALL_LEVELS = "*"


def parse_levels(text: str) -> tuple[str, ...]:
    """'ERROR, fatal,Critical' -> ('CRITICAL', 'ERROR', 'FATAL'): upper-cased, unique, sorted, so
    that the same set is the same identity whatever its order. '*' alone: every level."""
    items = [t.strip() for t in text.split(",")]
    if ALL_LEVELS in items:
        if len(items) > 1:
            raise FormatError(f"--level '*' counts every level: give it alone, not mixed with "
                              f"level names; got {text!r}")
        return (ALL_LEVELS,)
    bad = [t for t in items if not _LEVEL.fullmatch(t)]
    if not items or bad:
        raise FormatError(f"--level takes a comma-separated list of level words (letters, "
                          f"digits or _), such as ERROR or ERROR,FATAL; got {text!r}")
    return tuple(sorted({t.upper() for t in items}))


def check_timezone(text: str) -> str:
    """An IANA zone name or ±HH:MM (at most ±18:00); returned as given."""
    m = _OFFSET.fullmatch(text)
    if m:
        if int(m.group(2)) * 60 + int(m.group(3)) > 18 * 60 or int(m.group(3)) > 59:
            raise FormatError(f"--timezone offset {text} is beyond ±18:00")
        return text
    if text == "UTC":
        return text
    try:
        zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise FormatError(f"--timezone {text!r} is not a known zone: give an IANA name such as "
                          f"Europe/Paris or America/New_York, UTC, or an offset such as "
                          f"+08:00") from None
    return text


def parse_field_path(text: str, flag: str) -> tuple[str, ...]:
    """'log.level' -> ('log', 'level'); the whole text is also tried as one literal key first
    (ECS writes "log.level" as one key). Empty paths or segments are mistakes."""
    if not text or not text.strip():
        raise FormatError(f"{flag} needs a field path such as message or log.level, got an "
                          f"empty one")
    parts = tuple(text.split("."))
    if any(not p for p in parts) or any(c in text for c in "'[]\\"):
        raise FormatError(f"{flag} {text!r} is not a field path: dotted names such as "
                          f"log.level, without empty parts, quotes, brackets or backslashes")
    return parts


# Java named groups: (?<name>...). Not lookbehinds (?<= and (?<!.
_JAVA_GROUP = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>")


def java_regex_groups(regex: str) -> set[str]:
    """The named groups a Java regex declares (escaped parentheses are not groups)."""
    return set(_JAVA_GROUP.findall(re.sub(r"\\.", "", regex)))


# --- --time-pattern: the subset of Spark's datetime patterns that both sides read alike -------

# The letters this project reads, each exactly as Spark's parser does (logcount/formats/pattern.py),
# with quoted text and optional sections; docs/contract.md lists what each reads.
SUPPORTED = ("y (yy or yyyy), M (M, MM or MMM), d, H, h with a, m, s, S..S (up to 9), X..XXX or "
             "Z..ZZZ, quoted 'text' and optional [sections]")
# A yyyy year of a sign and six digits or more would overflow Spark's timestamp and fail the job:
# both sides call it an invalid timestamp instead (TimePattern.guard, a regex Java and Python
# read alike). It looks where the year starts when the fields before it have fixed widths.
_SIGNED_SIX = "[+-][0-9]{6}"
_NEED_OUTSIDE = "yMdHhamXZ"  # letters an optional section may not hold


def _letter(pattern: str, seen: set[str], optional: set[str]):
    """The pattern-letter callback of formats.pattern.build for `pattern`: this project's
    letters as Spark's DateTimeFormatterBuilder appends them, every other one refused."""

    def letter(b, c: str, n: int) -> None:
        if c in seen:
            raise FormatError(f"--time-pattern {pattern!r}: the letter {c} appears twice")
        seen.add(c)
        if b.level.parent is not None:
            optional.add(c)
        if (c, n) == ("y", 2):
            b.value(_pat.Num("u", 2, 2, _pat.NOT_NEGATIVE, reduced=True))
        elif (c, n) == ("y", 4):
            b.value(_pat.Num("u", 4, 19, _pat.EXCEEDS_PAD))
        elif (c, n) == ("M", 3):
            b.internal(_pat.Text("month"))
        elif c in "MdHhms" and n in (1, 2):
            b.value(_pat.Num(c, 1, 19, _pat.NORMAL) if n == 1
                    else _pat.Num(c, 2, 2, _pat.NOT_NEGATIVE))
        elif (c, n) == ("a", 1):
            b.internal(_pat.Text("ampm"))
        elif c == "X" and n <= 3:
            b.internal(_pat.Offset(("optional", "mandatory", "colon")[n - 1], "Z"))
        elif c == "Z" and n <= 3:
            b.internal(_pat.Offset("mandatory", "+0000"))
        else:
            raise FormatError(f"--time-pattern {pattern!r}: {c * n} is not supported; use "
                              f"{SUPPORTED}")

    return letter


@dataclass(frozen=True)
class TimePattern:
    """A compiled --time-pattern: the pattern text (what Spark reads) and the parser tree the
    pure twin reads it with (logcount/formats/pattern.py), which is Spark's own."""

    pattern: str
    items: tuple
    has_zone: bool
    guard: str | None  # the overflow guard (module comment at _SIGNED_SIX); None for yy

    @classmethod
    def compile(cls, pattern: str) -> TimePattern:
        return _compile(pattern)

    def read(self, text: str):
        """(year, month, day, hour, minute, second, offset seconds or None), or None where
        Spark's try_to_timestamp is null (or the overflow guard says invalid)."""
        if self.guard is not None and _regex(self.guard).search(text):
            return None
        return _pat.read(self.items, text)


@functools.lru_cache(maxsize=64)
def _regex(text: str) -> re.Pattern:
    return re.compile(text)


def _overflow_guard(items: tuple) -> str | None:
    """Where a yyyy year starts at a fixed place (only fixed-width fields and text before it):
    a sign and six digits there; elsewhere anywhere in the time."""
    width = 0
    for pp in items:
        if isinstance(pp, _pat.Num) and pp.field == "u":
            if pp.reduced:
                return None  # yy: two digits, never a sign
            return f"^(?s:.{{{width}}}){_SIGNED_SIX}" if width else "^" + _SIGNED_SIX
        if isinstance(pp, _pat.Lit):
            width += len(pp.text)
        elif isinstance(pp, _pat.Num | _pat.Frac) and pp.lo == pp.hi:
            width += pp.lo
        elif isinstance(pp, _pat.Text):
            width += 3 if pp.field == "month" else 2
        else:
            return _SIGNED_SIX
    raise AssertionError("no year")


@functools.lru_cache(maxsize=64)
def _compile(pattern: str) -> TimePattern:
    if any(c in _pat.TERMINATORS for c in pattern):
        raise FormatError(f"--time-pattern {pattern!r}: a line break in a pattern")
    if any(ord(c) > 0xFFFF for c in pattern):  # two chars in Java, one in Python
        raise FormatError(f"--time-pattern {pattern!r}: a character beyond U+FFFF")
    if re.search("S{10}", pattern):
        raise FormatError(f"--time-pattern {pattern!r}: at most 9 S (nanoseconds)")
    seen: set[str] = set()
    optional: set[str] = set()
    try:
        items = _pat.build(pattern, _letter(pattern, seen, optional))
    except _pat.PatternError as exc:
        raise FormatError(f"--time-pattern {pattern!r}: {exc}") from None
    seen.discard("S")
    need = [c for c in "yMdm" if c not in seen]
    if need or not seen & {"H", "h"} or ("h" in seen) != ("a" in seen) or {"H", "h"} <= seen:
        raise FormatError(f"--time-pattern {pattern!r} must name the year (y), month (M), "
                          f"day (d), hour (H, or h with a) and minute (m)")
    inside = sorted(optional & set(_NEED_OUTSIDE))
    if inside:
        raise FormatError(f"--time-pattern {pattern!r}: {', '.join(inside)} inside an optional "
                          f"[section]; only s, S and text may be optional")
    return TimePattern(pattern, items, bool(seen & {"X", "Z"}), _overflow_guard(items))


# --- --group-by: the dimensions of a series -------------------------------------------------

MAX_DIMS = 3  # a DATETIME and three VARCHAR(255) utf8mb4 columns fit InnoDB's 3,072-byte key
DIM_MAX_BYTES = 255  # a value's UTF-8 bytes; longer ones are cut at a character boundary
OVERFLOW = "__other__"  # every dimension of the overflow series (--max-series)
# The distinct dimension tuples a stage names (--max-series): each live one costs a cell, an
# output record and a state record per batch; 10,000 keeps that near 0.25 s of driver time.
# Figures: docs/tuning.md#series-cells
DEFAULT_MAX_SERIES = 10_000
# Series ids share an int64 with the minute index in the state (minute << 30 | id).
MAX_SERIES_LIMIT = (1 << 30) - 2
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_RESERVED = ("log_time", "log_count")


@dataclass(frozen=True)
class Dim:
    """One --group-by dimension: its output NAME and where its value comes from, `kind` one of
    'field' (a JSON field path), 'group' (a --line-regex named group), 'level' or 'key'."""

    name: str
    kind: str
    source: str

    @property
    def text(self) -> str:
        return f"{self.name}={self.source}"


def parse_group_by(text: str, kind: str, line_regex: str | None,
                   flag: str = "--group-by") -> tuple[Dim, ...]:
    """'host=host.name,level' -> Dims, checked against the format (its `kind`, LineFormat.kind,
    and its regex's groups). SOURCE `level` and `key` come first, then a regex group, then a
    JSON field path (only where the record is JSON). `flag` names the flag in mistakes."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise FormatError(f"{flag} takes DIM[,DIM...], each NAME or NAME=SOURCE; got "
                          f"{text!r}")
    if len(items) > MAX_DIMS:
        raise FormatError(f"{flag} takes at most {MAX_DIMS} dimensions, got {len(items)}")
    groups = java_regex_groups(line_regex) - {"time", "level"} if line_regex else set()
    dims: list[Dim] = []
    for item in items:
        name, eq, source = item.partition("=")
        if not eq:
            source, name = item, item.rsplit(".", 1)[-1]
        name, source = name.strip(), source.strip()
        if source in ("level", "key"):
            dim_kind = source
        elif source in groups:
            dim_kind = "group"
        elif kind in ("json", "json-line"):
            parse_field_path(source, flag)
            dim_kind = "field"
        elif line_regex is not None:
            has = ", ".join(sorted(groups)) or "none besides time and level"
            raise FormatError(f"{flag} {source!r}: --line-regex has no such named group "
                              f"(it has: {has})")
        else:
            raise FormatError(f"{flag} {source!r}: a field path needs JSON records "
                              f"(--json-line-field or --json-time-field); the default text rule "
                              f"has only level and key")
        if not _NAME.fullmatch(name):
            raise FormatError(f"{flag}: {name!r} is not a dimension NAME (letters, digits "
                              f"and _, starting with a letter): write NAME={source}")
        if name in _RESERVED:
            raise FormatError(f"{flag}: the NAME {name} is reserved; write OTHER={source}")
        if any(d.name == name for d in dims):
            raise FormatError(f"{flag}: the NAME {name} is given twice")
        dims.append(Dim(name, dim_kind, source))
    return tuple(dims)


# --- the format -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LineFormat:
    """Everything that decides what a record counts as. Built by `from_flags`, which validates."""

    levels: tuple[str, ...] = DEFAULT_LEVELS
    timezone: str = "UTC"
    line_regex: str | None = None
    time_pattern: str | None = None
    json_line_field: str | None = None
    json_time_field: str | None = None
    json_level_field: str | None = None
    continuation: str = "dlq"  # --continuation-lines
    group_by: tuple[Dim, ...] = ()
    max_series: int = DEFAULT_MAX_SERIES

    @classmethod
    def from_flags(cls, level: str = "ERROR", timezone: str = "UTC",
                   line_regex: str | None = None, time_pattern: str | None = None,
                   json_line_field: str | None = None, json_time_field: str | None = None,
                   json_level_field: str | None = None,
                   continuation_lines: str = "dlq", group_by: str | None = None,
                   max_series: int = DEFAULT_MAX_SERIES) -> LineFormat:
        levels = parse_levels(level)
        if continuation_lines not in CONTINUATION_MODES:
            raise FormatError(f"--continuation-lines must be dlq or skip, got "
                              f"{continuation_lines!r}")
        check_timezone(timezone)
        if json_time_field is not None or json_level_field is not None:
            if json_line_field is not None:
                raise FormatError("--json-line-field reads a line out of a JSON envelope and "
                                  "--json-time-field/--json-level-field read structured logs: "
                                  "give one or the other, not both")
            if json_time_field is None or json_level_field is None:
                raise FormatError("structured JSON logs need both --json-time-field and "
                                  "--json-level-field")
            if line_regex is not None:
                raise FormatError("--line-regex reads a text line; structured JSON logs "
                                  "(--json-time-field) have none")
            parse_field_path(json_time_field, "--json-time-field")
            parse_field_path(json_level_field, "--json-level-field")
            if continuation_lines != "dlq":
                raise FormatError("--continuation-lines skip reads text lines; structured JSON "
                                  "logs (--json-time-field) have none, and a stack trace is "
                                  "one record there")
        if json_line_field is not None:
            parse_field_path(json_line_field, "--json-line-field")
        if line_regex is not None:
            if not line_regex:
                raise FormatError("--line-regex is empty")
            missing = {"time", "level"} - java_regex_groups(line_regex)
            if missing:
                raise FormatError(f"--line-regex needs the named groups (?<time>...) and "
                                  f"(?<level>...); {' and '.join(sorted(missing))} missing")
        if time_pattern is not None:
            if line_regex is None and json_time_field is None:
                raise FormatError("--time-pattern reads the time group of --line-regex or the "
                                  "--json-time-field text; the default rule reads ISO 8601")
            TimePattern.compile(time_pattern)
        if not 1 <= max_series <= MAX_SERIES_LIMIT:
            raise FormatError(f"--max-series must be between 1 and {MAX_SERIES_LIMIT}, got "
                              f"{max_series}")
        fmt = cls(levels, timezone, line_regex, time_pattern, json_line_field,
                  json_time_field, json_level_field, continuation_lines)
        dims = () if group_by is None else parse_group_by(group_by, fmt.kind, line_regex)
        return dataclasses.replace(fmt, group_by=dims, max_series=max_series)

    @property
    def kind(self) -> str:
        """'default', 'regex', 'json-line' (then `line_kind` says which line rule) or 'json'."""
        if self.json_time_field is not None:
            return "json"
        if self.json_line_field is not None:
            return "json-line"
        return self.line_kind

    @property
    def line_kind(self) -> str:
        return "regex" if self.line_regex is not None else "default"

    def counts(self, level: str) -> bool:
        """Whether a line of `level` (upper-cased) is counted."""
        return self.levels == (ALL_LEVELS,) or level in self.levels

    @property
    def level_label(self) -> str:
        """What the output records' `level` says was counted: 'ERROR' or 'ERROR,FATAL'."""
        return ",".join(self.levels)

    @property
    def pattern(self) -> TimePattern | None:
        return None if self.time_pattern is None else TimePattern.compile(self.time_pattern)

    def identity(self) -> dict[str, str | None]:
        """The counting settings as the state keeps them, by their schema names (IDENTITY_FLAGS),
        name -> value (None: not set). `level` is the sorted list, so ERROR,FATAL and
        fatal,error are the same."""
        return {"level": self.level_label, "timezone": self.timezone,
                "line_regex": self.line_regex, "time_pattern": self.time_pattern,
                "json_line_field": self.json_line_field,
                "json_time_field": self.json_time_field,
                "json_level_field": self.json_level_field,
                "continuation_lines": self.continuation,
                "group_by": ",".join(d.text for d in self.group_by) or None,
                "max_series": str(self.max_series) if self.group_by else None}

    @classmethod
    def from_identity(cls, ident: Mapping[str, str | None]) -> LineFormat:
        """Inverse of identity(), for a stored state (unvalidated: it was valid when stored); a
        state written before the schema names keeps them as flags, read alike (identity_name)."""
        got = {identity_name(k): v for k, v in ident.items()}
        fmt = cls(tuple(str(got.get("level") or "ERROR").split(",")),
                  got.get("timezone") or "UTC", got.get("line_regex"),
                  got.get("time_pattern"), got.get("json_line_field"),
                  got.get("json_time_field"), got.get("json_level_field"),
                  got.get("continuation_lines") or "dlq")
        group_by = got.get("group_by")
        if not group_by:
            return fmt
        return dataclasses.replace(
            fmt, group_by=parse_group_by(group_by, fmt.kind, fmt.line_regex),
            max_series=int(got.get("max_series") or DEFAULT_MAX_SERIES))


# The state's identity (LineFormat.identity) by schema name, and the flag each name is set by:
# what a refusal names. A state written before these names keyed its identity by the flags.
IDENTITY_FLAGS = {name: "--" + name.replace("_", "-") for name in LineFormat().identity()}


def identity_name(key: str) -> str:
    """A stored identity key as its schema name: `--time-pattern` (an older state's) reads as
    `time_pattern`; a schema name is itself."""
    return key.removeprefix("--").replace("-", "_") if key.startswith("--") else key
