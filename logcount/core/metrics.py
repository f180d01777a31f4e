"""Prometheus metrics and a health check for the stage and the sink, on one small HTTP server.

`/metrics` is the Prometheus text format; `/healthz` answers 200, or 503 when no batch has been
committed (stage) or written (sink) for `stall_seconds` while lag exists. A port that cannot be
bound is logged and skipped: metrics never stop the data path.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

log = logging.getLogger("logcount.metrics")

_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)


class Health:
    """Healthy unless progress has stalled for `stall_seconds` while there is lag."""

    def __init__(self, stall_seconds: float) -> None:
        self.stall_seconds = stall_seconds
        self.last_progress = time.monotonic()
        self.lag = 0
        self.refused: str | None = None  # the refusal line of a stage about to exit 2

    def progressed(self) -> None:
        self.last_progress = time.monotonic()

    def status(self) -> tuple[bool, dict]:
        idle = time.monotonic() - self.last_progress
        healthy = self.refused is None and (self.lag <= 0 or idle < self.stall_seconds)
        detail: dict[str, object] = {
            "healthy": healthy, "lag": self.lag, "seconds_since_progress": round(idle, 1),
            "stall_seconds": self.stall_seconds}
        if self.refused is not None:
            detail["refused"] = self.refused
        return healthy, detail


class StageMetrics:
    def __init__(self, dims: tuple[str, ...] = (), grace_seconds: int | None = None) -> None:
        r = self.registry = CollectorRegistry()
        self.batches_committed = Counter("logcount_batches_committed", "batches committed",
                                         registry=r)
        self.batches_aborted = Counter("logcount_batches_aborted",
                                       "batches aborted or failed before commit", registry=r)
        self.records_read = Counter("logcount_records_read", "input records read", registry=r)
        self.malformed = Counter("logcount_malformed_records", "malformed records sent to the DLQ",
                                 registry=r)
        self.late = Counter("logcount_late_records", "lines older than --lateness-horizon, sent "
                            "to the DLQ as 'late'", registry=r)
        # With --group-by one label per dimension: its label sets are the named series (at
        # most --max-series) and the overflow series.
        self.counted_lines = Counter("logcount_counted_lines", "lines counted (of --level), "
                                     "once their transaction committed", dims, registry=r)
        self.continuation = Counter("logcount_continuation_lines", "stack-trace continuation "
                                    "lines taken as part of the event before them "
                                    "(--continuation-lines skip)", registry=r)
        self.state_minutes = Gauge("logcount_state_minutes", "minute totals held in memory "
                                   "(with --group-by: (minute, series) totals)", registry=r)
        self.overflow_lines = Counter("logcount_overflow_lines", "lines of series beyond "
                                      "--max-series, counted under the overflow series",
                                      registry=r)
        self.lag = Gauge("logcount_input_lag_records", "input lag (last stable offset - committed)",
                         ["partition"], registry=r)
        self.spark_seconds = Histogram("logcount_batch_spark_seconds", "Spark time per batch",
                                       buckets=_SECONDS, registry=r)
        self.commit_seconds = Histogram("logcount_batch_commit_seconds",
                                        "transaction time per batch (begin to commit)",
                                        buckets=_SECONDS, registry=r)
        self.hung_calls = Counter("logcount_kafka_hung_calls", "librdkafka calls that did not "
                                  "return past their own timeout (the clients were replaced)",
                                  ["call"], registry=r)
        self.producer_recoveries = Counter(
            "logcount_producer_recoveries", "Kafka clients replaced in-process, by cause: "
            "fenced_after_freeze (the broker aborted our transaction while the process stood "
            "stopped), fenced, hung_call, after_outage (the cluster was unreachable)",
            ["cause"], registry=r)
        self.start_refused = Gauge("logcount_stage_start_refused", "1 while a stage whose start "
                                   "was refused (exit 2) holds /metrics up before it exits",
                                   registry=r)
        self._series: dict[tuple[str, ...], object] = {}  # a series' child of counted_lines
        # --emit-final only (a stage without it exports neither): its GRACE, and the end of the
        # last closed minute, registered at the first close known (no minute closed yet: no
        # sample, rather than a 0 that reads as 1970 to an alert on its age).
        self.grace: Gauge | None = None
        self.last_closed: Gauge | None = None
        if grace_seconds is not None:
            self.grace = Gauge("logcount_emit_final_grace_seconds", "--emit-final's GRACE: a "
                               "minute closes once the watermark is past its end plus this",
                               registry=r)
            self.grace.set(grace_seconds)

    def closed_until(self, end_unix_seconds: float) -> None:
        """--emit-final: every minute ending at or before this Unix time is final."""
        if self.last_closed is None:
            self.last_closed = Gauge(
                "logcount_last_closed_minute_timestamp_seconds", "--emit-final: the end of the "
                "last closed (final) minute, Unix seconds; absent until a minute closes",
                registry=self.registry)
        self.last_closed.set(end_unix_seconds)

    def count_series(self, values: tuple[str, ...], lines: int) -> None:
        """counted_lines of one series: its child kept (labels() validates and locks each time,
        ~1.3 ms for the ~1,000 series of a batch at 10,000 live series); at most the named
        series and the overflow one. Figures: docs/tuning.md#collected-rows"""
        child = self._series.get(values)
        if child is None:
            child = self._series[values] = self.counted_lines.labels(*values)
        child.inc(lines)  # type: ignore[attr-defined]


class SinkMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.records_applied = Counter("logcount_sink_records_applied",
                                       "output records applied to MySQL", registry=r)
        self.batches_written = Counter("logcount_sink_batches_written",
                                       "MySQL transactions committed", registry=r)
        self.mysql_write_seconds = Histogram("logcount_sink_mysql_write_seconds",
                                             "MySQL write latency per batch (one transaction)",
                                             buckets=_SECONDS, registry=r)
        self.lag = Gauge("logcount_sink_lag_records", "output topic lag per partition",
                         ["partition"], registry=r)


def serve(port: int, registry: CollectorRegistry, health: Health) -> ThreadingHTTPServer | None:
    """Serve /metrics and /healthz on 0.0.0.0:port in a daemon thread; None if port is 0 or
    cannot be bound."""
    if not port:
        return None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.startswith("/metrics"):
                body, ctype, code = generate_latest(registry), CONTENT_TYPE_LATEST, 200
            elif self.path.startswith("/healthz"):
                ok, detail = health.status()
                body, ctype = json.dumps(detail).encode(), "application/json"
                code = 200 if ok else 503
            else:
                body, ctype, code = b"not found\n", "text/plain", 404
            try:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the prober hung up before the answer (a probe's own timeout)
                self.close_connection = True

        def log_message(self, *args) -> None:  # scrapes are not worth a log line each
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address) -> None:
            # socketserver's default prints a traceback to stderr; a scrape or a probe that
            # goes wrong is worth at most a debug line, never a traceback on the terminal.
            log.debug("metrics: request from %s failed", client_address, exc_info=True)

    try:
        server = Server(("0.0.0.0", port), Handler)
    except OSError as exc:
        log.warning("metrics: cannot listen on port %d (%s); running without metrics", port, exc)
        return None
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics on http://0.0.0.0:%d/metrics, health on /healthz", port)
    return server
