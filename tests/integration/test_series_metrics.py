"""`logcount_counted_lines_total` with `--group-by`, scraped from a live stage: one label per
dimension, each label set's value equal to that series' committed totals in the output topic,
and no more label sets than --max-series plus the overflow series."""

from __future__ import annotations

import json
import signal
from collections import Counter

from confluent_kafka import Producer

from logcount.connectors import kafka_io
from tests.support.metrics import label_sets, metric, sample
from tests.support.ports import free_port
from tests.support.readers import read_all
from tests.support.run import stage_args, start_cli, wait_for

LOGGER_RE = r"(?<time>\S+ \S+) (?<level>\w+) (?<logger>\S+)"
# Busiest first: com.a and com.c are named, com.b and com.d go to the overflow series.
LOGGERS = {"com.a": 9, "com.c": 7, "com.b": 3, "com.d": 2}


def test_counted_lines_carry_the_series_labels_bounded_by_max_series(endpoints, names,
                                                                      tmp_path):
    topic = names.topic("in")
    kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), topic, 1)
    p = Producer({"bootstrap.servers": endpoints.bootstrap, "enable.idempotence": True})
    lines = [f"2024-05-01 10:0{i % 2}:{i % 60:02d} {lvl} {logger} boom".encode()
             for logger, n in LOGGERS.items() for i in range(n) for lvl in ("ERROR", "INFO")]
    for v in lines:
        p.produce(topic, v)
    assert p.flush(60) == 0

    port = free_port()
    stage = start_cli(*stage_args(endpoints, names, "--line-regex", LOGGER_RE, "--group-by",
                                  "logger", "--max-series", "2", "--metrics-port", str(port)),
                      log_path=tmp_path / "stage.log")
    try:
        wait_for(lambda: metric(port, "logcount_records_read_total", down=0) == len(lines), 180,
                 what="the stage to read every line")
        sets = label_sets(port, "logcount_counted_lines_total")
        got = {s["logger"]: sample(port, "logcount_counted_lines_total", 5.0, **s) for s in sets}
    finally:
        stage.send_signal(signal.SIGTERM)
        assert stage.wait(60) == 0
    committed: Counter = Counter()
    for m in read_all(endpoints.bootstrap, names.topic("out")):
        v = json.loads(m.value())
        committed[(v["log_time"], v["dims"]["logger"])] = v["log_count"]
    by_series: Counter = Counter()
    for (_, logger), n in committed.items():
        by_series[logger] += n
    assert all(set(s) == {"logger"} for s in sets)
    assert got == dict(by_series) == {"com.a": 9, "com.c": 7, "__other__": 5}
