"""The Spark plan of a format (logcount/formats/spec.py): Kafka rows -> each record's reason,
counted flag
and minute, in Spark SQL built-ins only (JVM code generation, no Python per row).

The pure twin is logcount/formats/rule.py; both follow its reasons and their order. Columns of
`line_frame(df, fmt)`: p, offset, value, reason (null when well formed), counted, minute (binary
'YYYY-MM-DD HH:MM' from the seed fast path, else null) and mi (the UTC minute index from every
other path, else null), then d0, d1, ... (the --group-by values, one per dimension, cut to 255
bytes by `cut_dims`; the rows need a `key` column when one is the record key). Exactly one of
minute and mi is set on a counted line.
With `--continuation-lines skip` a last column, cont, is true on a continuation line (reason null,
counted false). The rule's intermediate columns come along; any later step prunes them.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from logcount.formats.rule import (
    CONTINUATION,
    DEFAULT_LINE,
    ISO_TIME,
    REASON_DIMENSION,
    REASON_EMPTY,
    REASON_FORMAT,
    REASON_LINE_FIELD,
    REASON_NO_LEVEL,
    REASON_NO_MATCH,
    REASON_NOT_JSON,
    REASON_RANGE,
    REASON_TIME_FIELD,
    REASON_TIMESTAMP,
)
from logcount.formats.spec import (
    ALL_LEVELS,
    DIM_MAX_BYTES,
    EPOCH_MINUTE,
    MINUTE_END,
    FormatError,
    LineFormat,
)

__all__ = ["line_frame", "check_regex", "HEAD_BYTES", "dim_columns", "cut_dims"]

# The seed fast path: `YYYY-MM-DD HH:MM:SS LEVEL ` in the first HEAD_BYTES, read by fixed positions
# and digit arithmetic (no timestamp parsing, no string building) so the seed format stays as fast
# as before; other lines take the general path. Java regex: \d is ASCII-only by default.
_HEAD_RE = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} [A-Za-z]+ "
HEAD_BYTES = 64
# Java's \z is the very end ($ would also match before a final line terminator).
_DEFAULT_RE = "^" + DEFAULT_LINE.replace("$", r"\z").replace("([A-Za-z]+)", "[A-Za-z]+")
_ISO_RE = "^" + ISO_TIME + r"\z"
# Variant type names of JSON numbers (schema_of_variant).
_NUMBER_TYPES = ("BIGINT", "INT", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT")
_EPOCH_SECONDS_BELOW = 1e11


def line_frame(df, fmt: LineFormat, cut: bool = True):
    """Kafka rows (partition, offset, value) -> per-record columns (module docstring), and the
    rule's intermediate columns, which a later step prunes; with `cut` False the dimension
    values are not yet cut to their bytes (`_dims`, `cut_dims`)."""
    from pyspark import SparkContext

    rule = _stages(SparkContext._active_spark_context, fmt)
    if rule.lateral is None:
        for stage in rule.stages:
            df = df.select(*stage)
    else:
        df = df.select(*rule.stages[0]).select(*rule.lateral)
    return cut_dims(df, len(fmt.group_by)) if cut else df


class _Rule(NamedTuple):
    stages: tuple[tuple, ...]  # the selects, in order, each adding the columns the next reads
    # The stages as two selects, the later columns referring to earlier ones by name (lateral
    # column aliases): Spark splits it into the same Projects, analysed twice instead of once a
    # select. None: a name repeats, which only the chain can take.
    # Figures: docs/tuning.md#plan-steps
    lateral: tuple | None


# Every Column is a py4j round trip to build; built per batch, a format's hundred or more cost a
# small batch more than its job. Unresolved, they are built once per (JVM, format), keyed by the
# SparkContext so a new session never gets another's columns.
# Figures: docs/tuning.md#plan-columns
@functools.lru_cache(maxsize=16)
def _stages(context, fmt: LineFormat) -> _Rule:
    """The selects, in order, that take Kafka rows to line_frame's columns."""
    from pyspark.sql import functions as F

    base = [F.col("partition").cast("int").alias("p"), F.col("offset"), F.col("value")]
    if any(d.kind == "key" for d in fmt.group_by):
        base.append(F.col("key"))
    plan = _Plan(*base)
    if fmt.kind in ("default", "regex"):
        reason, counted, minute, mi, level, groups, cont = _line_rule(
            plan, F.col("value"), fmt, fast=_fast_ok(fmt))
        reason, dims = _dims(plan, fmt, reason, level, groups)
        return plan.finish(reason, counted, minute, mi, dims, cont)
    # A JSON object starts with '{' after JSON whitespace; try_parse_json takes any value.
    text = F.col("value").cast("string")
    is_object = text.rlike("^[ \t\n\r]*\\{")
    j = plan.let(j=F.when(is_object, F.try_parse_json(text)))["j"]
    if fmt.kind == "json-line":
        lf = plan.let(lf=_field(j, fmt.json_line_field))["lf"]
        is_string = F.schema_of_variant(lf) == "STRING"
        ln = plan.let(ln=F.when(is_string, F.try_variant_get(lf, "$", "string")
                                .cast("binary")))["ln"]
        reason, counted, minute, mi, level, groups, cont = _line_rule(plan, ln, fmt, fast=False)
        reason = (F.when(j.isNull(), F.lit(REASON_NOT_JSON))
                  .when(ln.isNull(), F.lit(REASON_LINE_FIELD)).otherwise(reason))
        if cont is not None:  # only a line read out of its envelope can continue an event
            cont = j.isNotNull() & ln.isNotNull() & cont
        reason, dims = _dims(plan, fmt, reason, level, groups, j)
        return plan.finish(reason, counted, minute, mi, dims, cont)
    c = plan.let(tf=_field(j, fmt.json_time_field), lvf=_field(j, fmt.json_level_field))
    reason, counted, minute, mi, level = _structured(plan, j, c["tf"], c["lvf"], fmt)
    reason, dims = _dims(plan, fmt, reason, level, {}, j)
    return plan.finish(reason, counted, minute, mi, dims)


