import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from logcount.core.metrics import Health, StageMetrics, serve
from tests.support.metrics import read_metrics
from tests.support.ports import free_port


def test_health_fails_only_when_stalled_under_lag():
    h = Health(stall_seconds=10)
    assert h.status()[0]
    h.lag = 5
    assert h.status()[0], "lag alone is not a stall"
    h.last_progress = time.monotonic() - 11
    assert not h.status()[0]
    h.lag = 0
    assert h.status()[0], "no lag: idle is fine"
    h.lag = 5
    h.progressed()
    assert h.status()[0]


def test_endpoints_serve_metrics_and_health():
    m, h = StageMetrics(), Health(stall_seconds=1)
    port = free_port()
    server = serve(port, m.registry, h)
    assert server is not None
    try:
        m.batches_committed.inc(3)
        assert read_metrics(port)["logcount_batches_committed_total"] == 3
        ok = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz"))
        assert ok["healthy"] is True
        h.lag, h.last_progress = 7, time.monotonic() - 5
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz")
        assert err.value.code == 503 and json.load(err.value)["lag"] == 7
    finally:
        server.shutdown()


def test_a_taken_port_is_skipped_not_fatal():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        assert serve(s.getsockname()[1], StageMetrics().registry, Health(1)) is None


def test_a_probe_that_hangs_up_early_leaves_no_traceback(capfd):
    """Health probes with short timeouts hang up before the answer (BrokenPipeError in do_GET):
    never a traceback on the terminal, and the server goes on answering."""
    m, h = StageMetrics(), Health(stall_seconds=1)
    port = free_port()
    server = serve(port, m.registry, h)
    assert server is not None
    try:
        try:  # what socketserver does with an exception from a handler
            raise BrokenPipeError(32, "Broken pipe")
        except BrokenPipeError:
            # No request object: the handler looks only at the exception being handled.
            server.handle_error(None, ("127.0.0.1", 1))  # type: ignore[arg-type]
        for _ in range(30):  # real probes that reset the connection right after asking
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            s.close()
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").read()
        assert json.loads(body)["healthy"]
    finally:
        server.shutdown()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_count_series_adds_to_each_series_label_set_alone():
    m = StageMetrics(("service", "level"))
    m.count_series(("api", "ERROR"), 3)
    m.count_series(("db", "ERROR"), 2)
    m.count_series(("api", "ERROR"), 4)  # the kept child: the same label set
    m.count_series(("api", "WARN"), 1)
    got = {tuple(s.labels.values()): s.value for metric in m.registry.collect()
           if metric.name == "logcount_counted_lines" for s in metric.samples
           if s.name == "logcount_counted_lines_total"}
    assert got == {("api", "ERROR"): 7, ("db", "ERROR"): 2, ("api", "WARN"): 1}


# -- --emit-final: the grace and the end of the last closed minute -----------------------------

def _names(m: StageMetrics) -> set[str]:
    return {s.name for metric in m.registry.collect() for s in metric.samples}


def _committed(report, closed_before):
    from logcount.pipeline.closing import ClosingFacts, ClosingState
    from logcount.pipeline.job import BatchResult
    from logcount.pipeline.state import Change, Identity, StageState
    from logcount.pipeline.totals import Totals

    closing = (None if report.metrics.grace is None
               else ClosingState("out-final", 60, ClosingFacts({}, closed_before)))
    state = StageState(Identity("in", "I", "out", "O", "ERROR"), {0: 5}, Totals(),
                       closing=closing)
    report.committed(1, state, BatchResult(), Change({}, {0: 5}, None, None, [], closing=closing),
                     0.1, 0.1)


def test_without_emit_final_the_stage_exports_no_closing_metric():
    from logcount.core.settings import RunSettings
    from logcount.pipeline.batch_report import Report

    report = Report(RunSettings(input_topic="in", output_topic="out", metrics_port=0),
                    time.monotonic)
    _committed(report, None)
    got = _names(report.metrics)
    assert "logcount_batches_committed_total" in got
    assert not {n for n in got if "closed" in n or "grace" in n}, got


def test_the_last_closed_minute_is_its_end_in_unix_seconds_once_a_minute_closed():
    from datetime import UTC, datetime

    from logcount.core.settings import RunSettings
    from logcount.pipeline.batch_report import Report
    from logcount.pipeline.hour_records import minute_index

    report = Report(RunSettings(input_topic="in", output_topic="out", metrics_port=0,
                                emit_final="90s"), time.monotonic)
    r = report.metrics.registry
    assert r.get_sample_value("logcount_emit_final_grace_seconds") == 90
    _committed(report, None)  # nothing closed yet: absent, not 0 (1970 to an alert on its age)
    assert "logcount_last_closed_minute_timestamp_seconds" not in _names(report.metrics)
    # every minute before 10:00 is final: the last closed one, 09:59, ended at 10:00
    _committed(report, minute_index("2026-11-29 10:00"))
    assert r.get_sample_value("logcount_last_closed_minute_timestamp_seconds") == \
        datetime(2026, 11, 29, 10, 0, tzinfo=UTC).timestamp()
    _committed(report, minute_index("2026-11-29 10:03"))
    assert r.get_sample_value("logcount_last_closed_minute_timestamp_seconds") == \
        datetime(2026, 11, 29, 10, 3, tzinfo=UTC).timestamp()
