"""Seeded records of every format kind, near every edge of its rule: the corpus that holds the
Spark plan (logcount/formats/spark.py) to its pure twin (logcount/formats/rule.py) line by line.

`FORMATS[name]` is (LineFormat, generator); `corpus(name, n, seed)` draws n records from the
generator, with a few of every other format's records mixed in (a JSON format meets text lines,
a text format meets JSON). Records are bytes, as Kafka gives them: invalid UTF-8, NUL bytes,
terminators, invalid JSON and duplicate keys included.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from logcount.formats.spec import LineFormat

Gen = Callable[[random.Random], bytes]

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# Local times around New York's DST changes of 2017: the repeated hour on 11-05, the skipped
# one on 03-12.
DST_DAYS = ((2017, 3, 12), (2017, 11, 5))


def _pick(rng: random.Random, good, bad=(), p_bad: float = 0.08):
    """One of `good`, or with probability `p_bad` one of `bad`."""
    return rng.choice(bad) if bad and rng.random() < p_bad else rng.choice(good)


def _days(y: int, m: int) -> int:
    if m == 2:
        return 29 if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def fields(rng: random.Random) -> tuple[int, int, int, int, int, int]:
    """(year, month, day, hour, minute, second): mostly valid, around DST changes, at the ends of
    the calendar (where old zones' offsets have seconds), or out of range (month 13, day 31 of
    a 30-day month, hour 24, second 60)."""
    return _fields(rng)


def _fields(rng: random.Random) -> tuple[int, int, int, int, int, int]:
    r = rng.random()
    if r < 0.15:
        y, mo, d = rng.choice(DST_DAYS)
        return y, mo, d, rng.choice((0, 1, 1, 2, 2, 3)), rng.randrange(60), rng.randrange(60)
    if r < 0.27:
        y = rng.choice((0, 1, 1, 2, 1900, 2000, 2016, 9998, 9999, 9999))
        mo = rng.choice((1, 2, 12))
        d = rng.choice((1, 28, 29, _days(max(y, 1), mo)))
        return y, mo, d, rng.choice((0, 23)), rng.choice((0, 30, 59)), rng.randrange(60)
    if r < 0.37:
        return (rng.choice((0, 1900, 2000, 2016, 2017, 9999)), rng.randrange(14),
                rng.randrange(33), rng.randrange(26), rng.randrange(62), rng.randrange(62))
    y, mo = rng.randrange(1970, 2040), rng.randrange(1, 13)
    return (y, mo, rng.randrange(1, _days(y, mo) + 1), rng.randrange(24), rng.randrange(60),
            rng.randrange(60))


def fraction(rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        return b""
    digits = b"".join(b"%d" % rng.randrange(10) for _ in range(9))
    return _pick(rng, [b".", b","]) + digits[:_pick(rng, range(1, 10), [0, 10], 0.05)] + (
        b"1" if rng.random() < 0.02 else b"")


def zone(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.5:
        return b""
    if r < 0.6:
        return b"Z"
    if r < 0.95:
        hh = _pick(rng, [0, 1, 2, 5, 8, 9, 10, 14, 18], [19, 23, 99], 0.1)
        mm = _pick(rng, [0, 30, 45, 59], [60, 99], 0.05)
        return b"%s%02d%s%02d" % (_pick(rng, [b"+", b"-"]), hh, _pick(rng, [b":", b""]), mm)
    return rng.choice([b"z", b"+", b"-0", b"+08", b"+8:00", b"UTC", b"+08:0", b" Z", b"+05:30:00"])


LEVELS = [b"ERROR", b"ERROR", b"ERROR", b"error", b"Error", b"eRrOr", b"INFO", b"WARN", b"FATAL",
          b"fatal", b"E", b"ERRORS", b"A" * 42, b"A" * 43, b"A" * 44, b"E" * 100]
BAD_LEVELS = [b"", b"ERR0R", b"\xc3\x89RROR", b"ERROR:", b"ERROR\t", b"ERR\x00OR", b"\xffERROR"]
MESSAGES = [b"", b"boom", b"Fatal error during startup (kafka.server.KafkaServer)",
            b"\xc3\x28\xff not utf-8", b"caf\xc3\xa9", b"x" * 80, b"tab\there", b"a\nsecond line",
            b"nul\x00byte", b"\r", b"{\"json\": 1}"]
TERMINATORS = [b"", b"", b"", b"\n", b"\r", b"\r\n"]
BAD_TERMINATORS = [b"\r\r", b"\n\n", b"\n\r", b"\r\n\n", b" \n"]


def iso_stamp(rng: random.Random, zoned: bool = True) -> bytes:
    y, mo, d, h, mi, s = fields(rng)
    sep = _pick(rng, [b" ", b" ", b"T"], [b"t", b"_", b""])
    return (b"%04d-%02d-%02d%s%02d:%02d:%02d" % (y, mo, d, sep, h, mi, s) + fraction(rng)
            + (zone(rng) if zoned else b""))


def message(rng: random.Random) -> bytes:
    return rng.choice(MESSAGES) if rng.random() < 0.7 else rng.randbytes(rng.randrange(40))


def default_line(rng: random.Random) -> bytes:
    """The default rule's shapes: seed lines (the fast path, long levels around its 64-byte
    head), Kafka's bracketed stamps, RFC 3339 fractions and zones, and their near misses."""
    r = rng.random()
    if r < 0.04:
        return rng.randbytes(rng.randrange(70))
    if r < 0.35:  # the seed shape exactly (the fast path when the zone is UTC)
        y, mo, d, h, mi, s = fields(rng)
        stamp = b"%04d-%02d-%02d %02d:%02d:%02d" % (y, mo, d, h, mi, s)
    else:
        stamp = iso_stamp(rng)
    if rng.random() < 0.25:
        opening, closing = _pick(rng, [(b"[", b"]")], [(b"[", b""), (b"", b"]"), (b"(", b")")])
        stamp = opening + stamp + closing
    level = _pick(rng, LEVELS, BAD_LEVELS)
    after = _pick(rng, [b" ", b" ", b" ", b""], [b"  ", b"\t", b":", b"\xff"])
    body = message(rng) if after == b" " or rng.random() < 0.2 else b""
    sep = _pick(rng, [b" "], [b"", b"  ", b"\t"], 0.05)
    return stamp + sep + level + after + body + _pick(rng, TERMINATORS, BAD_TERMINATORS)


