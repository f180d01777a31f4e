"""Every secret logcount was given, so that no line it prints shows one.

Settings remember their secrets (MySQL password, SASL password, JAAS config...) when they are
validated; the CLI masks them in its error line and in every log record, including the text of
librdkafka's and Spark's errors that we pass on.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import quote

MASK = "***"
# Client settings whose values are secrets (sasl.password, ssl.key.password, sasl.jaas.config...).
SECRET_KEY = re.compile(r"password|secret|jaas|token|credentials", re.IGNORECASE)
# Shorter values would mask ordinary words ("a", "no"); a secret that short is no secret anyway.
MIN_LEN = 3
_secrets: set[str] = set()


def remember(*values: str | None) -> None:
    """Keep these values (and their URL-encoded forms) out of everything printed from now on."""
    for v in values:
        if v and len(v) >= MIN_LEN:
            _secrets.update({v, quote(v, safe="")})


def mask(text: str) -> str:
    for s in sorted(_secrets, key=len, reverse=True):  # longest first: no partial leftovers
        text = text.replace(s, MASK)
    return text


class MaskSecrets(logging.Filter):
    """A handler filter: the formatted message with every remembered secret masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _secrets:
            record.msg, record.args = mask(record.getMessage()), None
            if record.exc_info and record.exc_text is None:
                record.exc_text = mask(logging.Formatter().formatException(record.exc_info))
        return True
