"""The Java client properties the stage gives Spark's executors (pipeline/driver.py)."""

import pytest

from pipeline.driver import EXECUTOR_FETCH_MAX_WAIT_MS, executor_kafka_options

pytestmark = pytest.mark.unit


def test_defaults_and_the_fixed_group_id():
    assert executor_kafka_options({}, "stage") == {
        "fetch.max.wait.ms": EXECUTOR_FETCH_MAX_WAIT_MS, "group.id": "stage-spark"}


def test_the_client_config_wins_over_defaults_but_not_over_the_group_id():
    client = {"fetch.max.wait.ms": "200", "security.protocol": "SASL_SSL",
              "group.id": "someone-else"}
    got = executor_kafka_options(client, "stage")
    assert got["fetch.max.wait.ms"] == "200"
    assert got["security.protocol"] == "SASL_SSL"
    assert got["group.id"] == "stage-spark"  # the prefixed ACL covers only this one


def test_the_default_wait_is_short_and_a_valid_java_property():
    # Kafka's Java client takes an int of milliseconds; a wait near its 500 ms default would
    # bring back the per-partition stall at the log's end.
    assert 0 <= int(EXECUTOR_FETCH_MAX_WAIT_MS) <= 50