# --- --line-regex formats (logcount/formats/shapes.py's, and one that takes any non-blank level)
# -------

LOG4J2_RE = (r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[.,]\d{1,9}) \[[^\]]*\] +"
             r"(?<level>[A-Za-z]+)")
PYTHON_RE = r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) - \S+ - (?<level>[A-Za-z]+) - "
SPARK_RE = r"(?<time>\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}) (?<level>[A-Za-z]+) "
APACHE_RE = r'\S+ \S+ \S+ \[(?<time>[^\]]+)\] "[^"]*" (?<level>\d+)'
ANY_RE = r"(?<time>\S+ \S+) (?<level>[A-Za-z]*)"
THREADS = [b"main", b"pool-1-thread-2", b"", b"kafka-producer-network-thread | producer-1",
           b"\xff\xfe", b"a\nb", b"x]"]


def log4j2_line(rng: random.Random) -> bytes:
    y, mo, d, h, mi, s = fields(rng)
    frac = _pick(rng, [b".123", b",123", b".5", b".123456789"], [b"", b".", b".1234567890"])
    stamp = b"%04d-%02d-%02d %02d:%02d:%02d%s" % (y, mo, d, h, mi, s, frac)
    pad = b" " * _pick(rng, [1, 1, 2], [0])
    return (stamp + b" [" + rng.choice(THREADS) + b"]" + pad + _pick(rng, LEVELS, BAD_LEVELS)
            + b" com.example.Foo - " + message(rng) + _pick(rng, TERMINATORS, BAD_TERMINATORS))


def python_line(rng: random.Random) -> bytes:
    y, mo, d, h, mi, s = fields(rng)
    stamp = b"%04d-%02d-%02d %02d:%02d:%02d%s" % (y, mo, d, h, mi, s,
                                                   _pick(rng, [b",123"], [b".123", b",12", b""]))
    name = _pick(rng, [b"app.db", b"root", b"caf\xc3\xa9"], [b"", b"a b", b"\xff", b"a\x0bb",
                                                              b"a\x1cb", b"a\xc2\xa0b"])
    sep = _pick(rng, [b" - "], [b" -", b"-"])
    return (stamp + b" - " + name + b" - " + _pick(rng, LEVELS, BAD_LEVELS) + sep
            + message(rng) + _pick(rng, TERMINATORS, BAD_TERMINATORS))


