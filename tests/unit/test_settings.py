import argparse

import pytest

from core.errors import ConfigError
from core.settings import (
    MySQLUrl,
    RunSettings,
    SinkSettings,
    add_arguments,
    from_namespace,
)

pytestmark = pytest.mark.unit


def _parse(cls, argv, env=None):
    p = argparse.ArgumentParser()
    add_arguments(p, cls)
    return from_namespace(cls, p.parse_args(argv), env or {})


def test_flags_beat_env_beat_defaults():
    s = _parse(RunSettings, ["--group-id", "g-flag"],
               {"LOGCOUNT_GROUP_ID": "g-env", "LOGCOUNT_INPUT_TOPIC": "in-env"})
    assert s.group_id == "g-flag"
    assert s.input_topic == "in-env"
    assert s.output_topic == "error-counts"


def test_types_and_choices_are_checked():
    s = _parse(RunSettings, ["--max-records-per-batch", "10", "--once"],
               {"LOGCOUNT_TRIGGER_INTERVAL": "0.5"})
    assert (s.max_records_per_batch, s.once, s.trigger_interval) == (10, True, 0.5)
    with pytest.raises(ConfigError, match="LOGCOUNT_DELIVERY"):
        _parse(RunSettings, [], {"LOGCOUNT_DELIVERY": "maybe"})
    with pytest.raises(ConfigError, match="number"):
        _parse(RunSettings, ["--max-records-per-batch", "lots"])


def test_settings_are_frozen():
    s = RunSettings()
    with pytest.raises(AttributeError):
        s.group_id = "x"  # type: ignore[misc]


def test_secrets_are_masked_in_repr():
    s = _parse(RunSettings, ["--kafka-config", "sasl.password=hunter2",
                             "--kafka-config", "security.protocol=SASL_SSL"])
    assert s.kafka_client_config == {"sasl.password": "hunter2", "security.protocol": "SASL_SSL"}
    assert "hunter2" not in repr(s) and "SASL_SSL" in repr(s)
    k = _parse(SinkSettings, ["--mysql-url", "mysql://u:hunter2@db:3307/x"])
    assert "hunter2" not in repr(k) and "hunter2" not in repr(k.mysql)
    assert k.mysql == MySQLUrl("u", "hunter2", "db", 3307, "x")


def test_env_kafka_config_is_comma_separated():
    s = _parse(RunSettings, [], {"LOGCOUNT_KAFKA_CONFIG": "a=1,b=2"})
    assert s.kafka_client_config == {"a": "1", "b": "2"}


@pytest.mark.parametrize("url", ["postgres://u@h/db", "mysql://h/db", "mysql://u@h/",
                                 "mysql://u@h/db;drop"])
def test_bad_mysql_urls_are_config_errors(url):
    with pytest.raises(ConfigError):
        _parse(SinkSettings, ["--mysql-url", url])


def test_bad_kafka_config_item():
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        _parse(RunSettings, ["--kafka-config", "novalue"])
