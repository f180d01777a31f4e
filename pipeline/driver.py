"""`logcount run`: the stage, put together. One batch is `Batch.run` (pipeline/batch.py):

    1 plan     the next input ranges: from the state's offsets up to the last stable offsets
    2 compute  Spark's executors read exactly those ranges, parse and count; counts come back
    3 publish  ONE Kafka transaction: new totals, DLQ records, state records, the group's offsets
    4 advance  only after the commit does the in-memory state move

The clients' life (fencing, the claim, recovery) is pipeline/clients.py's, the loop (backoff,
pacing, the hang watch) pipeline/loop.py's, the metrics and the batch line
pipeline/batch_report.py's; this module starts the stage and ends it. The state
(pipeline/state.py) lives in the compacted `<output>-state` topic, written in that same
transaction, and is checked against the cluster at every start (`Clients.read_state`). There is
no checkpoint directory and nothing else to get out of step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer

from logcount.core.backoff import Backoff
from logcount.core.errors import StateRefused
from logcount.core.heartbeat import HEARTBEAT, frozen_between
from logcount.core.metrics import StageMetrics, serve
from logcount.core.settings import RunSettings
from logcount.pipeline.batch import Batch, Cluster, Compute
from logcount.pipeline.batch_report import Report
from logcount.pipeline.clients import Clients, MakeClients
from logcount.pipeline.crash import CrashPoints
from logcount.pipeline.loop import Loop, StopFlag
from logcount.pipeline.state import StageState

log = logging.getLogger("logcount.stage")


@dataclass
class Seams:
    """What a Stage works through; the real ones are wired in pipeline/wiring.py."""

    cluster: Cluster
    clients: MakeClients
    compute: Compute
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], bool] | None = None  # default: the stop flag's wait
    frozen: Callable[[float], float] = frozen_between  # process stopped since then (heartbeat)
    crash: CrashPoints = field(default_factory=CrashPoints)
    serve_metrics: bool = True


class Stage:
    def __init__(self, s: RunSettings, seams: Seams) -> None:
        self.s = s
        self.cluster, self.compute = seams.cluster, seams.compute
        self.stop = StopFlag()
        sleep = seams.sleep or self.stop.event.wait
        self.sleep, self.serve_metrics = sleep, seams.serve_metrics
        self.server: ThreadingHTTPServer | None = None  # started once the broker answers
        self.report = Report(s, seams.clock)
        self.batch = Batch(s, seams.cluster, seams.compute, self.report, seams.clock,
                           seams.crash)
        self.clients = Clients(s, seams.cluster, seams.clients, self.batch, self.report,
                               seams.clock, sleep, seams.frozen)
        self.loop = Loop(s, self.batch, self.clients, self.report, seams.clock, sleep,
                         self.stop)

    @property
    def state(self) -> StageState:
        return self.batch.state

    @property
    def metrics(self) -> StageMetrics:
        return self.report.metrics

    @property
    def backoff(self) -> Backoff:
        return self.loop.backoff

    def start(self) -> None:
        """Beside the Spark session (begun before the stage): the broker, topics, fencing and
        the state. Nothing is read or written before both are done."""
        s = self.s
        try:
            # A mistake in --line-regex is one line before anything is touched; only Java
            # reads it as the plan will, so this start waits for the session first.
            self.compute.check_format()
            self.cluster.connect()
            # Only once the broker answers (as before the Spark session began first): a
            # newcomer's wrong address or protocol is one line, with no metrics line before it.
            log.info("starting stage: %r", s)
            if self.serve_metrics:
                self.server = serve(s.metrics_port, self.report.metrics.registry,
                                    self.report.health)
            self.cluster.ensure_topics()
            self.clients.start()
            if s.once:
                self.batch.limit = self.cluster.input_offsets(self.cluster.input_partitions(),
                                                              latest=True)
        except BaseException:
            self.compute.settle()
            self.close()
            raise
        self.compute.ready()
        self.stop.on_stop.append(self.compute.cancel)

    def run(self) -> int:
        self.stop.install()
        HEARTBEAT.start()  # from the start: a freeze before the first watched call counts too
        try:
            self.start()
            try:
                self.loop.run()
            finally:
                self.close()
        except StateRefused as exc:
            self.hold_refusal(exc)
            raise
        finally:
            if self.server is not None:
                self.server.shutdown()
        self.report.closing_line(self.batch.number)
        return 0

    def close(self) -> None:
        self.report.close()
        self.clients.close()

    def hold_refusal(self, exc: StateRefused) -> None:
        """A refused stage says so on /metrics (and /healthz) for --refusal-hold-seconds before
        it exits, so that a scrape sees why it is down; SIGTERM ends the wait."""
        self.report.refused(exc)
        hold = self.s.refusal_hold_seconds
        if self.server is None or hold <= 0:
            return
        log.error("refused: %s; /metrics says logcount_stage_start_refused 1 for %.0fs "
                  "(--refusal-hold-seconds) before the exit", exc, hold)
        self.sleep(hold)