def spark_line(rng: random.Random) -> bytes:
    y, mo, d, h, mi, s = fields(rng)
    stamp = b"%02d/%02d/%02d %02d:%02d:%02d" % (y % 100, mo, d, h, mi, s)
    if rng.random() < 0.05:
        stamp = rng.choice([b"2017/07/30 14:09:08", b"17/7/30 14:09:08", b"17-07-30 14:09:08"])
    return (stamp + b" " + _pick(rng, LEVELS, BAD_LEVELS) + b" " + b"Executor: "
            + message(rng) + _pick(rng, TERMINATORS, BAD_TERMINATORS))


def apache_line(rng: random.Random) -> bytes:
    y, mo, d, h, mi, s = fields(rng)
    mon = MONTHS[mo - 1].encode() if 1 <= mo <= 12 else b"Foo"
    mon = _pick(rng, [mon], [mon.lower(), mon.upper(), b"Sept", b"M\xc3\xa4r", b"July"], 0.1)
    z = _pick(rng, [b"+0200", b"-0000", b"+0000", b"-0530", b"+1800"],
              [b"+2400", b"+0560", b"Z", b"+02:00", b"", b"+02"], 0.15)
    stamp = b"%02d/%s/%04d:%02d:%02d:%02d %s" % (d, mon, y, h, mi, s, z)
    status = _pick(rng, [b"500", b"503", b"200", b"404", b"0500"], [b"", b"5xx"])
    return (rng.choice([b"127.0.0.1", b"::1"]) + b" - " + rng.choice([b"-", b"frank"]) + b" ["
            + stamp.strip() + b'] "GET /x HTTP/1.1" ' + status + b" " + b"%d" % rng.randrange(9999)
            + _pick(rng, TERMINATORS, BAD_TERMINATORS))


def any_line(rng: random.Random) -> bytes:
    """`(?<time>\\S+ \\S+) (?<level>[A-Za-z]*)`: ISO times without a pattern, empty levels."""
    stamp = iso_stamp(rng)
    if rng.random() < 0.1:
        stamp = rng.choice([b"30/07/2017 14:09:08", b"yesterday at-noon", b"2017-07-30 \xff"])
    return (stamp + b" " + _pick(rng, LEVELS + [b"", b"-", b"1"], BAD_LEVELS) + b" "
            + message(rng) + _pick(rng, TERMINATORS, BAD_TERMINATORS))


# --- JSON ---------------------------------------------------------------------------------------

# JSON texts that are not an object (or not JSON at all), and objects at the parsers' edges.
NOT_OBJECTS = [b"", b"   ", b"null", b"[]", b'["2017-07-30 14:09:08 ERROR x"]', b'"text"', b"42",
               b"{", b'{"a": 1', b"{'a': 1}", b'{"a": NaN}', b'{"a": Infinity}', b'{"a": 1,}',
               b'{"a": 01}', b"\xef\xbb\xbf{}", b"\x0c{}", b"\xc2\xa0{}", b"{}{}", b"{} x",
               b"  \n\t\r{}", b'{"a": "\\ud800"}', b'{"a": "\xff"}', b'{"\xff": 1}', b"\xff{}",
               b'{"a": 1} {"b": 2}', b"{" + b'"a":{' * 800 + b"}" * 801,
               b"{" + b'"a":{' * 1500 + b"}" * 1501, b"{" + b'"a":[' * 900 + b"]" * 900 + b"}"]


