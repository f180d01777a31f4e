"""`--client-config`: loading the Java properties file (paths, decoding, masked repr, the log
lines) and its refusals, each named after the file."""

from __future__ import annotations

import logging
import os

import pytest

from logcount.core.client_properties import load_client_properties
from logcount.core.errors import ConfigError
from tests.support.client_properties_cases import JAAS, PLAIN, SECRET


def _write(tmp_path, text: str, name: str = "client.properties") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_load_resolves_paths_masks_and_logs(tmp_path, caplog):
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.pem").write_text("ca")
    path = _write(tmp_path, (
        "bootstrap.servers=b1:9093\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        f"sasl.jaas.config={PLAIN} required \\\n  username=\"svc\" \\\n"
        f"  password=\"{SECRET}\";\n"
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=certs/ca.pem\n"
        "ssl.enabled.protocols=TLSv1.3\n"
        "group.id=theirs\n"
    ))
    with caplog.at_level(logging.DEBUG, logger="logcount.kafka"):
        cp = load_client_properties(path)
    assert cp.bootstrap_servers == "b1:9093"
    assert cp.rdkafka["ssl.ca.location"] == os.path.join(str(tmp_path), "certs/ca.pem")
    assert cp.rdkafka["sasl.password"] == SECRET
    assert cp.java["ssl.truststore.location"] == "certs/ca.pem"  # verbatim for Spark
    assert cp.dropped == ("group.id", "ssl.enabled.protocols")
    assert "group.id" not in cp.spark_kafka_options
    assert "ssl.enabled.protocols" in caplog.text and "group.id" in caplog.text
    for shown in (repr(cp), str(cp), caplog.text):
        assert SECRET not in shown
    assert "'sasl.password': '***'" in repr(cp)
    assert "'sasl.jaas.config': '***'" in repr(cp)


def test_load_refusals_name_the_path_in_one_line(tmp_path):
    missing = str(tmp_path / "nope.properties")
    with pytest.raises(ConfigError, match=f"^{missing}: cannot read the --client-config file: "
                                          "No such file or directory$"):
        load_client_properties(missing)
    with pytest.raises(ConfigError, match="cannot read"):
        load_client_properties(str(tmp_path))
    path = _write(tmp_path, "security.protocol=SSL\nssl.truststore.type=PEM\n"
                            "ssl.truststore.location=ca.pem\n")
    with pytest.raises(ConfigError, match=(f"^{path}: ssl.truststore.location "
                                           f"{tmp_path / 'ca.pem'} cannot be read")):
        load_client_properties(path)
    path = _write(tmp_path, "acks=all\n" + "sasl.jaas.config=" + JAAS + "\n", "bad.properties")
    with pytest.raises(ConfigError) as info:
        load_client_properties(path)
    assert str(info.value).startswith(f"{path}: key acks has no librdkafka equivalent")
    assert SECRET not in str(info.value)


def test_load_decodes_utf8_with_bom_and_falls_back_to_latin1(tmp_path):
    utf8 = tmp_path / "u.properties"
    utf8.write_bytes("\ufeffclient.id=café\n".encode())
    assert load_client_properties(str(utf8)).rdkafka == {"client.id": "café"}
    latin1 = tmp_path / "l.properties"
    latin1.write_bytes("client.id=café\n".encode("latin-1"))
    assert load_client_properties(str(latin1)).rdkafka == {"client.id": "café"}
