"""pipeline/spark.py: the SQL settings every batch runs with."""

import pytest

from pipeline.spark import SQL_CONF, V1_SOURCES_DEFAULT, V1_SOURCES_KEY, without_kafka

pytestmark = pytest.mark.unit


def test_kafka_leaves_the_v1_source_list_and_nothing_else_does():
    assert without_kafka("avro,csv,json,kafka,orc,parquet,text") == "avro,csv,json,orc,parquet,text"
    assert without_kafka("Kafka, csv") == "csv"
    assert without_kafka("kafka") == ""
    assert without_kafka("") == ""
    assert without_kafka("csv,kafka2") == "csv,kafka2"


def test_our_session_reads_kafka_through_v2():
    assert "kafka" in V1_SOURCES_DEFAULT.split(",")
    assert SQL_CONF[V1_SOURCES_KEY] == without_kafka(V1_SOURCES_DEFAULT)
    assert "kafka" not in SQL_CONF[V1_SOURCES_KEY].split(",")