def _obj(rng: random.Random, tree: Tree) -> bytes:
    """A JSON object from a tree of JSON tokens, keys shuffled, sometimes with a duplicated key,
    odd whitespace, non-UTF-8 bytes, text around it, or cut short."""
    ws = _pick(rng, ["", " "], ["\n", "\t", "\r\n  "], 0.1)
    body = _serialise(tree, rng, ws, True).encode()
    r = rng.random()
    if r < 0.03:  # invalid UTF-8 somewhere (in a string it becomes U+FFFD; elsewhere: not JSON)
        i = rng.randrange(len(body) + 1)
        body = body[:i] + rng.choice([b"\xff", b"\xc3\x28", b"\xe2\x82"]) + body[i:]
    elif r < 0.05:
        body = rng.choice([b" ", b"\n", b"\t\r\n"]) + body + rng.choice([b"", b"\n", b" trailing"])
    elif r < 0.06:
        body = body[:rng.randrange(len(body))]  # cut short
    return body


def _text(s: bytes | str, rng: random.Random) -> str:
    """A JSON string token holding `s` (bytes decoded with U+FFFD for what is not UTF-8)."""
    text = s.decode("utf-8", "replace") if isinstance(s, bytes) else s
    return json.dumps(text, ensure_ascii=rng.random() < 0.5)


def _odd_value(rng: random.Random) -> str:
    return rng.choice(["null", "true", "false", "42", "-1.5", "[]", '["x"]', "{}", '{"a":"b"}',
                      '""', '"\\u0000"', '"\\ud800"'])


def line_field(rng: random.Random, line: Gen) -> str | None:
    """The line field's token: mostly a line as text, else another JSON value or missing."""
    r = rng.random()
    if r < 0.85:
        return _text(line(rng), rng)
    return None if r < 0.9 else _odd_value(rng)


Tree = dict  # key -> JSON token (str) or a nested Tree


def _put(tree: Tree, path: str, token: str | None, rng: random.Random) -> None:
    """Put `token` at `path`: a plain key, or for a dotted path as one literal key, nested
    objects, or both (the literal then sometimes null or another value)."""
    if token is None:
        return
    r = rng.random() if "." in path else 0.0
    if r < 0.45:
        tree[path] = token
        return
    if r >= 0.85:
        tree[path] = rng.choice(["null", token, _odd_value(rng)])
    *heads, last = path.split(".")
    node = tree
    for h in heads:
        if not isinstance(node.get(h), dict):
            node[h] = {}
        node = node[h]
    node[last] = token
    if rng.random() < 0.3:
        node["other"] = '"x"'


def _serialise(tree: Tree, rng: random.Random, ws: str, top: bool) -> str:
    pairs = list(tree.items())
    rng.shuffle(pairs)
    if top and pairs and rng.random() < 0.04:
        pairs.append(rng.choice(pairs))  # a duplicated key
    items = [f"{json.dumps(k, ensure_ascii=rng.random() < 0.5)}:{ws}"
             f"{_serialise(v, rng, ws, False) if isinstance(v, dict) else v}" for k, v in pairs]
    return "{" + ws + ("," + ws).join(items) + ws + "}"


# --group-by values: case and padding, separators and quotes, NUL, values around the 255-byte cut
# (1-, 2- and 4-byte characters), numbers and booleans, objects and arrays, text like them.
DIM_TOKENS = ['"web-1"', '"Web-1"', '"pad "', '"a|b"', '"q\\"uote"', '"new\\nline"', '"\\u0000nul"',
              '"caf\u00e9"', json.dumps("x" * 300), json.dumps("a" * 254 + "\u00e9" * 3),
              json.dumps("\u00e9" * 200), json.dumps("b" * 253 + "\U0001f600" * 2),
              json.dumps("\u20ac" * 90), "42", "-1.5", "1e3", "50.00", "true", "false", "null",
              "{}", "[]", '{"a": 1}', '["x"]', '"\\ud800"', '"{text"', '"[text]"']


def dim_token(rng: random.Random) -> str | None:
    return None if rng.random() < 0.1 else rng.choice(DIM_TOKENS)


KEYS = [None, b"", b"svc-1", b"\xff\xfe", b"caf\xc3\xa9", b"a\xc3", b"\xed\xa0\x80", b"k" * 300,
        b"\xc3\xa9" * 200, b"nul\x00"]


def record_key(rng: random.Random) -> bytes | None:
    return rng.choice(KEYS) if rng.random() < 0.9 else rng.randbytes(rng.randrange(20))


