"""The java.util.Properties text format: `parse_properties`, as Properties.load reads a file."""

from __future__ import annotations

import re
from collections.abc import Iterable

from logcount.core.errors import ConfigError

_BLANK = " \t\f"  # Properties' whitespace; other control characters are ordinary
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties format: `key=value`, `key: value`, `key value`; # and ! comments;
    blank lines; backslash line continuations; escapes \\t \\n \\\\ \\= \\: and \\uXXXX; leading
    whitespace of values trimmed. (Real-world JAAS configs span lines with backslashes.)"""
    out: dict[str, str] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        out[_unescape(raw_key, number)] = _unescape(raw_value, number)  # the last one wins
    return out


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """(first line number, logical line) as Properties.load joins them, leading blanks gone."""
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i].lstrip(_BLANK)
        i += 1
        # A comment line is never continued, even if it ends in a backslash.
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i == len(lines):  # a backslash ending the file is dropped, as Java does
                break
            # A continuation line is never a comment; an empty one ends the logical line.
            line += lines[i].lstrip(_BLANK)
            i += 1
        yield number, line


def _continues(line: str) -> bool:
    """An odd run of trailing backslashes: the last one escapes the line end."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """Split at the first unescaped `=`, `:` or blank; then skip blanks and one `=` or `:`."""
    backslash, has_sep = False, False
    key_end = value_start = len(line)
    for i, c in enumerate(line):
        if not backslash and c in "=:":
            key_end, value_start, has_sep = i, i + 1, True
            break
        if not backslash and c in _BLANK:
            key_end, value_start = i, i + 1
            break
        backslash = c == "\\" and not backslash
    while value_start < len(line):
        c = line[value_start]
        if c not in _BLANK:
            if has_sep or c not in "=:":
                break
            has_sep = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(raw: str, number: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        i += 1
        if c != "\\" or i == len(raw):
            out.append(c)
            continue
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i:i + 4]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise ConfigError(f"line {number}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))  # any other escaped character stands for itself
    text = "".join(out)
    # \uXXXX escapes are UTF-16 code units: join surrogate pairs into one character.
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text
