"""Generated --time-pattern patterns and the time texts to read with them: every letter and width
logcount/formats/spec.py takes, quoted text, optional sections (nested too), adjacent numbers, and
texts near every edge (widths, signs, cases, skipped or half-present optional sections, out-of-range
fields, zones). The property test in test_spark_rule.py holds Spark and the pure twin to the
same reading of each.

A pattern is a list of tokens; each token renders its own piece of a time text, so a text can be
built field by field, then mutated.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import strategies as st

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class Tok:
    kind: str  # a letter run ("yyyy", "M", "a", "XXX", "SSS"), "lit", "quoted" or "opt"
    text: str = ""  # a literal's text
    inner: tuple = ()  # an optional section's tokens

    def pattern(self) -> str:
        if self.kind == "lit":
            return self.text
        if self.kind == "quoted":
            return "''" if self.text == "'" else "'" + self.text.replace("'", "''") + "'"
        if self.kind == "opt":
            return "[" + "".join(t.pattern() for t in self.inner) + "]"
        return self.kind


BAD = 0.06  # the chance that a field is rendered near or past its edge


def _num(rng: random.Random, width: int, lo: int, hi: int) -> str:
    v = rng.randint(lo, hi)
    if rng.random() < BAD:
        v = rng.choice((lo, hi, hi + 1, lo - 1, 0))
    if v < 0:
        return "-" + str(-v) if rng.random() < 0.5 else "00"
    text = str(v)
    if width == 2:
        return text.zfill(2) if rng.random() > BAD else text
    return text if rng.random() > BAD else text.zfill(rng.choice((2, 3, 4)))


def _case(rng: random.Random, text: str) -> str:
    r = rng.random()
    return text.upper() if r < 0.15 else text.lower() if r < 0.3 else text


def render(tok: Tok, rng: random.Random) -> str:
    """One piece of a time text for `tok`: mostly what it reads, sometimes a near miss."""
    k = tok.kind
    if k in ("lit", "quoted"):
        if rng.random() < BAD / 2:
            return rng.choice(("", "x", " "))
        return _case(rng, tok.text) if rng.random() < 0.1 else tok.text
    if k == "opt":
        if rng.random() < 0.4:
            return ""
        pieces = [render(t, rng) for t in tok.inner]
        if len(pieces) > 1 and rng.random() < 0.1:  # half a section
            pieces = pieces[:rng.randrange(1, len(pieces))]
        return "".join(pieces)
    if k == "yyyy":
        if rng.random() > BAD:
            return f"{rng.randint(1970, 2040):04d}"
        return rng.choice((f"{rng.randint(1970, 2040):04d}", f"{rng.randint(1970, 2040):04d}",
                           "0000", "0001", "9999", "+10000", "-2017", "+2017", "12017",
                           "+99999", "-0001", "+300000", "-0000", "017"))
    if k == "yy":
        return _num(rng, 2, 0, 99)
    if k == "MMM":
        return _case(rng, rng.choice(MONTHS if rng.random() > BAD else ("Sept", "Mai", "Ja")))
    if k in ("M", "MM"):
        return _num(rng, len(k), 1, 12)
    if k in ("d", "dd"):
        return _num(rng, len(k), 1, 31)
    if k in ("H", "HH"):
        return _num(rng, len(k), 0, 23)
    if k in ("h", "hh"):
        return _num(rng, len(k), 1, 12)
    if k in ("m", "mm", "s", "ss"):
        return _num(rng, len(k), 0, 59)
    if k == "a":
        return _case(rng, rng.choice(("AM", "PM") if rng.random() > BAD else ("XM", "A")))
    if k.startswith("S"):
        n = rng.randint(1, len(k)) if rng.random() > BAD else rng.choice((0, len(k) + 1, 9))
        return "".join(str(rng.randrange(10)) for _ in range(n))
    if k[0] == "X":
        good = {"X": ("Z", "+05", "-0530", "+0800"), "XX": ("Z", "+0530", "-0800"),
                "XXX": ("Z", "+05:30", "-08:00", "+18:00")}[k]
        return rng.choice(good if rng.random() > BAD else (
            "z", "+05", "+0530", "+05:30", "+18:01", "+25:00", "+05:60", "+0560", "-00", "+5"))
    if k[0] == "Z":
        return rng.choice(("+0530", "-0800", "+0000", "-0000") if rng.random() > BAD
                          else ("+1801", "Z", "+05:30", "+2500"))
    raise AssertionError(k)


def text_for(tokens: list[Tok], rng: random.Random) -> str:
    pieces = [render(t, rng) for t in tokens]
    text = "".join(pieces)
    r = rng.random()
    if r < BAD / 2 and text:  # one character dropped
        i = rng.randrange(len(text))
        text = text[:i] + text[i + 1:]
    elif r < BAD:  # one character added
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(" 0-:x+") + text[i:]
    return text


LITERALS = ("-", "/", ":", ".", ",", " ", "  ", "_", "年")
QUOTED = ("T", "'", "at", "o'clock", "[x]", "Z")


@st.composite
def patterns(draw) -> list[Tok]:
    """A pattern's tokens: the date, hour and minute once each and outside optional sections,
    seconds, fractions and text anywhere; zones outside optional sections."""
    twelve = draw(st.booleans()) and draw(st.booleans())
    fields = [draw(st.sampled_from(["yyyy", "yyyy", "yy"])),
              draw(st.sampled_from(["MM", "MM", "M", "MMM"])),
              draw(st.sampled_from(["dd", "dd", "d"])),
              draw(st.sampled_from(["hh", "h"] if twelve else ["HH", "HH", "H"])),
              draw(st.sampled_from(["mm", "mm", "m"]))]
    if draw(st.booleans()):
        fields = draw(st.permutations(fields))
    extras = []
    seconds = draw(st.sampled_from(["ss", "ss", "s", None]))
    fraction = draw(st.sampled_from([None, None, "S", "SS", "SSS", "SSSS", "SSSSSS", "SSSSSSSSS"]))
    tail: list[Tok] = []
    if seconds:
        tail.append(Tok(seconds))
    if fraction:
        tail.append(Tok(fraction))
    if tail and draw(st.booleans()):  # [:ss[.SSS]] or [.SSS]
        inner = [Tok("lit", text=":")] + tail if len(tail) == 1 or draw(st.booleans()) else tail
        if len(inner) > 2 and draw(st.booleans()):
            inner = [inner[0], inner[1], Tok("opt", inner=(Tok("lit", text="."), *inner[2:]))]
        tail = [Tok("opt", inner=tuple(inner))]
    else:
        tail = [t for s in tail for t in (Tok("lit", text=draw(st.sampled_from([":", ".", ""]))),
                                           s)]
    extras += tail
    if twelve:
        extras += [Tok("lit", text=" "), Tok("a")]
    zone = draw(st.sampled_from([None, None, "X", "XX", "XXX", "Z", "ZZ", "ZZZ"]))
    if zone:
        extras += [Tok("lit", text=draw(st.sampled_from(["", " "]))), Tok(zone)]
    tokens: list[Tok] = []
    for f in fields:
        if tokens:
            sep = draw(st.sampled_from(["lit", "lit", "lit", "none", "quoted", "opt"]))
            if sep == "lit":
                tokens.append(Tok("lit", text=draw(st.sampled_from(LITERALS))))
            elif sep == "quoted":
                tokens.append(Tok("quoted", text=draw(st.sampled_from(QUOTED))))
            elif sep == "opt":  # MariaDB's [ ], and nested or empty sections
                inner = draw(st.sampled_from([(Tok("lit", text=" "),),
                                              (Tok("lit", text=" "), Tok("lit", text=" ")),
                                              (Tok("lit", text=" "),
                                               Tok("opt", inner=(Tok("lit", text=" "),))),
                                              (Tok("quoted", text="T"),), ()]))
                if draw(st.booleans()):
                    tokens.append(Tok("lit", text=draw(st.sampled_from(LITERALS))))
                tokens.append(Tok("opt", inner=inner))
        tokens.append(Tok(f))
    return tokens + extras


def pattern_text(tokens: list[Tok]) -> str:
    return "".join(t.pattern() for t in tokens)