def envelope(field: str, line: Gen, extra: tuple[str, ...] = ()) -> Gen:
    """--json-line-field: shippers' envelopes (Filebeat, Docker's json-file log) holding a line,
    with `extra` field paths holding --group-by values."""

    def gen(rng: random.Random) -> bytes:
        if rng.random() < 0.05:
            return rng.choice(NOT_OBJECTS)
        tree: Tree = {"@timestamp": '"2017-07-30T14:09:09.000Z"', "stream": '"stderr"'}
        if rng.random() < 0.5:
            tree["host"] = {"name": '"web-1"'}
        tok = line_field(rng, lambda r: line(r) + (b"\n" if r.random() < 0.3 else b""))
        _put(tree, field, tok, rng)
        for path in extra:
            _put(tree, path, dim_token(rng), rng)
        return _obj(rng, tree)

    return gen


EPOCH_S = 1501423748  # 2017-07-30 14:09:08 UTC
NUMBER_EDGES = ["0", "-0", "-0.0", "0.5", "-0.5", "59.999999", "60", "-60", "99999999999",
                "99999999999.9", "100000000000", "1e11", "1E11", "-99999999999", "1.5e9",
                "1.501423748E9", "1501423748123e0", "1e300", "-1e300", "1e400", "-1e400",
                "123456789012345678901234567890", "1234567890123456789012345678901234567890",
                "253402300799", "253402300799999", "253402300800000", "-62135596800000",
                "-62135596800001", "-62135596860000", "9223372036854775807",
                "9223372036854775808", "1501423748.000000000000000000001", "1e-7"]


def time_token(rng: random.Random, text: Gen | None = None) -> str | None:
    """A time field's JSON token: ISO text (or `text`'s), epoch seconds or milliseconds as ints,
    decimals or exponents, edges of both readings and of the calendar, other JSON, or missing."""
    r = rng.random()
    if r < 0.35:
        return _text((text or iso_stamp)(rng), rng)
    if r < 0.5:
        return str(EPOCH_S + rng.randrange(-10**8, 10**8))
    if r < 0.62:
        return f"{EPOCH_S + rng.randrange(-10**6, 10**6) + rng.random():.6f}"
    if r < 0.75:
        return str((EPOCH_S + rng.randrange(-10**8, 10**8)) * 1000 + rng.randrange(1000))
    if r < 0.85:
        return rng.choice(NUMBER_EDGES)
    if r < 0.93:
        return _odd_value(rng)
    return None


def level_token(rng: random.Random) -> str | None:
    r = rng.random()
    if r < 0.55:
        return _text(_pick(rng, LEVELS + [b"critical", b"50"], BAD_LEVELS + [b" ERROR",
                                                                             b"ERROR "]), rng)
    if r < 0.8:
        return rng.choice(["50", "60", "30", "50.0", "50.00", "5e1", "50.5", "-50", "0.5",
                           "1e20", "1E-5", "123456789012345678901234567890", "true", "false",
                           "5.0E1"])
    if r < 0.93:
        return _odd_value(rng)
    return None


def structured(time_field: str, level_field: str, text: Gen | None = None,
               extra: tuple[str, ...] = ()) -> Gen:
    """--json-time-field/--json-level-field: logstash, ECS, zap and pino records and their
    near misses (with `extra` field paths holding --group-by values)."""

    def gen(rng: random.Random) -> bytes:
        if rng.random() < 0.05:
            return rng.choice(NOT_OBJECTS)
        tree: Tree = {"message": _text(message(rng), rng)}
        _put(tree, time_field, time_token(rng, text), rng)
        _put(tree, level_field, level_token(rng), rng)
        for path in extra:
            _put(tree, path, dim_token(rng), rng)
        return _obj(rng, tree)

    return gen


def pattern_time(rng: random.Random) -> bytes:
    """dd/MMM/yyyy:HH:mm:ss Z text, for a structured log's time field."""
    return apache_line(rng).split(b"[", 1)[1].split(b"]", 1)[0]


# --- stack traces (--continuation-lines skip) ----------------------------------------------------