class _Plan:
    """Selects built a few named columns at a time. A column used several times is computed once
    per row (Spark does not inline a projected expression into several uses), and the plan's
    expression tree stays as large as the rule instead of copying shared parts (the matched
    prefix, the parsed time) into every use."""

    def __init__(self, *base) -> None:
        self.names = ["p", "offset", "value"] + (["key"] if len(base) > 3 else [])
        self.stages: list[tuple] = [base]
        self.base = tuple(self.names)
        self.added: list = []  # every column the later selects add, in order
        self.added_names: list[str] = []

    def let(self, **exprs) -> dict:
        """One select that adds `exprs` (none refers to another); their columns by name."""
        from pyspark.sql import functions as F

        self._add(*exprs.items())
        self.stages.append((*self.names, *self.added[-len(exprs):]))
        self.names += list(exprs)
        return {n: F.col(n) for n in exprs}

    def _add(self, *named) -> None:
        self.added += [e.alias(n) for n, e in named]
        self.added_names += [n for n, _ in named]

    def finish(self, reason, counted, minute, mi, dims=(), cont=None) -> _Rule:
        from pyspark.sql import functions as F

        last: tuple = ()
        if cont is not None:  # a continuation is never malformed, whatever its dimensions
            reason, last = F.when(~cont, reason), (("cont", cont),)
        self._add(("reason", reason), ("counted", counted), ("minute", minute), ("mi", mi),
                  *zip(dim_columns(len(dims)), dims, strict=True), *last)
        width = 4 + len(dims) + len(last)
        self.stages.append(("p", "offset", "value", *self.added[-width:]))
        names = [*self.base, *self.added_names]
        lateral = (*self.base, *self.added) if len(set(names)) == len(names) else None
        return _Rule(tuple(self.stages), lateral)


def dim_columns(n: int) -> tuple[str, ...]:
    """The names of line_frame's dimension columns."""
    return tuple(f"d{i}" for i in range(n))


