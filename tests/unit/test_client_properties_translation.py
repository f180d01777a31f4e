"""`--client-config`'s translation for librdkafka: what each Java key becomes, what is dropped
and what is refused (never quoting a secret)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

from logcount.core.client_properties import ClientProperties
from logcount.core.client_properties.properties import parse_properties
from logcount.core.client_properties.translation import DROP_SAFE, LOGCOUNT_OWNED, translate
from tests.support.client_properties_cases import (
    JAAS,
    PLAIN,
    SASL,
    SCRAM,
    SECRET,
    SSL,
    rd,
    refused,
)

# --- same-name and renamed keys ----------------------------------------------------------------


def test_plain_keys_translate():
    out, dropped = translate({
        "bootstrap.servers": " b1:9092 , b2:9092,, ",
        "client.id": "logcount-x",
        "security.protocol": "plaintext",
        "request.timeout.ms": "30000",
        "session.timeout.ms": "45000",
        "socket.connection.setup.timeout.ms": "10000",
        "connections.max.idle.ms": "540000",
        "reconnect.backoff.ms": "50",
        "reconnect.backoff.max.ms": "1000",
        "retry.backoff.ms": "+100",
        "retry.backoff.max.ms": "1000",
        "metadata.max.age.ms": "300000 ",
    })
    assert out == {
        "bootstrap.servers": "b1:9092,b2:9092",
        "client.id": "logcount-x",
        "security.protocol": "PLAINTEXT",
        "socket.timeout.ms": "30000",
        "session.timeout.ms": "45000",
        "socket.connection.setup.timeout.ms": "10000",
        "connections.max.idle.ms": "540000",
        "reconnect.backoff.ms": "50",
        "reconnect.backoff.max.ms": "1000",
        "retry.backoff.ms": "100",
        "retry.backoff.max.ms": "1000",
        "topic.metadata.refresh.interval.ms": "300000",
    }
    assert dropped == ()


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_each_protocol(protocol):
    props = {"security.protocol": protocol}
    if protocol.startswith("SASL"):
        props |= {"sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS}
    assert rd(props)["security.protocol"] == protocol


def test_bad_protocol_and_numbers_are_refused():
    refused({"security.protocol": "TLS"}, "security.protocol 'TLS' is not one of")
    refused({"request.timeout.ms": "400000"},
            "request.timeout.ms=400000 (librdkafka's socket.timeout.ms) is outside "
            "librdkafka's range 10..300000")
    refused({"session.timeout.ms": "0"}, "session.timeout.ms=0 is outside")
    refused({"retry.backoff.ms": "1_000"}, "retry.backoff.ms must be a whole number")
    refused({"bootstrap.servers": " , "}, "bootstrap.servers is empty")


def test_endpoint_identification():
    assert rd({**SSL, "ssl.endpoint.identification.algorithm": ""}) == {
        "security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"}
    assert rd({**SSL, "ssl.endpoint.identification.algorithm": "HTTPS"})[
        "ssl.endpoint.identification.algorithm"] == "https"
    refused({**SSL, "ssl.endpoint.identification.algorithm": "ldaps"}, "'ldaps' is not supported")


# --- dropped and refused keys ------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(DROP_SAFE | LOGCOUNT_OWNED))
def test_dropped_keys(key):
    props = {**SASL, key: "x"}  # SASL_SSL: ssl.* and sasl.* keys are at home
    out, dropped = translate(props)
    assert dropped == (key,)
    assert key not in out
    spark = ClientProperties("f", props, out, dropped).spark_kafka_options
    assert (key in spark) == (key not in LOGCOUNT_OWNED)


def test_unknown_keys_are_refused():
    assert refused({"acks": "all"}) == (
        "key acks has no librdkafka equivalent logcount knows; remove it or pass a librdkafka "
        "setting with --kafka-config")
    refused({"acks": "all", "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"},
            "keys acks, ssl.cipher.suites have no librdkafka equivalent")


def test_sasl_keys_need_a_sasl_protocol():
    refused({"security.protocol": "SSL", "sasl.jaas.config": JAAS},
            "sasl.jaas.config is set but security.protocol is SSL")
    refused({"sasl.mechanism": "PLAIN"}, "sasl.mechanism is set but security.protocol is "
            "PLAINTEXT")


def test_ssl_keys_need_a_tls_protocol():
    refused({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.jaas.config": JAAS, "ssl.truststore.location": "ca.pem"},
            "ssl.truststore.location is set but security.protocol is SASL_PLAINTEXT")


# --- SASL --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mechanism", "module"), [
    ("PLAIN", PLAIN), ("SCRAM-SHA-256", SCRAM), ("SCRAM-SHA-512", SCRAM),
    ("PLAIN", "kafkashaded." + PLAIN),
])
def test_jaas_becomes_username_and_password(mechanism, module):
    jaas = f'{module} required username="svc" password="{SECRET}";'
    out = rd({**SASL, "sasl.mechanism": mechanism, "sasl.jaas.config": jaas})
    assert out == {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                   "sasl.username": "svc", "sasl.password": SECRET}


@pytest.mark.parametrize(("jaas", "fragment"), [
    (f'{PLAIN} required password="{SECRET}";', "has no username option"),
    (f'{PLAIN} required username="svc";', "has no password option"),
    (f'{SCRAM} required username="svc" password="{SECRET}";',
     "uses ScramLoginModule but sasl.mechanism is PLAIN, which needs PlainLoginModule"),
    (f'com.sun.security.auth.module.Krb5LoginModule required keyTab="k" principal="{SECRET}";',
     "login module com.sun.security.auth.module.Krb5LoginModule is not supported"),
    ("", "needs sasl.jaas.config"),
])
def test_bad_jaas_is_refused_without_the_secret(jaas, fragment):
    refused({**SASL, "sasl.jaas.config": jaas}, fragment)


def test_scram_delegation_tokens_are_refused():
    jaas = f'{SCRAM} required username="t" password="{SECRET}" tokenauth="true";'
    refused({**SASL, "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas},
            "tokenauth=true")


@pytest.mark.parametrize(("mechanism", "fragment"), [
    (None, "without sasl.mechanism means GSSAPI (Kerberos)"),
    ("GSSAPI", "sasl.mechanism GSSAPI is not supported by --client-config; the mechanisms "
               "that work are PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    ("OAUTHBEARER", "sasl.mechanism OAUTHBEARER is not supported"),
    ("plain", "sasl.mechanism 'plain' is not supported"),
])
def test_unsupported_mechanisms(mechanism, fragment):
    props = {k: v for k, v in SASL.items() if k != "sasl.mechanism"}
    if mechanism is not None:
        props["sasl.mechanism"] = mechanism
    refused(props, fragment)


# --- truststore --------------------------------------------------------------------------------


def test_pem_truststore_location_is_resolved_against_the_file():
    props = {**SSL, "ssl.truststore.type": "PEM", "ssl.truststore.location": "certs/ca.pem"}
    assert rd(props, "/etc/kafka")["ssl.ca.location"] == "/etc/kafka/certs/ca.pem"
    assert rd(props)["ssl.ca.location"] == "certs/ca.pem"
    absolute = {**props, "ssl.truststore.location": "/pki/ca.pem"}
    assert rd(absolute, "/etc/kafka")["ssl.ca.location"] == "/pki/ca.pem"


def test_inline_pem_is_rewrapped_for_openssl():
    body = "QUJD" * 30
    # A continuation joins the PEM's lines into one: Java reads it, OpenSSL would not.
    text = ("ssl.truststore.certificates=-----BEGIN CERTIFICATE----- \\\n"
            f"  {body[:50]} \\\n  {body[50:]} \\\n  -----END CERTIFICATE-----\n")
    certs = parse_properties(text)["ssl.truststore.certificates"]
    out = rd({**SSL, "ssl.truststore.type": "PEM", "ssl.truststore.certificates": certs})
    assert out["ssl.ca.pem"] == (
        f"-----BEGIN CERTIFICATE-----\n{body[:64]}\n{body[64:]}\n-----END CERTIFICATE-----\n")
    refused({**SSL, "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "nope"},
            "ssl.truststore.certificates holds no PEM block")


@pytest.mark.parametrize(("extra", "fragment"), [
    ({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "ts.p12"},
     "ssl.truststore.type PKCS12 is not supported for the driver's librdkafka clients; convert "
     "it to PEM (openssl pkcs12 -in ts.p12 -nokeys -out ca.pem) and set "
     "ssl.truststore.type=PEM"),
    ({"ssl.truststore.type": "JKS", "ssl.truststore.location": "/a b/ts.jks"},
     "keytool -importkeystore -srckeystore '/a b/ts.jks' -destkeystore ts.p12"),
    ({"ssl.truststore.location": "ts.jks"},
     "ssl.truststore.type is not set, so the Java client reads the truststore as JKS"),
    ({"ssl.truststore.type": "pem", "ssl.truststore.location": "ca.pem"},
     "must be PEM in upper case"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "ca.pem",
      "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----x-----END CERTIFICATE-----"},
     "not both"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "ca.pem",
      "ssl.truststore.password": SECRET}, "the Java client refuses it too"),
    ({"ssl.truststore.password": SECRET}, "without ssl.truststore.location"),
])
def test_truststore_refusals(extra, fragment):
    refused({**SSL, **extra}, fragment)


# --- keystore (mTLS) ---------------------------------------------------------------------------


def test_pem_keystore_file_serves_as_certificate_and_key():
    out = rd({**SSL, "ssl.keystore.type": "PEM", "ssl.keystore.location": "client.pem",
              "ssl.key.password": SECRET}, "/etc/kafka")
    assert out == {"security.protocol": "SSL",
                   "ssl.certificate.location": "/etc/kafka/client.pem",
                   "ssl.key.location": "/etc/kafka/client.pem", "ssl.key.password": SECRET}


def test_inline_pem_keystore():
    key = "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----"
    chain = "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n" * 2
    out = rd({**SSL, "ssl.keystore.type": "PEM", "ssl.keystore.key": key,
              "ssl.keystore.certificate.chain": chain})
    assert out["ssl.key.pem"] == key + "\n"
    assert out["ssl.certificate.pem"] == chain.rstrip("\n") + "\n"
    assert "ssl.key.password" not in out


def test_pkcs12_keystore():
    props = {**SSL, "ssl.keystore.type": "PKCS12", "ssl.keystore.location": "ks.p12",
             "ssl.keystore.password": SECRET}
    out, dropped = translate(props, "/k")
    assert out == {"security.protocol": "SSL", "ssl.keystore.location": "/k/ks.p12",
                   "ssl.keystore.password": SECRET}
    assert dropped == ()
    out, dropped = translate({**props, "ssl.key.password": SECRET}, "/k")
    assert "ssl.key.password" not in out
    assert dropped == ("ssl.key.password",)


def test_key_password_without_keystore_is_dropped():
    assert translate({**SSL, "ssl.key.password": SECRET}) == (
        {"security.protocol": "SSL"}, ("ssl.key.password",))


@pytest.mark.parametrize(("extra", "fragment"), [
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "ks.p12",
      "ssl.keystore.password": SECRET, "ssl.key.password": SECRET + "2"},
     "ssl.key.password differs from ssl.keystore.password"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "ks.p12"},
     "needs ssl.keystore.password"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "ks.jks",
      "ssl.keystore.password": SECRET},
     "ssl.keystore.type JKS is not supported for the driver's librdkafka clients; convert it to "
     "PKCS12 (keytool -importkeystore -srckeystore ks.jks -destkeystore ks.p12 "
     "-deststoretype PKCS12) and set ssl.keystore.type=PKCS12"),
    ({"ssl.keystore.location": "ks.jks", "ssl.keystore.password": SECRET},
     "ssl.keystore.type is not set, so the Java client reads the keystore as JKS"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "c.pem",
      "ssl.keystore.password": SECRET}, "ssl.keystore.password must not be set"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": SECRET}, "go together"),
    ({"ssl.keystore.key": SECRET, "ssl.keystore.certificate.chain": "c"},
     "need ssl.keystore.type=PEM"),
    ({"ssl.keystore.password": SECRET}, "without ssl.keystore.location"),
])
def test_keystore_refusals(extra, fragment):
    refused({**SSL, **extra}, fragment)


# --- librdkafka knows every key the translation emits ------------------------------------------


def test_librdkafka_accepts_every_translated_key():
    props = {
        **SASL, "client.id": "x", "ssl.endpoint.identification.algorithm": "",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "ca.pem",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": "ks.p12",
        "ssl.keystore.password": SECRET,
        **{key: "1000" for key in ("request.timeout.ms", "session.timeout.ms",
                                   "socket.connection.setup.timeout.ms",
                                   "connections.max.idle.ms", "reconnect.backoff.ms",
                                   "reconnect.backoff.max.ms", "retry.backoff.ms",
                                   "retry.backoff.max.ms", "metadata.max.age.ms")},
    }
    out = rd(props)
    pem = rd({**SSL, "ssl.keystore.type": "PEM", "ssl.keystore.location": "c.pem",
              "ssl.key.password": "k"})
    inline = rd({**SSL, "ssl.truststore.type": "PEM",
                 "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----\nQQ==\n"
                                                "-----END CERTIFICATE-----",
                 "ssl.keystore.type": "PEM", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"
                 "\nQQ==\n-----END PRIVATE KEY-----", "ssl.keystore.certificate.chain":
                 "-----BEGIN CERTIFICATE-----\nQQ==\n-----END CERTIFICATE-----"})
    conf: dict[str, Any] = {**out, **pem, **inline}
    # PLAINTEXT and no broker: librdkafka checks every property name and value at creation but
    # neither opens the files nor connects anywhere.
    conf |= {"security.protocol": "PLAINTEXT", "log_level": 0}
    Producer(conf).flush(0)