# What JVM and Python traces print between log lines, and near misses of each (rule.CONTINUATION).
TRACE_HEADS = [b"\tat com.example.Foo.bar(Foo.java:12)", b"    at x", b" ", b"\t", b"", b"\x0b",
               b"Caused by: java.lang.IllegalStateException: inner", b"Caused by:", b"Caused by",
               b"caused by: x", b"\tSuppressed: java.io.IOException: close", b"Suppressed:",
               b"\t... 12 more", b"... 12 more", b"...12 more", b"... 7 common frames omitted",
               b"... x more", b"... 12 more!", b"..  12 more", b'Exception in thread "main" a.B',
               b"Exception in thread main", b"Traceback (most recent call last):",
               b"Traceback (most recent call last)", b'  File "x.py", line 3, in <module>',
               b"During handling of the above exception, another exception occurred:",
               b"The above exception was the direct cause of the following exception:",
               b"ValueError: bad", b"ValueError", b"ValueError bad", b"ValueError:", b"Error: x",
               b"error: x", b"KeyboardInterrupt", b"SystemExit: 1", b"StopIteration",
               b"__main__.Oops: x", b"mod.sub.Oops", b"java.lang.IllegalStateException: outer",
               b"java.lang.", b".Foo: x", b"Foo.: x", b"com.x.Y$Inner: z", b"$Foo.b_1: x",
               b"Oops: x", b"oops", b"17 Error", b"1a.b: x", b"a..b: x", b"a.b c", b"a.b-c: x",
               b"\xffValueError: x", b"ValueError: \xff", b"Valu\xc3\xa9Error: x",
               b"\xc2\xa0at x", b"\xe3\x80\x80at x", b"x" * 300 + b"Error: y",
               b"a." * 200 + b"B: x", b"a." * 200 + b"b c"]
TRACE_TAILS = [b"", b"", b"", b"\n", b"\r", b"\r\n", b"\r\r", b"\n\n", b"\x85", b"\xe2\x80\xa8",
               b" trailing", b"\x00"]


def trace_line(rng: random.Random) -> bytes:
    return rng.choice(TRACE_HEADS) + _pick(rng, [b""], TRACE_TAILS, 0.3)


def with_traces(line: Gen) -> Gen:
    """`line`'s records, a third of them replaced by stack-trace lines and their near misses."""

    def gen(rng: random.Random) -> bytes:
        return trace_line(rng) if rng.random() < 0.35 else line(rng)

    return gen


INDENTED_RE = r"[ \t]*(?<time>\S+ \S+) (?<level>[A-Za-z]+)"


def indented_line(rng: random.Random) -> bytes:
    """A layout whose own lines start with blanks: a log line is never a continuation."""
    return rng.choice([b" ", b"\t", b"  ", b""]) + any_line(rng)


NEW_YORK = "America/New_York"