def _cut(s):
    """A valid UTF-8 string column -> at most DIM_MAX_BYTES bytes of it, cut where a character
    starts (a continuation byte is 0x80-0xBF; a character has at most 4 bytes)."""
    from pyspark.sql import functions as F

    b = s.cast("binary")

    def cont(i: int):
        return F.hex(F.substring(b, i, 1)).between("80", "BF")

    n = DIM_MAX_BYTES
    keep = (F.when(~cont(n + 1), n).when(~cont(n), n - 1).when(~cont(n - 1), n - 2)
            .otherwise(n - 3))
    return F.when(F.octet_length(s) <= n, s).otherwise(F.substring(b, F.lit(1), keep)
                                                       .cast("string"))


def _dims(plan: _Plan, fmt: LineFormat, reason, level, groups: dict, j=None):
    """(reason with `invalid dimension` last, the --group-by value columns, each cut to at most
    DIM_MAX_BYTES + 1 characters: `cut_dims` then cuts them to DIM_MAX_BYTES bytes).

    Only the object-or-array check runs on every line. A value is written where it is used
    once, so Spark evaluates it only on the lines whose aggregation key reads it (the counted
    ones, most often a few in a hundred) and the exact byte cut runs on the aggregated rows.
    Figures: docs/tuning.md#dimension-parse"""
    from pyspark.sql import functions as F

    if not fmt.group_by:
        return reason, []
    values: list = []
    invalid = None
    for d in fmt.group_by:
        if d.kind == "level":
            v = F.upper(level)
        elif d.kind == "key":
            v = F.make_valid_utf8(F.col("key").cast("string"))
        elif d.kind == "group":
            v = groups[d.source]
        else:
            c = plan.let(**{f"dv{len(values)}": _field(j, d.source)})
            f = c[f"dv{len(values)}"]
            t = F.schema_of_variant(f)
            bad = t.startswith("OBJECT") | t.startswith("ARRAY")
            invalid = bad if invalid is None else invalid | bad
            v = F.when(~F.is_variant_null(f), F.try_variant_get(f, "$", "string"))
        # At most one character more than the bytes kept: the bytes cut_dims reads are kept.
        values.append(F.left(F.coalesce(v, F.lit("")), F.lit(DIM_MAX_BYTES + 1)))
    if invalid is not None:
        r = plan.let(r0=reason)["r0"]
        reason = F.when(r.isNull() & invalid, F.lit(REASON_DIMENSION)).otherwise(r)
    return reason, values


def cut_dims(df, width: int, **more):
    """line_frame's (or an aggregate of them) dimension columns d0..d{width-1} cut to
    DIM_MAX_BYTES bytes where a character starts, and the columns `more` set, in one step (each
    step of a DataFrame is analysed whole, eagerly); the other columns as they are."""
    from pyspark import SparkContext

    columns = {**(_cut_columns(SparkContext._active_spark_context, width) if width else {}),
               **more}
    if len(columns) == 1:  # one py4j call; withColumns converts two lists, a call an item
        ((name, column),) = columns.items()
        return df.withColumn(name, column)
    return df.withColumns(columns) if columns else df


@functools.lru_cache(maxsize=16)
def _cut_columns(context, width: int) -> dict:
    """cut_dims's columns, built once per (JVM, width) like _stages' (a batch builds none)."""
    from pyspark.sql import functions as F

    return {d: _cut(F.col(d)) for d in dim_columns(width)}


def check_regex(spark, fmt: LineFormat) -> None:
    """Compile --line-regex with Java's own Pattern in the session's JVM, as the plan will: a
    mistake is one FormatError line before any job (or topic) is touched."""
    if fmt.line_regex is None:
        return
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.util.regex.Pattern.compile(f"^(?:{fmt.line_regex})(?s:.*)\\z")
    except Exception as exc:  # noqa: BLE001 - py4j wraps PatternSyntaxException
        java = getattr(exc, "java_exception", None)
        text = str(java.getMessage()) if java is not None else str(exc)
        raise FormatError(f"--line-regex is not a valid Java regex: "
                          f"{text.splitlines()[0]}") from None


