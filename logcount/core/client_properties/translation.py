"""Java client properties -> librdkafka settings: `translate`, and the keys it drops.

Every key is translated, dropped for a stated reason, or refused with one line: nothing is
dropped silently, and nothing reaches librdkafka that it would read differently from the Java
client.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping

from logcount.core.client_properties.jaas import parse_jaas
from logcount.core.errors import ConfigError

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

# Keys logcount sets itself, dropped from the file for both clients with an INFO line naming them:
# a file value would break its guarantees (read_committed, offsets in the transaction, --group-id),
# and Spark's Kafka source refuses auto.offset.reset, enable.auto.commit and the (de)serializers.
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
    module, options = parse_jaas(props["sasl.jaas.config"])
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
    assert location is not None  # one of the two, checked above
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
