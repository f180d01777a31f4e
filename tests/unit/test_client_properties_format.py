"""`--client-config`'s file format: java.util.Properties as Properties.load reads it."""

from __future__ import annotations

import pytest

from logcount.core.client_properties.properties import parse_properties
from logcount.core.errors import ConfigError
from tests.support.client_properties_cases import JAAS


def test_separators_comments_and_blank_lines():
    text = (
        "# a comment\n"
        "   ! another, indented\n"
        "\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "d   =   4\n"
        "\t e\t:\tfive  \n"  # trailing blanks of a value are kept, as Java keeps them
        "f:=6\n"  # one separator only: the '=' belongs to the value
        "g\n"
        "h=\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "4", "e": "five  ", "f": "=6", "g": "", "h": "",
    }


def test_escapes():
    text = (
        "my\\ key\\=x\\:y = tab\\there\\nnew\\\\line\\=\\:\\#\n"
        "u=\\u0041\\u00e9\\ud83d\\ude00\n"
        "other=\\q\\b\n"  # an unknown escape is the character itself
    )
    assert parse_properties(text) == {
        "my key=x:y": "tab\there\nnew\\line=:#",
        "u": "Aé\U0001F600",
        "other": "qb",
    }


def test_malformed_unicode_escape_names_the_line():
    with pytest.raises(ConfigError, match="line 2: malformed"):
        parse_properties("a=1\nb=\\u12g4\n")


def test_continuations_join_lines_and_trim_their_indent():
    text = (
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        "    username=\"svc\" \\\n"
        "\t  password=\"S3cr3t-pw!\";\n"
        "next=1\n"
    )
    props = parse_properties(text)
    assert props["sasl.jaas.config"] == JAAS
    assert props["next"] == "1"


def test_continuation_edge_cases():
    text = (
        "even=C:\\\\\\\\\n"  # two escaped backslashes: no continuation
        "odd=a\\\\\\\n"  # an escaped backslash, then a continuation
        "  # not a comment on a continuation line\n"
        "# a comment line ending in a backslash is not continued \\\n"
        "ended=x\\\n"
        "\n"  # an empty continuation line ends the logical line
        "after=y\n"
        "last=z\\"  # a backslash ending the file is dropped
    )
    assert parse_properties(text) == {
        "even": "C:\\\\",
        "odd": "a\\# not a comment on a continuation line",
        "ended": "x",
        "after": "y",
        "last": "z",
    }


def test_line_endings_and_duplicates():
    assert parse_properties("a=1\r\nb=2\rc=3\na=4") == {"a": "4", "b": "2", "c": "3"}