def _fast_ok(fmt: LineFormat) -> bool:
    """The seed fast path reads the minute off the text: only where the text is UTC."""
    return fmt.kind == "default" and fmt.timezone == "UTC"


def field_paths(path: str) -> tuple[str, str]:
    """A field path's variant paths (pure): PATH as one literal key, and as a dotted path."""
    return f"$['{path}']", "$" + "".join(f"['{p}']" for p in path.split("."))


def _field(j, path: str | None):
    """PATH as one literal key first (ECS's "log.level"), else the dotted path: a variant."""
    from pyspark.sql import functions as F

    assert path is not None
    literal_path, nested_path = field_paths(path)
    literal = F.try_variant_get(j, literal_path, "variant")
    if "." not in path:
        return literal
    nested = F.try_variant_get(j, nested_path, "variant")
    present = literal.isNotNull() & ~F.is_variant_null(literal)
    return F.when(present, literal).otherwise(nested)


def _counted(level, fmt: LineFormat):
    """Whether a well formed line's level (a column) counts; '*': every one."""
    from pyspark.sql import functions as F

    if fmt.levels == (ALL_LEVELS,):
        return F.lit(True)
    return F.upper(level).isin(*fmt.levels)


def _line_rule(plan: _Plan, ln, fmt: LineFormat, fast: bool):
    """A text line (binary column) -> reason, counted, minute, mi, level columns, the
    --group-by regex groups' columns by name, and cont (None unless --continuation-lines skip).

    Only the costly values (the regex's match, the parsed time) get a select of their own;
    the cheap ones are written where they are used. With the seed fast path every general
    column is null on a seed line, where each still costs a null check: few of them."""
    from pyspark.sql import functions as F

    if fast:
        # The seed fast path (module comment at _HEAD_RE) decides first; the general path's
        # columns are computed only for the lines it does not take.
        head = plan.let(head=F.substring(ln, 1, HEAD_BYTES).cast("string").rlike(_HEAD_RE))["head"]

        def general(e):
            return F.when(~head, e)
    else:
        def general(e):
            return e
    # One trailing \r\n, \n or \r is ignored.
    n = F.length(ln)
    line = (F.when(F.substring(ln, -2, 2) == F.lit(b"\r\n"), F.substring(ln, F.lit(1), n - 2))
            .when(F.substring(ln, -1, 1).isin(F.lit(b"\n"), F.lit(b"\r")),
                  F.substring(ln, F.lit(1), n - 1))
            .otherwise(ln))
    text = line.cast("string")
    if fmt.line_kind == "default":
        m = plan.let(m=general(F.regexp_extract(text, _DEFAULT_RE, 0)))["m"]
        word = F.substring_index(m, " ", -1)
        c = plan.let(level=word, stamp=F.translate(F.left(m, F.length(m) - F.length(word) - 1),
                                                   "[]", ""))
        no_match, no_level = m == "", F.lit(False)
        groups = {}
    else:
        # Java's own ${name} reads a named group (an unmatched one gives ""): one replacement
        # of the whole line per group. On a line that does not match it returns the line,
        # which `nm` (checked first) sends to the DLQ.
        whole = f"^(?:{fmt.line_regex})(?s:.*)\\z"
        wanted = {f"g_{d.source}": F.regexp_replace(text, whole, "${" + d.source + "}")
                  for d in fmt.group_by if d.kind == "group"}
        c = plan.let(stamp=F.regexp_replace(text, whole, "${time}"),
                     level=F.regexp_replace(text, whole, "${level}"),
                     nm=~text.rlike(f"^(?:{fmt.line_regex})"), **wanted)
        no_match, no_level = c["nm"], c["level"] == ""
        groups = {d.source: c[f"g_{d.source}"] for d in fmt.group_by if d.kind == "group"}
    level = c["level"]
    invalid, mi, out_of_range = _read_time(plan, c["stamp"], fmt,
                                           iso_checked=fmt.line_kind == "default")
    reason = (F.when(F.coalesce(F.length(line), F.lit(0)) == 0, F.lit(REASON_EMPTY))
              .when(no_match, F.lit(REASON_FORMAT if fmt.line_kind == "default"
                                    else REASON_NO_MATCH))
              .when(invalid, F.lit(REASON_TIMESTAMP))
              .when(out_of_range, F.lit(REASON_RANGE))
              .when(no_level, F.lit(REASON_NO_LEVEL)))
    counted = _counted(level, fmt)
    cont = None
    if fmt.continuation == "skip":
        # Only a refused line can be a continuation (rule.CONTINUATION): a select of its own
        # so the reason is computed once, and the regex runs on refused lines only.
        r = plan.let(r=reason)["r"]
        empty = F.coalesce(F.length(line), F.lit(0)) == 0
        # Not named cont: the rule's last step names its own (_Plan.finish), and the lateral
        # select takes a name once.
        cont = plan.let(is_cont=r.isNotNull() & (
            empty | F.coalesce(text.rlike(CONTINUATION), F.lit(False))))["is_cont"]
        reason, counted = F.when(~cont, r), ~cont & counted
    if not fast:
        return reason, counted, F.lit(None).cast("binary"), mi, level, groups, cont
    v = ln

    def part(pos: int, length: int):
        return F.substring(v, pos, length)

    def lit(t: str):
        return F.lit(t.encode())

    def number(pos: int, length: int):  # only evaluated once the shape is known to be digits
        return F.substring(v, pos, length).cast("string").try_cast("int")

    year, month, day = number(1, 4), number(6, 2), number(9, 2)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = (F.when(month == 2, F.when(leap, 29).otherwise(28))
                  .when(month.isin(4, 6, 9, 11), 30).otherwise(31))
    # Calendar and clock on the digits the shape guarantees: two-digit fields compare as text.
    time_ok = ((part(1, 4) != lit("0000"))
               & part(6, 2).between(lit("01"), lit("12")) & (part(9, 2) >= lit("01"))
               & (part(12, 2) <= lit("23")) & (part(15, 2) <= lit("59"))
               & (part(18, 2) <= lit("59"))
               & ((part(9, 2) <= lit("28")) | (day <= month_days)))
    # The exact bytes first (the usual upper-case level), then case-insensitively, but only
    # where the first letter could be the level's: upper-casing every other line (INFO, WARN,
    # DEBUG: most of them) made the seed format's per-line work 15 % dearer (1M lines, warm).
    fast_counted = F.lit(True) if fmt.levels == (ALL_LEVELS,) else None
    first = part(21, 1)
    for lv in () if fast_counted is not None else fmt.levels:
        word = part(21, len(lv) + 1)
        maybe = first.isin(lit(lv[0].upper()), lit(lv[0].lower()))
        hit = (word == lit(lv + " ")) | (maybe & (F.upper(word.cast("string")) == lv + " "))
        fast_counted = hit if fast_counted is None else fast_counted | hit
    # The head's level: the word at byte 21, up to the space the head's shape guarantees.
    fast_level = F.substring_index(part(21, HEAD_BYTES).cast("string"), " ", 1)
    return (F.when(head, F.when(~time_ok, F.lit(REASON_TIMESTAMP))).otherwise(reason),
            F.when(head, fast_counted).otherwise(counted),
            F.when(head, part(1, 16)), F.when(~head, mi),
            F.when(head, fast_level).otherwise(level), groups, cont)


