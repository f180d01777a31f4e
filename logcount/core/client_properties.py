"""`--client-config PATH`: one Java client properties file for both of logcount's Kafka clients.

The file is the one `kafka-console-consumer --consumer.config` takes. Spark's executors (Java
client) get its properties verbatim as `kafka.`-prefixed source options; the driver's and the
sink's librdkafka clients get a translation. Every key is translated, dropped for a stated
reason, or refused with one line: nothing is dropped silently, and nothing reaches librdkafka
that it would read differently from the Java client. Pure functions apart from reading the file.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from logcount.core.errors import ConfigError
from logcount.core.redact import MASK, SECRET_KEY  # the same secret keys as --kafka-config masks

__all__ = [
    "DROP_SAFE",
    "LOGCOUNT_OWNED",
    "RDKAFKA_CONSUMER_ONLY",
    "ClientProperties",
    "is_secret_key",
    "load_client_properties",
    "mask_secrets",
    "parse_properties",
    "secret_values",
    "translate",
]

log = logging.getLogger("logcount.kafka")

# Java keys with no effect on librdkafka, or none in the setups logcount accepts: dropped for the
# librdkafka clients (named in a DEBUG line), still passed to Spark's executors.
DROP_SAFE: frozenset[str] = frozenset({
    # TLS version and JSSE plumbing: librdkafka negotiates the highest TLS version OpenSSL and the
    # broker share (1.2 or 1.3), and has no JSSE key/trust managers, providers or SecureRandom.
    "ssl.protocol", "ssl.enabled.protocols", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.secure.random.implementation", "ssl.provider",
    # Token refresh and OAuth HTTP login tuning: only OAUTHBEARER and GSSAPI use them, and both
    # are refused below, so with PLAIN or SCRAM they do nothing in the Java client either.
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.ms", "sasl.login.retry.backoff.max.ms",
    # Kerberos settings: GSSAPI only (refused), inert with PLAIN or SCRAM.
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin",
    # librdkafka takes a timeout per call (logcount passes its own), not a client-wide default.
    "default.api.timeout.ms",
    # librdkafka's default (use_all_dns_ips) is the Java client's; the other value is for
    # Kerberos only, which is refused.
    "client.dns.lookup",
    # librdkafka has one fixed setup timeout (socket.connection.setup.timeout.ms, translated),
    # no exponential growth towards a maximum.
    "socket.connection.setup.timeout.max.ms",
    # Inert: logcount never auto-commits (enable.auto.commit is LOGCOUNT_OWNED).
    "auto.commit.interval.ms",
})

# Keys logcount sets itself: a file value would break its guarantees (read_committed, offsets
# committed in the transaction, its own --group-id), and Spark's Kafka source refuses
# auto.offset.reset, enable.auto.commit and the (de)serializers outright. Dropped for both
# clients (an INFO line names them, since the user asked for something logcount overrides).
LOGCOUNT_OWNED: frozenset[str] = frozenset({
    "group.id", "isolation.level", "enable.auto.commit", "auto.offset.reset",
    "key.deserializer", "value.deserializer", "key.serializer", "value.serializer",
})

# Translated librdkafka keys that a producer or admin client ignores with a CONFWARN line on
# stderr: whoever builds those clients may leave them out.
RDKAFKA_CONSUMER_ONLY: frozenset[str] = frozenset({"session.timeout.ms"})

# Java key -> (librdkafka key, librdkafka's minimum, maximum). Checked here because an
# out-of-range value would otherwise fail client creation later, far from the file.
_DURATIONS: dict[str, tuple[str, int, int]] = {
    # Java's request.timeout.ms bounds the wait for any request's response; librdkafka's
    # request.timeout.ms is the producer's acks timeout only, and socket.timeout.ms is the
    # general one.
    "request.timeout.ms": ("socket.timeout.ms", 10, 300_000),
    "session.timeout.ms": ("session.timeout.ms", 1, 3_600_000),
    "socket.connection.setup.timeout.ms": ("socket.connection.setup.timeout.ms", 1000, 2**31 - 1),
    "connections.max.idle.ms": ("connections.max.idle.ms", 0, 2**31 - 1),
    "reconnect.backoff.ms": ("reconnect.backoff.ms", 0, 3_600_000),
    "reconnect.backoff.max.ms": ("reconnect.backoff.max.ms", 0, 3_600_000),
    "retry.backoff.ms": ("retry.backoff.ms", 1, 300_000),
    "retry.backoff.max.ms": ("retry.backoff.max.ms", 1, 300_000),
    # Java's metadata.max.age.ms is the period of the forced metadata refresh, which librdkafka
    # calls topic.metadata.refresh.interval.ms; librdkafka's own metadata.max.age.ms is a cache
    # age that defaults to three times that interval, so it follows.
    "metadata.max.age.ms": ("topic.metadata.refresh.interval.ms", 0, 3_600_000),
}

# Keys consumed by the dedicated translators below.
_HANDLED = frozenset({
    "bootstrap.servers", "client.id", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "ssl.endpoint.identification.algorithm",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
    "ssl.truststore.password",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.key.password",
})

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_MECHANISMS = {"PLAIN": _PLAIN_MODULE, "SCRAM-SHA-256": _SCRAM_MODULE,
               "SCRAM-SHA-512": _SCRAM_MODULE}
_SUPPORTED = "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

# Java types these PASSWORD (masked in its logs) although the key names do not say so; the
# private key is a real secret, and the librdkafka keys they become are masked alike.
_PEM_KEYS = frozenset({
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
    "ssl.key.pem", "ssl.certificate.pem", "ssl.ca.pem",
})


def is_secret_key(key: str) -> bool:
    """Whether a Java or librdkafka key holds a secret (masked in repr and logs)."""
    return bool(SECRET_KEY.search(key)) or key in _PEM_KEYS


def _masked(props: Mapping[str, str]) -> dict[str, str]:
    return {k: MASK if is_secret_key(k) else v for k, v in props.items()}


@dataclass(frozen=True, repr=False)
class ClientProperties:
    """A `--client-config` file: the Java properties and their librdkafka translation."""

    path: str
    java: dict[str, str]  # the file's properties, verbatim (for Spark's executors)
    rdkafka: dict[str, str]  # translated for librdkafka
    dropped: tuple[str, ...] = ()  # Java keys dropped for librdkafka, each for a stated reason

    def __repr__(self) -> str:
        return (f"ClientProperties(path={self.path!r}, java={_masked(self.java)!r}, "
                f"rdkafka={_masked(self.rdkafka)!r}, dropped={self.dropped!r})")

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
        return _unique(secret_values(self.java)
                       + [v for k, v in self.rdkafka.items() if is_secret_key(k)])


# --- java.util.Properties ----------------------------------------------------------------------

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


# --- loading -----------------------------------------------------------------------------------


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


# --- translation -------------------------------------------------------------------------------


def translate(java: Mapping[str, str], base_dir: str | None = None,
              ) -> tuple[dict[str, str], tuple[str, ...]]:
    """Java client keys -> librdkafka keys, and the dropped-as-safe keys. ConfigError for a key it
    cannot honour."""
    # Java's ConfigDef trims every value before use; so do we (the java dict stays verbatim).
    props = {k: v.strip() for k, v in java.items()}
    unknown = sorted(k for k in props
                     if k not in _HANDLED and k not in _DURATIONS
                     and k not in DROP_SAFE and k not in LOGCOUNT_OWNED)
    if len(unknown) == 1:
        raise ConfigError(f"key {unknown[0]} has no librdkafka equivalent logcount knows; "
                          f"remove it or pass a librdkafka setting with --kafka-config")
    if unknown:
        raise ConfigError(f"keys {', '.join(unknown)} have no librdkafka equivalent logcount "
                          f"knows; remove them or pass librdkafka settings with --kafka-config")
    dropped = [k for k in props if k in DROP_SAFE or k in LOGCOUNT_OWNED]

    out: dict[str, str] = {}
    protocol = props.get("security.protocol", "PLAINTEXT").upper()  # Java upper-cases it too
    if protocol not in _PROTOCOLS:
        raise ConfigError(f"security.protocol {props['security.protocol']!r} is not one of "
                          f"{', '.join(_PROTOCOLS)}")
    if "security.protocol" in props:
        out["security.protocol"] = protocol
    if "bootstrap.servers" in props:
        servers = [s.strip() for s in props["bootstrap.servers"].split(",") if s.strip()]
        if not servers:
            raise ConfigError("bootstrap.servers is empty")
        out["bootstrap.servers"] = ",".join(servers)
    if "client.id" in props:
        out["client.id"] = props["client.id"]
    for key, (rd_key, low, high) in _DURATIONS.items():
        if key in props:
            out[rd_key] = _milliseconds(key, props[key], rd_key, low, high)
    out.update(_sasl(props, protocol))
    out.update(_ssl(props, protocol, base_dir, dropped))
    return out, tuple(sorted(dropped))


def _milliseconds(key: str, value: str, rd_key: str, low: int, high: int) -> str:
    # Java's Integer/Long parsing: an optional sign and digits (Python's int() would also take
    # "1_000" and non-ASCII digits).
    if not re.fullmatch(r"[+-]?[0-9]+", value):
        raise ConfigError(f"{key} must be a whole number of milliseconds, got {value!r}")
    n = int(value)
    if not low <= n <= high:
        target = "" if rd_key == key else f" (librdkafka's {rd_key})"
        raise ConfigError(f"{key}={n}{target} is outside librdkafka's range {low}..{high}")
    return str(n)


def _sasl(props: Mapping[str, str], protocol: str) -> dict[str, str]:
    keys = sorted(k for k in props if k.startswith("sasl."))
    if not protocol.startswith("SASL_"):
        if keys:
            # Without SASL the client never authenticates: the broker would drop the connection
            # (or time it out) with no word about the credentials the file does hold.
            raise ConfigError(f"{keys[0]} is set but security.protocol is {protocol}; set "
                              f"security.protocol=SASL_SSL (or SASL_PLAINTEXT) or remove the "
                              f"sasl.* keys")
        return {}
    if "sasl.mechanism" not in props:
        raise ConfigError(f"security.protocol {protocol} without sasl.mechanism means GSSAPI "
                          f"(Kerberos) to the Java client, which --client-config does not "
                          f"support; set sasl.mechanism to {_SUPPORTED}")
    mechanism = props["sasl.mechanism"]
    if mechanism in ("GSSAPI", "OAUTHBEARER"):
        raise ConfigError(f"sasl.mechanism {mechanism} is not supported by --client-config; "
                          f"the mechanisms that work are {_SUPPORTED}")
    if mechanism not in _MECHANISMS:
        # Case matters: the Java client and librdkafka both refuse "plain".
        raise ConfigError(f"sasl.mechanism {mechanism!r} is not supported; the mechanisms that "
                          f"work are {_SUPPORTED} (upper case)")
    if not props.get("sasl.jaas.config"):
        raise ConfigError(f"sasl.mechanism {mechanism} needs sasl.jaas.config with the username "
                          f"and password ({_MECHANISMS[mechanism].rsplit('.', 1)[1]} required "
                          f"username=\"...\" password=\"...\";)")
    module, options = _parse_jaas(props["sasl.jaas.config"])
    expected = _MECHANISMS[mechanism]
    if not _is_module(module, expected):
        if _is_module(module, _PLAIN_MODULE) or _is_module(module, _SCRAM_MODULE):
            raise ConfigError(f"sasl.jaas.config uses {module.rsplit('.', 1)[1]} but "
                              f"sasl.mechanism is {mechanism}, which needs "
                              f"{expected.rsplit('.', 1)[1]}")
        shown = module if re.fullmatch(r"[\w$]+(\.[\w$]+)+", module) else "(unnamed)"
        raise ConfigError(f"sasl.jaas.config login module {shown} is not supported; "
                          f"--client-config takes a username and password from PlainLoginModule "
                          f"(PLAIN) or ScramLoginModule (SCRAM-SHA-256, SCRAM-SHA-512)")
    if options.get("tokenauth", "").lower() == "true":
        raise ConfigError("sasl.jaas.config sets tokenauth=true (a delegation token), which "
                          "librdkafka cannot send; use a SCRAM user's credentials")
    for name in ("username", "password"):
        if not options.get(name):
            raise ConfigError(f"sasl.jaas.config has no {name} option")
    # Other options are ignored by PlainLoginModule and ScramLoginModule themselves.
    return {"sasl.mechanism": mechanism, "sasl.username": options["username"],
            "sasl.password": options["password"]}


def _is_module(module: str, expected: str) -> bool:
    # A suffix match admits relocated (shaded) Kafka clients, e.g. kafkashaded.org.apache...
    return module == expected or module.endswith("." + expected)


def _ssl(props: Mapping[str, str], protocol: str, base_dir: str | None,
         dropped: list[str]) -> dict[str, str]:
    keys = sorted(k for k in props if k.startswith("ssl."))
    if protocol not in ("SSL", "SASL_SSL"):
        if keys:
            # TLS settings under a plaintext protocol mean the file's author expected TLS: the
            # clients would connect in plaintext to a TLS listener and fail obscurely.
            raise ConfigError(f"{keys[0]} is set but security.protocol is {protocol}; set "
                              f"security.protocol=SSL (or SASL_SSL) or remove the ssl.* keys")
        return {}
    out: dict[str, str] = {}
    algorithm = props.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        if algorithm == "":
            out["ssl.endpoint.identification.algorithm"] = "none"  # Java's "off"
        elif algorithm.lower() == "https":
            out["ssl.endpoint.identification.algorithm"] = "https"
        else:
            raise ConfigError(f"ssl.endpoint.identification.algorithm {algorithm!r} is not "
                              f"supported; use https, or an empty value to turn it off")
    out.update(_truststore(props, base_dir))
    out.update(_keystore(props, base_dir, dropped))
    return out


def _truststore(props: Mapping[str, str], base_dir: str | None) -> dict[str, str]:
    location = props.get("ssl.truststore.location")
    certificates = props.get("ssl.truststore.certificates")
    if location is None and certificates is None:
        if "ssl.truststore.password" in props:
            raise ConfigError("ssl.truststore.password is set without ssl.truststore.location; "
                              "remove it")
        return {}  # both clients trust the system's CA certificates
    store_type = props.get("ssl.truststore.type")
    if store_type != "PEM":
        raise ConfigError(_store_type_error("truststore", store_type, location))
    if location is not None and certificates is not None:
        raise ConfigError("set ssl.truststore.location or ssl.truststore.certificates, not both")
    if "ssl.truststore.password" in props:
        # The Java client refuses it for PEM ("cannot be specified for PEM format") and would
        # fail on the executors: say so now.
        raise ConfigError("ssl.truststore.password must not be set with "
                          "ssl.truststore.type=PEM (the Java client refuses it too); remove it")
    if certificates is not None:
        return {"ssl.ca.pem": _pem(certificates, "ssl.truststore.certificates")}
    return {"ssl.ca.location": _path(location, "ssl.truststore.location", base_dir)}


def _keystore(props: Mapping[str, str], base_dir: str | None,
              dropped: list[str]) -> dict[str, str]:
    location = props.get("ssl.keystore.location")
    key = props.get("ssl.keystore.key")
    chain = props.get("ssl.keystore.certificate.chain")
    store_password = props.get("ssl.keystore.password")
    key_password = props.get("ssl.key.password")
    store_type = props.get("ssl.keystore.type")
    with_key = {"ssl.key.password": key_password} if key_password is not None else {}
    if key is not None or chain is not None:
        if key is None or chain is None:
            raise ConfigError("ssl.keystore.key and ssl.keystore.certificate.chain go together")
        if store_type != "PEM":
            raise ConfigError("ssl.keystore.key and ssl.keystore.certificate.chain need "
                              "ssl.keystore.type=PEM")
        if location is not None:
            raise ConfigError("set ssl.keystore.location or ssl.keystore.key, not both")
        if store_password is not None:
            raise ConfigError(_PEM_STORE_PASSWORD)
        return {"ssl.key.pem": _pem(key, "ssl.keystore.key"),
                "ssl.certificate.pem": _pem(chain, "ssl.keystore.certificate.chain"), **with_key}
    if location is None:
        if store_password is not None:
            raise ConfigError("ssl.keystore.password is set without ssl.keystore.location; "
                              "remove it")
        if key_password is not None:
            dropped.append("ssl.key.password")  # no key to decrypt: inert in Java too
        return {}
    path = _path(location, "ssl.keystore.location", base_dir)
    if store_type == "PEM":
        if store_password is not None:
            raise ConfigError(_PEM_STORE_PASSWORD)
        # Java's PEM keystore is one file holding the private key and the certificate chain;
        # OpenSSL skips PEM blocks of the wrong kind, so the same file serves librdkafka as both
        # its certificate chain and its key.
        return {"ssl.certificate.location": path, "ssl.key.location": path, **with_key}
    if store_type == "PKCS12":
        if not store_password:
            raise ConfigError("ssl.keystore.type=PKCS12 needs ssl.keystore.password")
        if key_password is not None:
            # librdkafka opens the whole PKCS#12 file with the store password; Java would use a
            # different key password for the key, which librdkafka cannot.
            if key_password != store_password:
                raise ConfigError("ssl.key.password differs from ssl.keystore.password; "
                                  "librdkafka opens a PKCS12 keystore with one password, so "
                                  "re-export it with one password (or convert it to PEM)")
            dropped.append("ssl.key.password")
        return {"ssl.keystore.location": path, "ssl.keystore.password": store_password}
    raise ConfigError(_store_type_error("keystore", store_type, location))


_PEM_STORE_PASSWORD = ("ssl.keystore.password must not be set with ssl.keystore.type=PEM (the "
                       "Java client refuses it too); a PEM key's passphrase is ssl.key.password")


def _store_type_error(kind: str, store_type: str | None, location: str | None) -> str:
    """The refusal of a JKS/PKCS12/other store, with the command that converts it."""
    ts = kind == "truststore"
    shown = (store_type or "JKS").upper()
    if shown == "PEM":  # "pem": the Java client compares the type exactly
        return f"ssl.{kind}.type must be PEM in upper case, got {store_type!r}"
    src = shlex.quote(location) if location else ("ts." if ts else "ks.") + (
        "jks" if shown == "JKS" else "p12")
    p12 = "ts.p12" if ts else "ks.p12"
    if location and os.path.basename(location) == p12:  # never convert a file onto itself
        p12 = "converted-" + p12
    if ts and shown == "PKCS12":
        how = f"convert it to PEM (openssl pkcs12 -in {src} -nokeys -out ca.pem)"
    elif ts and shown == "JKS":
        how = (f"convert it to PEM (keytool -importkeystore -srckeystore {src} -destkeystore "
               f"{p12} -deststoretype PKCS12, then openssl pkcs12 -in {p12} -nokeys "
               f"-out ca.pem)")
    elif shown == "JKS":
        how = (f"convert it to PKCS12 (keytool -importkeystore -srckeystore {src} "
               f"-destkeystore {p12} -deststoretype PKCS12)")
    else:
        how = "convert it to PEM" if ts else "convert it to PKCS12 or PEM"
    target = "ssl.truststore.type=PEM" if ts else "ssl.keystore.type=PKCS12"
    if store_type is None:
        # Kafka's default type is JKS, but a JDK reads a PKCS12 file under that name too: the
        # file may already be fine, and only the type missing.
        formats = "PEM, set ssl.truststore.type=PEM" if ts else (
            "PKCS12 or PEM, set ssl.keystore.type to that")
        return (f"ssl.{kind}.type is not set, so the Java client reads the {kind} as JKS, "
                f"which the driver's librdkafka clients cannot read; if it already is "
                f"{formats}, otherwise {how} and set {target}")
    return (f"ssl.{kind}.type {store_type} is not supported for the driver's librdkafka "
            f"clients; {how} and set {target}")


def _path(location: str, key: str, base_dir: str | None) -> str:
    if not location:
        raise ConfigError(f"{key} is empty")
    # Relative to the properties file, not to wherever logcount was started from.
    return location if base_dir is None else os.path.join(base_dir, location)


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def _pem(value: str, key: str) -> str:
    """Re-wrap PEM blocks into the line layout OpenSSL requires.

    A properties file can only hold a multi-line PEM with `\\n` escapes or as one long line (a
    backslash continuation joins the lines); the Java client reads both, librdkafka only the
    line-wrapped form."""
    blocks = []
    for m in _PEM_BLOCK.finditer(value):
        label, body = m.group(1), m.group(2)
        if ":" in body:  # RFC 1421 headers (Proc-Type...): their line breaks matter, keep as is
            blocks.append(m.group(0))
            continue
        b64 = "".join(body.split())
        lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
        blocks.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    if not blocks:
        raise ConfigError(f"{key} holds no PEM block (-----BEGIN ...-----)")
    return "\n".join(blocks) + "\n"


# --- JAAS --------------------------------------------------------------------------------------

_JAAS_SPECIAL = ";=/\"'"
_EOL = re.compile(r"[\r\n]")


def _parse_jaas(text: str) -> tuple[str, dict[str, str]]:
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


# --- secrets -----------------------------------------------------------------------------------


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """Replace each secret value (len >= 4) appearing in text by ***: for error strings from
    librdkafka or Spark that might echo a password."""
    # Shorter values would mask ordinary words ("abc") and say little; longest first, so that a
    # value holding another (the JAAS config holds the password) goes whole.
    for secret in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def secret_values(java: Mapping[str, str]) -> list[str]:
    """Every secret in the properties: values of secret keys AND the password inside a JAAS
    config."""
    found: list[str] = []
    for key, value in java.items():
        if not is_secret_key(key):
            continue
        found += [value, value.strip()]
        if key == "sasl.jaas.config":
            try:
                _, options = _parse_jaas(value.strip())
            except ConfigError:
                continue  # unparsable: the whole value above is all we can mask
            found += [v for name, v in options.items() if SECRET_KEY.search(name)]
    return _unique(v for v in found if v)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
