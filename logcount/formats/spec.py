"""What decides what a record counts as: one `LineFormat`, validated where it is read (pure).

A format says how to get a record's time and level:
- the default line rule `[DATE[T| ]TIME[fraction][zone]] LEVEL ...` (brackets optional),
- `--line-regex` (Java regex with named groups `time` and `level`, matched at the start),
- `--json-line-field` (a JSON object whose string field is the line, then one of the above),
- `--json-time-field` with `--json-level-field` (structured JSON logs).
`--time-pattern` reads a time that is not ISO 8601, `--timezone` places times without a zone,
`--level` is the comma-separated list of levels counted. All of it is the state's identity
(`identity()`): totals counted under one format must never be continued under another.

The pure twin of the rule is logcount/formats/rule.py, the Spark plan logcount/formats/spark.py;
tests/integration/test_spark_rule.py holds the two together line by line.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import date

__all__ = ["FormatError", "LineFormat", "DEFAULT_LEVELS", "EPOCH_MINUTE", "MINUTE_END",
           "parse_levels", "parse_field_path", "check_timezone", "java_regex_groups", "TimePattern"]



class FormatError(ValueError):
    """A counting setting that cannot be used; the settings turn it into a ConfigError (exit 2).
    This package is the ground floor: it imports nothing of the project."""


DEFAULT_LEVELS = ("ERROR",)
# Minutes since 0001-01-01 00:00 (the state's minute index, pipeline/totals.py) of the Unix epoch,
# and one past the last minute of 9999-12-31: a record's UTC minute must lie in [0, MINUTE_END).
EPOCH_MINUTE = (date(1970, 1, 1).toordinal() - 1) * 1440
MINUTE_END = date.max.toordinal() * 1440

# A level in --level: letters, digits or _ (pino writes numbers: --level 50,60).
_LEVEL = re.compile(r"[A-Za-z0-9_]+")
# ±HH:MM, as --timezone takes it besides IANA names (java.time accepts up to ±18:00).
_OFFSET = re.compile(r"([+-])(\d{2}):(\d{2})")


def parse_levels(text: str) -> tuple[str, ...]:
    """'ERROR, fatal,Critical' -> ('CRITICAL', 'ERROR', 'FATAL'): upper-cased, unique, sorted, so
    that the same set is the same identity whatever its order."""
    items = [t.strip() for t in text.split(",")]
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

# Spark pattern letters read here, and what each run matches in the pure twin: yy two digits
# (2000-2099), yyyy four, MM/dd/HH/mm/ss two, M/d/H/h/m/s any number, S..S up to that many fraction
# digits, MMM an English month abbreviation, a AM/PM, XXX/XX/X and Z zone offsets; any case.
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class TimePattern:
    """A compiled --time-pattern: the pattern text (Spark's) and a Python regex with one named
    group per field (the pure twin's reading)."""

    pattern: str
    regex: re.Pattern
    has_zone: bool

    @classmethod
    def compile(cls, pattern: str) -> TimePattern:
        out: list[str] = []
        seen: set[str] = set()
        has_zone = False
        i = 0
        while i < len(pattern):
            c = pattern[i]
            if c == "'":  # quoted literal; '' is a quote
                j = pattern.find("'", i + 1)
                if j < 0:
                    raise FormatError(f"--time-pattern {pattern!r}: an unclosed quote")
                out.append(re.escape(pattern[i + 1:j] or "'"))
                i = j + 1
                continue
            if not c.isalpha():
                out.append(re.escape(c))
                i += 1
                continue
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            run = pattern[i:j]
            i = j
            piece = _letter_regex(c, len(run), pattern)
            if c in seen:
                raise FormatError(f"--time-pattern {pattern!r}: the letter {c} appears twice")
            seen.add(c)
            has_zone = has_zone or c in "XZ"
            out.append(piece)
        need = [c for c in "yMdm" if c not in seen]
        if need or not seen & {"H", "h"} or ("h" in seen) != ("a" in seen):
            raise FormatError(f"--time-pattern {pattern!r} must name the year (y), month (M), "
                              f"day (d), hour (H, or h with a) and minute (m)")
        # Spark parses text case-insensitively: month names, AM/PM, 'z' for Z, quoted text.
        return cls(pattern, re.compile("".join(out), re.IGNORECASE | re.ASCII), has_zone)


def _letter_regex(c: str, n: int, pattern: str) -> str:
    fixed = {("y", 2): r"(?P<yy>\d{2})", ("y", 4): r"(?P<y>\d{4})",
             ("M", 3): "(?P<mon>" + "|".join(_MONTHS) + ")",
             ("a", 1): "(?P<ampm>AM|PM)", ("X", 1): r"(?P<zone>Z|[+-]\d{2}(?:\d{2})?)",
             ("X", 2): r"(?P<zone>Z|[+-]\d{4})", ("X", 3): r"(?P<zone>Z|[+-]\d{2}:\d{2})",
             ("Z", 1): r"(?P<zone>[+-]\d{4})"}
    names = {"M": "M", "d": "d", "H": "H", "h": "h", "m": "m", "s": "s"}
    if (c, n) in fixed:
        return fixed[(c, n)]
    # java.time: one letter reads any number of digits (the range is checked after), two read
    # exactly two; S..S reads 1 to that many fraction digits.
    if c in names and n in (1, 2):
        return rf"(?P<{names[c]}>\d{{2}})" if n == 2 else rf"(?P<{names[c]}>\d+)"
    if c == "S" and 1 <= n <= 9:
        return rf"(?P<S>\d{{1,{n}}})"
    raise FormatError(f"--time-pattern {pattern!r}: {c * n} is not supported; use y (yy or "
                      f"yyyy), M (M, MM or MMM), d, H, h with a, m, s, S..S, X..XXX or Z, and "
                      f"quoted 'text'")


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

    @classmethod
    def from_flags(cls, level: str = "ERROR", timezone: str = "UTC",
                   line_regex: str | None = None, time_pattern: str | None = None,
                   json_line_field: str | None = None, json_time_field: str | None = None,
                   json_level_field: str | None = None) -> LineFormat:
        levels = parse_levels(level)
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
        return cls(levels, timezone, line_regex, time_pattern, json_line_field,
                   json_time_field, json_level_field)

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

    @property
    def level_label(self) -> str:
        """What the output records' `level` says was counted: 'ERROR' or 'ERROR,FATAL'."""
        return ",".join(self.levels)

    @property
    def pattern(self) -> TimePattern | None:
        return None if self.time_pattern is None else TimePattern.compile(self.time_pattern)

    def identity(self) -> dict[str, str | None]:
        """The counting settings as the state keeps them, flag name -> value (None: not set).
        `level` is the sorted list, so ERROR,FATAL and fatal,error are the same."""
        return {"--level": self.level_label, "--timezone": self.timezone,
                "--line-regex": self.line_regex, "--time-pattern": self.time_pattern,
                "--json-line-field": self.json_line_field,
                "--json-time-field": self.json_time_field,
                "--json-level-field": self.json_level_field}

    @classmethod
    def from_identity(cls, ident: dict[str, str | None]) -> LineFormat:
        """Inverse of identity(), for a stored state (unvalidated: it was valid when stored)."""
        return cls(tuple(str(ident.get("--level") or "ERROR").split(",")),
                   ident.get("--timezone") or "UTC", ident.get("--line-regex"),
                   ident.get("--time-pattern"), ident.get("--json-line-field"),
                   ident.get("--json-time-field"), ident.get("--json-level-field"))
