import argparse

import pytest

from logcount.core.errors import ConfigError
from logcount.core.settings import (
    MySQLUrl,
    RunSettings,
    SinkSettings,
    add_arguments,
    from_namespace,
)


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


def test_numbers_are_finite_and_in_range_where_they_are_read():
    from logcount.core.settings import RunSettings, SinkSettings, from_namespace

    for env, words in [({"LOGCOUNT_TRIGGER_INTERVAL": "nan"}, "finite"),
                       ({"LOGCOUNT_METRICS_PORT": "65536"}, "between 0 and 65535"),
                       ({"LOGCOUNT_HEALTH_STALL_SECONDS": "0"}, "greater than 0"),
                       ({"LOGCOUNT_INPUT_PARTITIONS": "2.5"}, "whole number")]:
        with pytest.raises(ConfigError, match=words):
            from_namespace(RunSettings, env=env)
    assert from_namespace(SinkSettings, env={"LOGCOUNT_METRICS_PORT": "0"}).metrics_port == 0
    assert from_namespace(RunSettings, env={"LOGCOUNT_METRICS_PORT": "65535"}).metrics_port \
        == 65535


def test_the_transactional_id_comes_from_the_group_unless_given():
    from logcount.core.settings import RunSettings

    assert RunSettings(group_id="g1").txn_id == "g1-stage"
    assert RunSettings(group_id="g1", transactional_id="t").txn_id == "t"


def test_lateness_horizon_durations():
    from logcount.core.settings import parse_duration_minutes

    assert parse_duration_minutes("90m", "x") == 90
    assert parse_duration_minutes("6h", "x") == 360 and parse_duration_minutes("7d", "x") == 10080
    assert parse_duration_minutes(None, "x") is None and parse_duration_minutes("off", "x") is None
    for bad in ("0m", "5", "1.5h", "-3d", "3w"):
        with pytest.raises(ConfigError):
            parse_duration_minutes(bad, "x")


def test_grace_durations():
    from logcount.core.settings import parse_grace_seconds

    assert parse_grace_seconds("30s", "x") == 30 and parse_grace_seconds(" 2M ", "x") == 120
    assert parse_grace_seconds("1h", "x") == 3600 and parse_grace_seconds("7d", "x") == 604800
    assert parse_grace_seconds(None, "x") is None and parse_grace_seconds("off", "x") is None
    for bad in ("0s", "0m", "-30s", "+30s", "30", "1.5m", "30 sec", "3w", "7d1s", "604801s",
                "9" * 13 + "s", "99999999999h", "\u0663\u0660s", "s"):
        with pytest.raises(ConfigError) as err:
            parse_grace_seconds(bad, "--emit-final")
        assert "\n" not in str(err.value) and str(err.value).startswith("--emit-final takes")


def test_passwords_are_masked_whoever_prints_them():
    from logcount.core import redact
    from logcount.core.settings import SinkSettings, mask_url

    assert mask_url("mysql://:Pw1@h/db") == "mysql://:***@h/db"
    assert mask_url("mysql://u:p/a@s@h:1/db") == "mysql://u:***@h:1/db"
    s = SinkSettings(mysql_url="mysql://app:p%40ssW0rd@h:3306/db").validate()
    assert s.mysql.password == "p@ssW0rd", "URL-encoded passwords work decoded"
    assert "p%40ssW0rd" not in repr(s) and "p@ssW0rd" not in repr(s)
    assert redact.mask("Access denied (using password p@ssW0rd)") == \
        "Access denied (using password ***)"


def test_every_command_help_has_an_example():
    from logcount.cli import EXAMPLES, build_parser

    parser = build_parser()
    assert "example" in parser.format_help()
    assert set(EXAMPLES) == {"logcount", "stack", "run", "state", "sink", "produce", "demo",
                             "bench"}


def test_pacing_is_checked_where_it_is_read():
    s = _parse(RunSettings, ["--min-batch-interval", "0.25"])
    assert s.validate().min_batch_interval == 0.25
    assert _parse(RunSettings, []).min_batch_interval == 1.0  # one batch a second when caught up
    assert _parse(RunSettings, ["--min-batch-interval", "0"]).min_batch_interval == 0.0
    for bad in ("-0.1", "61"):
        with pytest.raises(ConfigError, match="min-batch-interval"):
            _parse(RunSettings, ["--min-batch-interval", bad])
    with pytest.raises(ConfigError, match="below --health-stall-seconds"):
        _parse(RunSettings, ["--min-batch-interval", "30", "--health-stall-seconds", "30"]
               ).validate()

    # A latency target: its batches as often as unpaced ones, so the low-latency mode's JVM.
    s = _parse(RunSettings, ["--target-latency", "250ms"], {"LOGCOUNT_MIN_BATCH_INTERVAL": "2"})
    assert s.target_latency_seconds == 0.25 and not s.paced
    assert _parse(RunSettings, []).target_latency_seconds is None and _parse(RunSettings, []).paced
    assert _parse(RunSettings, [], {"LOGCOUNT_TARGET_LATENCY": "1.5s"}).target_latency_seconds \
        == 1.5
    with pytest.raises(ConfigError, match="--target-latency takes a time"):
        _parse(RunSettings, ["--target-latency", "250"])
    with pytest.raises(ConfigError, match="below --health-stall-seconds"):
        _parse(RunSettings, ["--target-latency", "20s", "--health-stall-seconds", "10"])


@pytest.mark.parametrize(("argv", "match"), [
    (["--group-by", "host.name"], "default text rule"),
    (["--line-regex", r"(?<time>\S+ \S+) (?<level>\w+)", "--group-by", "logger"],
     "no such named group"),
    (["--json-line-field", "message", "--group-by", "a,b,c,d"], "at most 3"),
    (["--json-line-field", "message", "--group-by", "log_count=x"], "reserved"),
    (["--group-by", "level", "--max-series", "0"], "--max-series"),
    (["--level", "*,ERROR"], "alone"),
])
def test_group_by_mistakes_are_one_config_error_line(argv, match):
    with pytest.raises(ConfigError, match=match) as err:
        _parse(RunSettings, argv).validate()
    assert "\n" not in str(err.value)


def test_group_by_reaches_the_line_format_and_env():
    s = _parse(RunSettings, ["--json-line-field", "message"],
               {"LOGCOUNT_GROUP_BY": "host.name,level", "LOGCOUNT_MAX_SERIES": "50"}).validate()
    fmt = s.line_format
    assert [d.name for d in fmt.group_by] == ["name", "level"] and fmt.max_series == 50
