"""Values that settings hold in a form of their own: MySQL URLs, durations, librdkafka items;
parsed and masked here, each mistake a ConfigError."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from logcount.core import redact
from logcount.core.client_properties.secrets import is_secret_key
from logcount.core.errors import ConfigError
from logcount.core.redact import MASK


@dataclass(frozen=True)
class MySQLUrl:
    """`mysql://USER[:PASSWORD]@HOST:PORT/DATABASE`, parsed; the password never printed."""

    user: str
    password: str
    host: str
    port: int
    database: str

    @classmethod
    def parse(cls, url: str) -> MySQLUrl:
        p = urlparse(url)
        redact.remember(p.password and unquote(p.password), p.password)
        if p.scheme != "mysql" or not p.hostname or not p.path.strip("/") or not p.username:
            raise ConfigError(
                f"--mysql-url must look like mysql://USER[:PASSWORD]@HOST:PORT/DATABASE, "
                f"got {mask_url(url)!r}"
            )
        try:
            port = p.port or 3306
        except ValueError as exc:
            raise ConfigError(f"--mysql-url has a bad port: {mask_url(url)!r}") from exc
        database = p.path.strip("/")
        if not re.fullmatch(r"[A-Za-z0-9_$]+", database):
            raise ConfigError(f"--mysql-url database name {database!r} is not a plain identifier")
        return cls(unquote(p.username), unquote(p.password or ""), p.hostname, port, database)

    def __repr__(self) -> str:
        pw = f":{MASK}" if self.password else ""
        return f"mysql://{self.user}{pw}@{self.host}:{self.port}/{self.database}"

    def with_database(self, database: str) -> MySQLUrl:
        return dataclasses.replace(self, database=database)


def mask_url(url: str) -> str:
    """The URL with its password (if any, user or not) replaced by ***: everything from the
    user's colon to the last @, so that an unencoded / or @ in a password cannot leak a part."""
    return re.sub(r"(//[^:/@]*:).*@", rf"\g<1>{MASK}@", url)


_UNITS = {"m": 1, "h": 60, "d": 24 * 60}


def parse_duration_minutes(text: str | None, source: str) -> int | None:
    """'90m', '6h', '7d' -> minutes; None, '' or 'off' -> None (off). Whole minutes: totals are
    per minute, so a finer horizon would mean nothing."""
    if text is None or text.strip().lower() in ("", "off"):
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([mhd])\s*", text.lower())
    # At most 100 years: beyond that every minute a line can name is inside it anyway.
    if not m or not 1 <= int(m.group(1)) * _UNITS[m.group(2)] <= 100 * 366 * 24 * 60:
        raise ConfigError(f"{source} takes a whole number of minutes, hours or days such as "
                          f"90m, 6h or 7d, up to 100 years (or 'off'), got {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2)]


_SECOND_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# A minute held open a week is a running total, not a final one; the bound also keeps clock
# arithmetic on the minute index's scale far from its ends.
MAX_GRACE_SECONDS = 7 * 86400


def parse_grace_seconds(text: str | None, source: str) -> int | None:
    """'30s', '2m', '1h', '1d' -> seconds above 0, at most MAX_GRACE_SECONDS; None, '' or 'off'
    -> None (off)."""
    if text is None or text.strip().lower() in ("", "off"):
        return None
    m = re.fullmatch(r"\s*([0-9]{1,12})\s*([smhd])\s*", text.lower())
    if not m or not 1 <= int(m.group(1)) * _SECOND_UNITS[m.group(2)] <= MAX_GRACE_SECONDS:
        raise ConfigError(f"{source} takes a whole number of seconds, minutes, hours or days "
                          f"above 0 such as 30s, 2m or 1h, up to 7d (or 'off'), got {text!r}")
    return int(m.group(1)) * _SECOND_UNITS[m.group(2)]


# A latency target between a batch's own floor and a minute (beyond, pacing is
# --min-batch-interval's job).
LATENCY_TARGET_RANGE_S = (0.05, 60.0)


def parse_latency_seconds(text: str | None, source: str) -> float | None:
    """'250ms', '0.5s', '2s' -> seconds within LATENCY_TARGET_RANGE_S; None, '' or 'off' ->
    None (off)."""
    if text is None or text.strip().lower() in ("", "off"):
        return None
    m = re.fullmatch(r"\s*([0-9]{1,6}(?:\.[0-9]{1,3})?)\s*(ms|s)\s*", text.lower())
    seconds = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1) if m else -1.0
    lo, hi = LATENCY_TARGET_RANGE_S
    if not lo <= seconds <= hi:
        raise ConfigError(f"{source} takes a time in milliseconds or seconds from {lo * 1000:g}ms "
                          f"to {hi:g}s such as 250ms or 1.5s (or 'off'), got {text!r}")
    return seconds


# --rollup's windows, in minutes: UTC hours and days (pipeline/finals.py publishes them).
ROLLUP_WINDOWS = {"1h": 60, "1d": 1440}


def parse_rollups(text: str | None, source: str) -> tuple[int, ...]:
    """'1h', '1d', '1h,1d' -> window lengths in minutes, ascending; None or '' -> ()."""
    if text is None or not text.strip():
        return ()
    items = [t.strip().lower() for t in text.split(",")]
    if any(t not in ROLLUP_WINDOWS for t in items) or len(set(items)) != len(items):
        raise ConfigError(f"{source} takes 1h, 1d or 1h,1d (UTC hours and days), got {text!r}")
    return tuple(sorted(ROLLUP_WINDOWS[t] for t in items))


def parse_kafka_config(items: tuple[str, ...]) -> dict[str, str]:
    """`("security.protocol=SASL_SSL", ...)` -> dict; a bad item is a ConfigError."""
    out: dict[str, str] = {}
    for n, item in enumerate(items, 1):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            # The item itself is not echoed: it may be the tail of a password.
            raise ConfigError(f"--kafka-config item {n} of {len(items)} is not KEY=VALUE "
                              f"(in LOGCOUNT_KAFKA_CONFIG, items are separated by newlines, or "
                              f"by commas when there is no newline)")
        out[key.strip()] = value
    return out


def mask_kafka_config(items: tuple[str, ...]) -> tuple[str, ...]:
    """KEY=VALUE items with the values of secret keys (passwords, JAAS) masked."""
    return tuple(
        f"{k}={MASK}" if is_secret_key(k) else f"{k}={v}"
        for k, v in (i.partition("=")[::2] for i in items)
    )
