"""Which client keys hold secrets, and the secret values of a properties file (the password
inside a JAAS config too), to keep them out of reprs, logs and client error strings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from logcount.core.client_properties.jaas import parse_jaas
from logcount.core.errors import ConfigError
from logcount.core.redact import MASK, SECRET_KEY  # the same secret keys as --kafka-config masks

# Java types these PASSWORD (masked in its logs) although the key names do not say so; the
# private key is a real secret, and the librdkafka keys they become are masked alike.
_PEM_KEYS = frozenset({
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
    "ssl.key.pem", "ssl.certificate.pem", "ssl.ca.pem",
})


def is_secret_key(key: str) -> bool:
    """Whether a Java or librdkafka key holds a secret (masked in repr and logs)."""
    return bool(SECRET_KEY.search(key)) or key in _PEM_KEYS


def masked(props: Mapping[str, str]) -> dict[str, str]:
    """The properties with every secret value shown as ***."""
    return {k: MASK if is_secret_key(k) else v for k, v in props.items()}


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
                _, options = parse_jaas(value.strip())
            except ConfigError:
                continue  # unparsable: the whole value above is all we can mask
            found += [v for name, v in options.items() if SECRET_KEY.search(name)]
    return unique(v for v in found if v)


def unique(values: Iterable[str]) -> list[str]:
    """The values in their first order, each once."""
    return list(dict.fromkeys(values))
