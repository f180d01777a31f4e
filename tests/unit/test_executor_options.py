"""What Spark's executors are given to read Kafka: spark-sql-kafka's options
(pipeline/job.py reader_options) and the Java client properties the stage adds
(pipeline/compute.py executor_kafka_options)."""

import json

from logcount.pipeline.compute import executor_kafka_options
from logcount.pipeline.job import FETCH_MAX_WAIT_MS, MAX_POLL_RECORDS, reader_options
from logcount.pipeline.offsets import OffsetRange

RANGES = [OffsetRange(0, 5, 9), OffsetRange(2, 0, 3)]


def test_the_reader_reads_exactly_the_ranges_committed_only():
    opts = reader_options("b:9092", "in", RANGES, {})
    assert json.loads(opts["assign"]) == {"in": [0, 2]}
    assert json.loads(opts["startingOffsets"]) == {"in": {"0": 5, "2": 0}}
    assert json.loads(opts["endingOffsets"]) == {"in": {"0": 9, "2": 3}}
    assert opts["kafka.isolation.level"] == "read_committed"
    assert opts["failOnDataLoss"] == "true"
    assert opts["kafka.fetch.max.wait.ms"] == FETCH_MAX_WAIT_MS
    assert opts["kafka.max.poll.records"] == MAX_POLL_RECORDS


def test_client_properties_get_the_prefix_and_win_over_the_defaults():
    opts = reader_options("b:9092", "in", RANGES, {"fetch.max.wait.ms": "200",
                                                  "max.poll.records": "500",
                                                  "security.protocol": "SASL_SSL"})
    assert opts["kafka.fetch.max.wait.ms"] == "200"
    assert opts["kafka.max.poll.records"] == "500"
    assert opts["kafka.security.protocol"] == "SASL_SSL"


def test_the_executors_group_id_is_fixed_whatever_the_client_config_says():
    client = {"security.protocol": "SASL_SSL", "group.id": "someone-else"}
    assert executor_kafka_options(client, "stage") == {
        "security.protocol": "SASL_SSL", "group.id": "stage-spark"}


def test_the_default_wait_is_short_and_a_valid_java_property():
    # Kafka's Java client takes an int of milliseconds; a wait near its 500 ms default would
    # bring back the per-partition stall at the log's end.
    assert 0 <= int(FETCH_MAX_WAIT_MS) <= 50


def test_the_default_poll_is_larger_than_the_java_clients_and_bounded():
    # Each poll costs two offset round trips in spark-sql-kafka; the records a poll leaves
    # behind stay on the heap per input partition, so it stays within a few thousand.
    assert 500 < int(MAX_POLL_RECORDS) <= 5000
