"""`--client-config`'s secrets: the values to mask (the JAAS password too), masked in error
strings and in a loaded file's repr."""

from __future__ import annotations

from logcount.core.client_properties import ClientProperties
from logcount.core.client_properties.secrets import mask_secrets, secret_values
from logcount.core.client_properties.translation import translate
from tests.support.client_properties_cases import JAAS, SASL, SECRET


def test_secret_values_include_the_jaas_password():
    props = {**SASL, "ssl.keystore.password": "store-pw", "ssl.key.password": "key-pw",
             "client.id": "not-secret"}
    found = secret_values(props)
    assert SECRET in found and JAAS in found
    assert {"store-pw", "key-pw"} <= set(found)
    assert "not-secret" not in found
    assert secret_values({"sasl.jaas.config": "garbage"}) == ["garbage"]


def test_mask_secrets_on_a_librdkafka_error():
    error = ("KafkaError{code=_AUTHENTICATION,val=-169,str=\"sasl_ssl://b1:9093/bootstrap: "
             f"SASL authentication error: user svc, password {SECRET} rejected; config was "
             f"{JAAS}\"}}")
    masked = mask_secrets(error, secret_values(SASL))
    assert SECRET not in masked
    assert "password *** rejected; config was ***" in masked
    assert mask_secrets("abc def", ["abc"]) == "abc def"  # too short to mask safely


def test_client_properties_secrets_cover_both_sides():
    props = {**SASL, "ssl.keystore.type": "PEM",
             "ssl.keystore.key": "-----BEGIN PRIVATE KEY----- S0VZ -----END PRIVATE KEY-----",
             "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----\nQ0VS\n"
                                               "-----END CERTIFICATE-----"}
    out, dropped = translate(props)
    cp = ClientProperties("f", props, out, dropped)
    assert {SECRET, out["ssl.key.pem"]} <= set(cp.secrets)
    assert "S0VZ" not in repr(cp)