def _read_time(plan: _Plan, stamp, fmt: LineFormat, iso_checked: bool):
    """Time text -> (invalid flag, minute index, out-of-range flag) columns."""
    from pyspark.sql import functions as F

    pattern = fmt.pattern
    if pattern is not None:
        # Never parsed: a year whose overflow would fail the job (TimePattern.guard).
        readable = stamp != ""
        if pattern.guard is not None:
            readable = readable & ~stamp.rlike(pattern.guard)
        parsed = plan.let(parsed=F.when(readable, F.try_to_timestamp(
            stamp, F.lit(pattern.pattern))))["parsed"]
        zoned = F.lit(pattern.has_zone)
        # A local year 0 is invalid, as in ISO text; with a zone in the pattern the parsed time
        # is already UTC, and its year is the range check's.
        invalid = parsed.isNull() if pattern.has_zone else parsed.isNull() | (F.year(parsed) == 0)
    else:
        # Spark's timestamp text takes '.' as the fraction separator only (log4j writes ',').
        iso = F.translate(stamp, ",", ".")
        # Only a line that matched has a time to parse (a seed stage's malformed lines, which
        # leave the fast path, mostly do not).
        parsed = plan.let(parsed=F.when(stamp != "", F.try_to_timestamp(iso)))["parsed"]
        after_clock = F.substring(iso, 20, 20)
        zoned = ((F.right(iso, F.lit(1)) == "Z") | (F.instr(after_clock, "+") > 0)
                 | (F.instr(after_clock, "-") > 0))
        invalid = parsed.isNull() | (F.left(stamp, F.lit(4)) == "0000")
        if not iso_checked:
            invalid = ~stamp.rlike(_ISO_RE) | invalid
    utc = parsed
    if fmt.timezone != "UTC":  # used twice below: a select of its own
        utc = plan.let(utc=F.when(zoned, parsed).otherwise(
            F.to_utc_timestamp(parsed, fmt.timezone)))["utc"]
    in_range = F.year(utc).between(1, 9999)
    return invalid, F.when(in_range, F.floor(F.unix_seconds(utc) / 60) + EPOCH_MINUTE), ~in_range


