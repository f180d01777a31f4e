"""`sasl.jaas.config` as Kafka's JaasConfig reads it: quoting, escapes, comments, and the
malformed values refused without quoting the secret."""

from __future__ import annotations

import pytest

from logcount.core.client_properties.jaas import parse_jaas
from logcount.core.client_properties.properties import parse_properties
from tests.support.client_properties_cases import JAAS, PLAIN, SASL, SECRET, rd, refused


def test_jaas_quoting_escapes_and_comments():
    # The file's `\\"` is the JAAS escape `\"` once Properties has read it.
    text = ("sasl.jaas.config=" + PLAIN + " REQUIRED /* a comment */ "
            "username=svc-1.x password='S3cr3t-pw!' extra=\"a\\\\\"b; c=d\";\n")
    jaas = parse_properties(text)["sasl.jaas.config"]
    assert rd({**SASL, "sasl.jaas.config": jaas})["sasl.password"] == SECRET
    quoted = f'{PLAIN} required username="s v\\"c" password="p;w=d\\\\/x\\101";'
    out = rd({**SASL, "sasl.jaas.config": quoted})
    assert (out["sasl.username"], out["sasl.password"]) == ('s v"c', "p;w=d\\/xA")


def test_parse_jaas_gives_the_module_and_its_options():
    assert parse_jaas(JAAS) == (PLAIN, {"username": "svc", "password": SECRET})


@pytest.mark.parametrize(("jaas", "fragment"), [
    (f'{PLAIN} required username="svc" password="{SECRET}"', "must end with ';'"),
    (f'{PLAIN} username="svc" password="{SECRET}";', "must be followed by required"),
    (f"{PLAIN} required username=svc password {SECRET};", "each option must be name=value"),
    (JAAS + " " + JAAS, "exactly one login module, it names 2"),
])
def test_malformed_jaas_is_refused_without_the_secret(jaas, fragment):
    refused({**SASL, "sasl.jaas.config": jaas}, fragment)
