"""`--client-config PATH`: one Java client properties file for both of logcount's Kafka clients.

The file is the one `kafka-console-consumer --consumer.config` takes. Spark's executors (Java
client) get its properties verbatim as `kafka.`-prefixed source options; the driver's and the
sink's librdkafka clients get a translation. This package holds `ClientProperties` (a loaded
file) and `load_client_properties`; its modules hold the parts: `properties` (the file format),
`jaas` (sasl.jaas.config), `translation` (to librdkafka) and `secrets` (what to mask).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from logcount.core.client_properties.properties import parse_properties
from logcount.core.client_properties.secrets import (
    is_secret_key,
    masked,
    secret_values,
    unique,
)
from logcount.core.client_properties.translation import LOGCOUNT_OWNED, translate
from logcount.core.errors import ConfigError

__all__ = ["ClientProperties", "load_client_properties"]

log = logging.getLogger("logcount.kafka")


@dataclass(frozen=True, repr=False)
class ClientProperties:
    """A `--client-config` file: the Java properties and their librdkafka translation."""

    path: str
    java: dict[str, str]  # the file's properties, verbatim (for Spark's executors)
    rdkafka: dict[str, str]  # translated for librdkafka
    dropped: tuple[str, ...] = ()  # Java keys dropped for librdkafka, each for a stated reason

    def __repr__(self) -> str:
        return (f"ClientProperties(path={self.path!r}, java={masked(self.java)!r}, "
                f"rdkafka={masked(self.rdkafka)!r}, dropped={self.dropped!r})")

    __str__ = __repr__

    @property
    def bootstrap_servers(self) -> str | None:
        """The file's bootstrap.servers (comma-separated, blanks removed), if it has one."""
        return self.rdkafka.get("bootstrap.servers")

    @property
    def spark_kafka_options(self) -> dict[str, str]:
        """The Java properties for Spark's Kafka source, without the `kafka.` prefix and without
        the keys logcount sets itself (Spark refuses some of them, e.g. auto.offset.reset)."""
        return {k: v for k, v in self.java.items() if k not in LOGCOUNT_OWNED}

    @property
    def secrets(self) -> list[str]:
        """Every secret value, for `mask_secrets` on client error strings."""
        return unique(secret_values(self.java)
                      + [v for k, v in self.rdkafka.items() if is_secret_key(k)])


def load_client_properties(path: str) -> ClientProperties:
    """Read + parse + translate. Missing/unreadable file -> ConfigError naming the path (one line).
    Never put a secret value into an error message."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the --client-config file: "
                          f"{exc.strerror or type(exc).__name__}") from None
    try:
        text = data.decode("utf-8-sig")  # what editors write; a BOM would glue onto a key
    except UnicodeDecodeError:
        # Not UTF-8: read it as Java's Properties.load(InputStream) (kafka-console-consumer)
        # does, ISO-8859-1, which never fails.
        text = data.decode("latin-1")
    base_dir = os.path.dirname(os.path.abspath(path))
    try:
        java = parse_properties(text)
        rdkafka, dropped = translate(java, base_dir)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    _check_files(path, rdkafka)
    safe = [k for k in dropped if k not in LOGCOUNT_OWNED]
    owned = [k for k in dropped if k in LOGCOUNT_OWNED]
    if safe:
        log.debug("%s: not passed to librdkafka (no effect there): %s", path, ", ".join(safe))
    if owned:
        log.info("%s: ignored, logcount sets these itself: %s", path, ", ".join(owned))
    return ClientProperties(path, java, rdkafka, dropped)


# librdkafka path key -> the Java key it came from, for the error line.
_FILE_KEYS = {
    "ssl.ca.location": "ssl.truststore.location",
    "ssl.certificate.location": "ssl.keystore.location",
    "ssl.keystore.location": "ssl.keystore.location",
}


def _check_files(path: str, rdkafka: Mapping[str, str]) -> None:
    """A missing CA or keystore file, named now rather than by librdkafka at client creation."""
    for rd_key, java_key in _FILE_KEYS.items():
        target = rdkafka.get(rd_key)
        if target is not None and not os.access(target, os.R_OK):
            raise ConfigError(f"{path}: {java_key} {target} cannot be read (a relative path is "
                              f"taken from the directory of {path})")
