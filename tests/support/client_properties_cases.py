"""The `--client-config` tests' shared cases: a SASL file's keys and secret, and helpers that
translate them."""

from __future__ import annotations

import pytest

from logcount.core.client_properties.translation import translate
from logcount.core.errors import ConfigError

SECRET = "S3cr3t-pw!"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
JAAS = f'{PLAIN} required username="svc" password="{SECRET}";'
SASL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS}
SSL = {"security.protocol": "SSL"}


def refused(props: dict[str, str], *fragments: str, base_dir: str | None = None) -> str:
    """Translate, expect a ConfigError holding `fragments` and never the secret."""
    with pytest.raises(ConfigError) as info:
        translate(props, base_dir)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message
    assert SECRET not in message
    assert "\n" not in message
    return message


def rd(props: dict[str, str], base_dir: str | None = None) -> dict[str, str]:
    return translate(props, base_dir)[0]