def _structured(plan: _Plan, j, tf, lvf, fmt: LineFormat):
    """Time and level fields (variants) -> reason, counted, minute, mi, level columns."""
    from pyspark.sql import functions as F

    c = plan.let(t_type=F.schema_of_variant(tf), lv_type=F.schema_of_variant(lvf))
    is_text = c["t_type"] == "STRING"
    is_number = c["t_type"].isin(*_NUMBER_TYPES) | c["t_type"].startswith("DECIMAL")
    level_text = F.when(lvf.isNull() | (c["lv_type"] == "VOID"), F.lit("")).otherwise(
        F.try_variant_get(lvf, "$", "string"))
    # Epoch seconds below 10^11, else milliseconds; compared as doubles before the floor, so an
    # infinite or huge number is out of range instead of overflowing the cast.
    v = F.try_variant_get(tf, "$", "double")
    q = F.when(F.abs(v) < _EPOCH_SECONDS_BELOW, v / 60.0).otherwise(v / 60000.0)
    c = plan.let(is_text=is_text, is_number=is_number, level=level_text,
                 tstr=F.when(is_text, F.try_variant_get(tf, "$", "string")),
                 q=F.when(is_number, q))
    invalid, text_mi, text_out = _read_time(plan, c["tstr"], fmt, iso_checked=False)
    q = c["q"]
    q_ok = (q >= float(-EPOCH_MINUTE)) & (q < float(MINUTE_END - EPOCH_MINUTE))
    is_text, is_number, level = c["is_text"], c["is_number"], c["level"]
    reason = (F.when(j.isNull(), F.lit(REASON_NOT_JSON))
              .when(tf.isNull() | ~(is_text | is_number), F.lit(REASON_TIME_FIELD))
              .when(is_text & invalid, F.lit(REASON_TIMESTAMP))
              .when(is_text & text_out, F.lit(REASON_RANGE))
              .when(is_number & ~q_ok, F.lit(REASON_RANGE))
              .when(level == "", F.lit(REASON_NO_LEVEL)))
    mi = F.when(is_text, text_mi).otherwise(F.when(q_ok, F.floor(q) + EPOCH_MINUTE))
    return reason, _counted(level, fmt), F.lit(None).cast("binary"), mi, level