FORMATS: dict[str, tuple[LineFormat, Gen]] = {
    "default": (LineFormat(), default_line),
    "default-error-fatal": (LineFormat.from_flags(level="fatal,ERROR"), default_line),
    "default-new-york": (LineFormat.from_flags(timezone=NEW_YORK), default_line),
    "default-+05:30": (LineFormat.from_flags(timezone="+05:30"), default_line),
    "default-lord-howe": (LineFormat.from_flags(timezone="Australia/Lord_Howe"), default_line),
    "log4j2": (LineFormat.from_flags(line_regex=LOG4J2_RE), log4j2_line),
    "log4j2-new-york": (LineFormat.from_flags(line_regex=LOG4J2_RE, timezone=NEW_YORK),
                        log4j2_line),
    "python": (LineFormat.from_flags(line_regex=PYTHON_RE, level="error,critical"), python_line),
    "spark": (LineFormat.from_flags(line_regex=SPARK_RE, time_pattern="yy/MM/dd HH:mm:ss"),
              spark_line),
    "spark-new-york": (LineFormat.from_flags(line_regex=SPARK_RE, time_pattern="yy/MM/dd HH:mm:ss",
                                             timezone=NEW_YORK), spark_line),
    "apache": (LineFormat.from_flags(line_regex=APACHE_RE, level="500,503",
                                     time_pattern="dd/MMM/yyyy:HH:mm:ss Z"), apache_line),
    "any-regex": (LineFormat.from_flags(line_regex=ANY_RE), any_line),
    "filebeat": (LineFormat.from_flags(json_line_field="message"),
                 envelope("message", default_line)),
    "docker": (LineFormat.from_flags(json_line_field="log", timezone="+05:30"),
               envelope("log", default_line)),
    "envelope-dotted": (LineFormat.from_flags(json_line_field="event.original"),
                        envelope("event.original", default_line)),
    "envelope-python": (LineFormat.from_flags(json_line_field="log", line_regex=PYTHON_RE),
                        envelope("log", python_line)),
    "logstash": (LineFormat.from_flags(json_time_field="@timestamp", json_level_field="level"),
                 structured("@timestamp", "level")),
    "ecs": (LineFormat.from_flags(json_time_field="@timestamp", json_level_field="log.level"),
            structured("@timestamp", "log.level")),
    "zap": (LineFormat.from_flags(json_time_field="ts", json_level_field="level"),
            structured("ts", "level")),
    "pino": (LineFormat.from_flags(level="50,60", json_time_field="time",
                                   json_level_field="level"), structured("time", "level")),
    "structured-new-york": (LineFormat.from_flags(level="error,true,50", timezone=NEW_YORK,
                                                  json_time_field="a.t",
                                                  json_level_field="a.b.l"),
                            structured("a.t", "a.b.l")),
    "structured-pattern": (LineFormat.from_flags(json_time_field="t", json_level_field="l",
                                                 time_pattern="dd/MMM/yyyy:HH:mm:ss Z"),
                           structured("t", "l", pattern_time)),
    # --continuation-lines skip
    "default-skip": (LineFormat.from_flags(continuation_lines="skip"), with_traces(default_line)),
    "default-skip-new-york": (LineFormat.from_flags(continuation_lines="skip", timezone=NEW_YORK),
                              with_traces(default_line)),
    "log4j2-skip": (LineFormat.from_flags(line_regex=LOG4J2_RE, continuation_lines="skip"),
                    with_traces(log4j2_line)),
    "python-skip": (LineFormat.from_flags(line_regex=PYTHON_RE, continuation_lines="skip"),
                    with_traces(python_line)),
    "indented-skip": (LineFormat.from_flags(line_regex=INDENTED_RE, continuation_lines="skip"),
                      with_traces(indented_line)),
    "envelope-skip": (LineFormat.from_flags(json_line_field="log", continuation_lines="skip"),
                      envelope("log", with_traces(default_line))),
}


def corpus(name: str, n: int, seed: int) -> list[bytes]:
    """n records for format `name` (about 4% drawn from the other formats' generators)."""
    rng = random.Random(f"{name}:{seed}")
    gens = [g for _, g in FORMATS.values()]
    own = FORMATS[name][1]
    return [own(rng) if rng.random() >= 0.04 else rng.choice(gens)(rng) for _ in range(n)]


LOGGER_RE = r"(?<time>\S+ \S+) (?<level>[A-Za-z]*) (?<logger>\S*)"
# Formats with --group-by (kept apart from FORMATS, whose corpora they would otherwise change).
GROUPED: dict[str, tuple[LineFormat, Gen]] = {
    "default-by-level-key": (LineFormat.from_flags(level="*", group_by="level,k=key"),
                             default_line),
    "default-new-york-by-level": (LineFormat.from_flags(level="error,info,warn", timezone=NEW_YORK,
                                                        group_by="level"), default_line),
    "regex-by-logger": (LineFormat.from_flags(line_regex=LOGGER_RE, level="*",
                                              group_by="logger,level"), any_line),
    "filebeat-by-host-ns": (LineFormat.from_flags(
        json_line_field="message", level="*",
        group_by="host.name,ns=kubernetes.namespace_name,level"),
        envelope("message", default_line, ("host.name", "kubernetes.namespace_name"))),
    "ecs-by-service-key": (LineFormat.from_flags(
        json_time_field="@timestamp", json_level_field="log.level", group_by="service.name,k=key"),
        structured("@timestamp", "log.level", extra=("service.name",))),
}


def grouped_corpus(name: str, n: int, seed: int) -> list[tuple[bytes | None, bytes]]:
    """n (key, value) records for GROUPED format `name` (about 4% from FORMATS' generators)."""
    rng = random.Random(f"{name}:{seed}")
    gens = [g for _, g in FORMATS.values()]
    own = GROUPED[name][1]
    return [(record_key(rng), own(rng) if rng.random() >= 0.04 else rng.choice(gens)(rng))
            for _ in range(n)]
