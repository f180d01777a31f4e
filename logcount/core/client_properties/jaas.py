"""The `sasl.jaas.config` value: `parse_jaas` reads it as Kafka's JaasConfig does (its own
StreamTokenizer rules), into the login module and its options."""

from __future__ import annotations

import re

from logcount.core.errors import ConfigError

_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_SPECIAL = ";=/\"'"
_EOL = re.compile(r"[\r\n]")


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """`Module flag name="value" ...;` -> (module, options), as Kafka's JaasConfig reads it.

    Errors never quote the text: it holds the password, and a malformed token may be part of it.
    """
    tokens = _jaas_tokens(text)
    entries: list[tuple[str, dict[str, str]]] = []
    i = 0
    while i < len(tokens):
        if tokens[i][0] not in ("word", "quoted"):
            raise ConfigError("sasl.jaas.config is malformed: it must start with a login module")
        module = tokens[i][1]
        if i + 1 >= len(tokens) or tokens[i + 1][1].lower() not in _CONTROL_FLAGS:
            raise ConfigError("sasl.jaas.config is malformed: the login module must be followed "
                              "by required, requisite, sufficient or optional")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i][0] != ";":
            if (i + 2 >= len(tokens) or tokens[i][0] not in ("word", "quoted")
                    or tokens[i + 1][0] != "=" or tokens[i + 2][0] not in ("word", "quoted")):
                raise ConfigError("sasl.jaas.config is malformed: each option must be "
                                  "name=value (quote values holding blanks, ';', '=' or '/')")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise ConfigError("sasl.jaas.config is malformed: it must end with ';'")
        i += 1
        entries.append((module, options))
    if len(entries) != 1:
        raise ConfigError(f"sasl.jaas.config must name exactly one login module, it names "
                          f"{len(entries)}")
    return entries[0]


def _jaas_tokens(text: str) -> list[tuple[str, str]]:
    """Tokens as Kafka's JaasConfig StreamTokenizer makes them: (kind, text), kind one of word,
    quoted, ';' and '='. Characters up to a blank are whitespace; '/' starts a comment."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c <= " ":
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # '//' and, as commentChar('/'), a lone '/' comment out the rest of the line
                m = _EOL.search(text, i)
                i = n if m is None else m.start()
        elif c in ";=":
            tokens.append((c, c))
            i += 1
        elif c in "\"'":
            value, i = _jaas_quoted(text, i + 1, c)
            tokens.append(("quoted", value))
        else:
            start = i
            while i < n and text[i] > " " and text[i] not in _JAAS_SPECIAL:
                i += 1
            tokens.append(("word", text[start:i]))
    return tokens


_JAAS_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _jaas_quoted(text: str, i: int, quote: str) -> tuple[str, int]:
    """A quoted JAAS value from just after its opening quote: StreamTokenizer's escapes (\\" \\\\
    \\n ... and octal); it ends at the closing quote or, unclosed, at the end of the line."""
    out: list[str] = []
    n = len(text)
    while i < n and text[i] not in (quote, "\n", "\r"):
        c = text[i]
        i += 1
        if c == "\\" and i < n:
            c = text[i]
            i += 1
            if "0" <= c <= "7":
                digits = c
                limit = 3 if c <= "3" else 2  # at most three digits, a byte's worth
                while len(digits) < limit and i < n and "0" <= text[i] <= "7":
                    digits += text[i]
                    i += 1
                c = chr(int(digits, 8))
            else:
                c = _JAAS_ESCAPES.get(c, c)
        out.append(c)
    if i < n and text[i] == quote:
        i += 1
    return "".join(out), i
