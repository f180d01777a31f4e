"""--time-pattern as Spark reads it, in pure Python: the part of java.time's DateTimeFormatter
that Spark's try_to_timestamp(text, pattern) uses for the letters this project takes.

Spark (Iso8601TimestampFormatter with DateTimeFormatterHelper) builds the formatter with
`parseCaseInsensitive()`, strict parsing, ResolverStyle.STRICT, `y` read as `u` (the proleptic
year), and a pattern holding an `S` built part by part with `appendFraction(NANO_OF_SECOND, 1, n)`
for each run of n S. java.time then parses greedily and never backtracks: an optional section
`[...]` is kept when all of it parses at that point and skipped (with what it read) otherwise;
a number reads as many digits as its width allows, except where adjacent value parsing leaves
the following fixed-width numbers their digits. The whole text must be read. This module
builds the same parser tree and runs it the same way; spec.TimePattern validates and wraps it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["PatternError", "Lit", "Num", "Frac", "Text", "Offset", "Opt", "build", "read"]


class PatternError(ValueError):
    """A pattern java.time refuses, or one this module does not reproduce."""


NORMAL, NOT_NEGATIVE, EXCEEDS_PAD = "normal", "not-negative", "exceeds-pad"
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
RESERVED = "{}#"
TERMINATORS = "\n\r\x85\u2028\u2029"


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Num:
    """NumberPrinterParser (and ReducedPrinterParser when `reduced`): `sub` is java.time's
    subsequentWidth, -1 once the parser was made fixed width."""

    field: str
    lo: int
    hi: int
    sign: str
    sub: int = 0
    reduced: bool = False


@dataclass(frozen=True)
class Frac:
    """The fraction of a second, 1 to `hi` digits (Spark's variable-length S..S)."""

    lo: int
    hi: int
    sub: int = 0
    sign: str = NOT_NEGATIVE


@dataclass(frozen=True)
class Text:
    field: str  # "month" (MMM) or "ampm" (a)


@dataclass(frozen=True)
class Offset:
    """OffsetIdPrinterParser: X (+HHmm), XX (+HHMM), XXX (+HH:MM) with 'Z' for zero; Z..ZZZ
    (+HHMM) with '+0000' for zero."""

    minutes: str  # "optional" (X), "mandatory" (XX, Z) or "colon" (XXX)
    zero: str


@dataclass(frozen=True)
class Opt:
    items: tuple


# --- building: DateTimeFormatterBuilder.appendPattern and its adjacent value parsing ----------


class _Level:
    def __init__(self, parent: _Level | None) -> None:
        self.parent = parent
        self.items: list = []
        self.active = -1  # valueParserIndex


class _Builder:
    def __init__(self) -> None:
        self.level = _Level(None)

    def internal(self, pp) -> int:
        lv = self.level
        lv.items.append(pp)
        lv.active = -1
        return len(lv.items) - 1

    def value(self, pp) -> None:
        lv = self.level
        if lv.active >= 0:
            i = lv.active
            base = lv.items[i]
            if pp.lo == pp.hi and pp.sign == NOT_NEGATIVE:
                base = replace(base, sub=base.sub + pp.hi)
                self.internal(replace(pp, sub=-1))
                lv.active = i
            else:
                base = base if base.sub == -1 else replace(base, sub=-1)
                lv.active = self.internal(pp)
            lv.items[i] = base
        else:
            lv.active = self.internal(pp)

    def literal(self, text: str) -> None:
        if text:
            self.internal(Lit(text))

    def optional_start(self) -> None:
        self.level.active = -1
        self.level = _Level(self.level)

    def optional_end(self) -> None:
        lv = self.level
        if lv.parent is None:
            raise PatternError("a ] without a [ before it")
        self.level = lv.parent
        if lv.items:
            self.internal(Opt(tuple(lv.items)))

    def fraction(self, n: int) -> None:
        if n == 1:
            self.value(Frac(1, 1))
        else:
            self.internal(Frac(1, n))

    def pattern(self, text: str, letter) -> None:
        """appendPattern(text); `letter(builder, char, count)` appends a pattern letter's parser."""
        i = 0
        while i < len(text):
            c = text[i]
            if "A" <= c <= "Z" or "a" <= c <= "z":
                j = i
                while j < len(text) and text[j] == c:
                    j += 1
                letter(self, c, j - i)
                i = j
                continue
            if c == "'":
                j = i + 1
                while j < len(text):
                    if text[j] == "'":
                        if text[j + 1:j + 2] == "'":
                            j += 2
                            continue
                        break
                    j += 1
                if j >= len(text):
                    raise PatternError("an unclosed quote")
                inner = text[i + 1:j]
                self.literal(inner.replace("''", "'") if inner else "'")
                i = j + 1
                continue
            if c == "[":
                self.optional_start()
            elif c == "]":
                self.optional_end()
            elif c in RESERVED:
                raise PatternError(f"{c} is reserved")
            else:
                self.literal(c)
            i += 1

    def finish(self) -> tuple:
        while self.level.parent is not None:  # toFormatter() closes open sections
            self.optional_end()
        return tuple(self.level.items)


def build(pattern: str, letter) -> tuple:
    """The parser tree Spark builds for `pattern` (y already read as u): with an S anywhere,
    the pattern split at quotes and each run of S a variable-width fraction, else the whole
    pattern through appendPattern."""
    b = _Builder()
    if "S" not in pattern:
        b.pattern(pattern, letter)
        return b.finish()
    # Spark also builds the whole pattern for formatting: its mistakes (an unclosed quote) fail
    # there, though the split below would take them.
    _Builder().pattern(pattern, lambda _b, _c, _n: None)
    parts = pattern.split("'")
    while len(parts) > 1 and parts[-1] == "":  # Java's String.split drops trailing empties
        parts.pop()
    for idx, part in enumerate(parts):
        if part == "" and idx != 0:
            b.literal("'")
        elif idx % 2 == 0:
            rest = part
            while rest:
                k = 0
                while k < len(rest) and rest[k] != "S":
                    k += 1
                n = k
                while n < len(rest) and rest[n] == "S":
                    n += 1
                b.pattern(rest[:k], letter)
                if n > k:
                    b.fraction(n - k)
                rest = rest[n:]
        else:
            b.literal(part)
    return b.finish()


# --- parsing ----------------------------------------------------------------------------------


class _Thrown(Exception):
    """A DateTimeException thrown while parsing (an offset hour past 23): the whole parse fails,
    optional section or not."""


def _up(c: str) -> str:
    u = c.upper()
    return u if len(u) == 1 else c


def _low(c: str) -> str:
    u = c.lower()
    return u if len(u) == 1 else c


def _same(a: str, b: str) -> bool:
    """DateTimeParseContext.subSequenceEquals, case-insensitively (equal lengths)."""
    for x, y in zip(a, b, strict=True):
        if x != y and _up(x) != _up(y) and _low(x) != _low(y):
            return False
    return True


_DIGITS = "0123456789"


def _set(fields: dict, name: str, value: int) -> bool:
    old = fields.get(name)
    fields[name] = value
    return old is None or old == value


def _number(pp: Num, text: str, pos: int, fields: dict) -> int:
    length = len(text)
    if pos == length:
        return -1
    negative = positive = False
    c = text[pos]
    if c == "+":  # SignStyle.parse in strict mode: '+' only where it exceeds the padding
        if pp.sign != EXCEEDS_PAD:
            return -1
        positive, pos = True, pos + 1
    elif c == "-":
        if pp.sign == NOT_NEGATIVE:
            return -1
        negative, pos = True, pos + 1
    min_end = pos + pp.lo
    if min_end > length:
        return -1
    eff_max = pp.hi + max(pp.sub, 0)
    p = pos
    for pass_ in (0, 1):
        max_end = min(p + eff_max, length)
        while p < max_end:
            if text[p] not in _DIGITS:
                if p < min_end:
                    return -1
                break
            p += 1
        if pp.sub > 0 and pass_ == 0:
            eff_max = max(pp.lo, (p - pos) - pp.sub)
            p = pos
        else:
            break
    total = int(text[pos:p] or "0")
    if negative and total == 0:
        return -1  # minus zero
    if not negative and pp.sign == EXCEEDS_PAD and (p - pos <= pp.lo if positive
                                                     else p - pos > pp.lo):
        return -1  # a '+' exactly when the year is wider than its letters
    if total > 2**63 - 1 if not negative else total > 2**63:  # past a long: one digit less
        p -= 1
        total //= 10
    total = -total if negative else total
    if pp.reduced and p - pos == pp.lo and total >= 0:
        total += 2000  # base 2000: yy is 2000-2099
    return p if _set(fields, pp.field, total) else -1


def _fraction(pp: Frac, text: str, pos: int, fields: dict) -> int:
    length = len(text)
    if pos == length:
        return -1
    if pos + pp.lo > length:
        return -1
    max_end = min(pos + pp.hi, length)
    p = pos
    while p < max_end and text[p] in _DIGITS:
        p += 1
    if p < pos + pp.lo:
        return -1
    nanos = int(text[pos:p].ljust(9, "0"))
    return p if _set(fields, "nano", nanos) else -1


def _two(text: str, pos: int) -> int | None:
    if pos + 2 > len(text) or text[pos] not in _DIGITS or text[pos + 1] not in _DIGITS:
        return None
    return int(text[pos:pos + 2])


def _offset(pp: Offset, text: str, pos: int, fields: dict) -> int:
    length = len(text)
    if pos == length:
        return -1
    zero = pp.zero
    if pos + len(zero) <= length and _same(text[pos:pos + len(zero)], zero):
        return pos + len(zero) if _set(fields, "offset", 0) else -1
    sign = text[pos]
    if sign not in "+-":
        return -1
    p = pos + 1
    hour = _two(text, p)
    if hour is None or hour > 59:
        return -1
    p += 2
    minute = 0
    colon = pp.minutes == "colon"
    q = p + 1 if colon else p
    if colon and text[p:p + 1] != ":":
        return -1
    mm = _two(text, q)
    if mm is not None and mm <= 59:
        minute, p = mm, q + 2
    elif pp.minutes != "optional":
        return -1
    if hour > 23:
        raise _Thrown
    secs = (hour * 3600 + minute * 60) * (-1 if sign == "-" else 1)
    return p if _set(fields, "offset", secs) else -1


def _text(pp: Text, text: str, pos: int, fields: dict) -> int:
    names = MONTHS if pp.field == "month" else ("AM", "PM")
    for value, name in enumerate(names, 1 if pp.field == "month" else 0):
        if pos + len(name) <= len(text) and _same(text[pos:pos + len(name)], name):
            return pos + len(name) if _set(fields, pp.field, value) else -1
    return -1


def _parse(items: tuple, text: str, pos: int, fields: dict) -> int:
    for pp in items:
        if isinstance(pp, Lit):
            n = len(pp.text)
            if pos + n > len(text) or not _same(text[pos:pos + n], pp.text):
                return -1
            pos += n
        elif isinstance(pp, Num):
            pos = _number(pp, text, pos, fields)
        elif isinstance(pp, Frac):
            pos = _fraction(pp, text, pos, fields)
        elif isinstance(pp, Text):
            pos = _text(pp, text, pos, fields)
        elif isinstance(pp, Offset):
            pos = _offset(pp, text, pos, fields)
        else:
            saved = dict(fields)
            end = _parse(pp.items, text, pos, fields)
            if end < 0:
                fields.clear()
                fields.update(saved)
            else:
                pos = end
        if pos < 0:
            return -1
    return pos


def _month_days(y: int, m: int) -> int:
    if m == 2:
        return 29 if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def read(items: tuple, text: str):
    """`text` read by the parser tree and resolved as Spark does (ResolverStyle.STRICT, missing
    seconds 0): (year, month, day, hour, minute, second, offset seconds or None), or None when
    Spark's try_to_timestamp gives null."""
    fields: dict = {}
    try:
        if _parse(items, text, 0, fields) != len(text):
            return None
    except _Thrown:
        return None
    y, mo, d = fields.get("u"), fields.get("M", fields.get("month")), fields.get("d")
    if y is None or mo is None or d is None or not -999_999_999 <= y <= 999_999_999:
        return None
    if not 1 <= mo <= 12 or not 1 <= d <= _month_days(y, mo):
        return None
    if "h" in fields:
        if not 1 <= fields["h"] <= 12:
            return None
        hour = fields["h"] % 12 + 12 * fields.get("ampm", 0)
    else:
        hour = fields.get("H")
    minute, second = fields.get("m"), fields.get("s", 0)
    if hour is None or minute is None or not (0 <= hour <= 23 and 0 <= minute <= 59
                                              and 0 <= second <= 59):
        return None
    offset = fields.get("offset")
    if offset is not None and abs(offset) > 18 * 3600:
        return None
    return y, mo, d, hour, minute, second, offset
