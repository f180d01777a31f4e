"""The life of the stage's Kafka clients: made, fenced in, the state read back, the claim
committed; let go of when a call hangs, the producer is fenced or the cluster failed; replaced
in the same process unless another instance took over.

Fencing. Every instance of a stage uses one transactional.id (derived from the group id). A new
producer's init_transactions fences every older producer with that id (a zombie: a stage that
hung, froze or was replaced but still runs) and settles its open transaction (committed if its
commit had reached the coordinator, else aborted), so read_committed readers are not stalled
until its timeout. Only then is the state settled and read back. A zombie's next transactional
call fails with FencedError: it publishes nothing more.

The claim. Fencing alone would let a zombie that comes back fence its replacement in turn. So a
start commits a claim (its instance id) to the state topic at once, and an instance that hung or
was fenced checks the claim before it makes new clients: another instance's claim means it was
replaced, and it exits without publishing (TakenOverError). Fenced with no freeze to explain it,
it watches the claim for CLAIM_GRACE_S first, as a replacement claims a moment after it fenced.
When it gives up instead is logcount/core/recovery.py's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from logcount.connectors.transactional_sink import OutRecord
from logcount.core.backoff import Backoff
from logcount.core.errors import FatalKafkaError, FencedError, HungClientError, TakenOverError
from logcount.core.recovery import Recovery
from logcount.core.retry import poll
from logcount.core.settings import RunSettings
from logcount.pipeline import start_facts
from logcount.pipeline.batch import Batch, Cluster, Group, Publisher, transaction
from logcount.pipeline.batch_report import Report
from logcount.pipeline.state import (
    CLAIM_KEY,
    check_start,
    claim_value,
    claimant,
    decode_records,
    decode_series,
    state_topic_name,
)

log = logging.getLogger("logcount.stage")

# A replacement claims after its init_transactions fenced us and its state read (0.1-0.3 s here,
# longer for years of minutes on a loaded host): fenced with no freeze to explain it, the stage
# watches the claim this long before it fences anyone back; a freeze gave a replacement its time.
CLAIM_GRACE_S = 5.0
CLAIM_POLL_S = 0.5

# A publisher and the group consumer it sends offsets through, made anew after a hang.
MakeClients = Callable[[], "tuple[Publisher, Group]"]


class Clients:
    """The current publisher and group consumer (None once let go of), and their recovery."""

    def __init__(self, s: RunSettings, cluster: Cluster, make: MakeClients, batch: Batch,
                 report: Report, clock: Callable[[], float], sleep: Callable[[float], bool],
                 frozen: Callable[[float], float]) -> None:
        self.s, self.cluster, self.make, self.batch, self.report = s, cluster, make, batch, report
        self.clock, self.sleep, self.frozen = clock, sleep, frozen
        self.state_topic = state_topic_name(s.output_topic)
        self.sink: Publisher | None = None  # None: let go of (hung, fenced, retired)
        self.group: Group | None = None
        self.recovery = Recovery()
        self.made_at = 0.0  # when the current ones were made
        # Who this process is in the state topic's claim: unique per start, so a restart on the
        # same host is another instance.
        self.instance = uuid.uuid4().hex[:16]

    # -- made, fenced in, the state read back, the claim ------------------------------------------
    def start(self) -> None:
        """The group consumer and the sink, fenced and with the state read back: at start, and
        in place of clients whose call hung."""
        sink, group = self.make()
        try:
            sink.init()  # fences a predecessor first: only then is the state settled
            self.read_state(group)  # may refuse the start: then nothing is published
            if self.s.delivery == "exactly-once":
                # Next, before the Spark job: the sooner the claim is in the state topic, the
                # narrower the window in which a predecessor that hung could miss it (the state
                # read before it takes a fraction of a second).
                value = claim_value(self.instance, socket.gethostname(), os.getpid(),
                                    datetime.now(UTC).isoformat(timespec="seconds"))
                transaction(sink, [OutRecord(self.state_topic, CLAIM_KEY, value)],
                            self.s.input_topic, {}, None)
        except BaseException:
            close(sink, group)
            raise
        self.sink, self.group = sink, group
        self.made_at = self.clock()

    def read_state(self, group: Group) -> None:
        """Read the state back and check it against the cluster. Runs after init_transactions:
        a predecessor's open transaction is aborted, so state and group offsets are settled.
        `logcount state show` reads and decides the same way (pipeline/state_view.py)."""
        t0 = self.clock()
        facts = self.cluster.facts(group)
        progress, hours = decode_records(facts.table, self.state_topic)
        start = check_start(progress, hours, facts.start, start_facts.wanted(self.s),
                            decode_series(facts.table))
        for line in start.warnings:
            log.warning("%s", line)
        state = start.state
        self.batch.restart(state, start.must_commit,
                           [(k, None) for k in start.tombstones] + start.records)
        self.report.metrics.state_minutes.set(state.cells())
        self.report.closed(state)  # --emit-final: the restored last close, before any batch
        series = state.series
        if series is not None and self.s.horizon_minutes is None:
            log.warning("--group-by without --lateness-horizon: the state keeps every (minute, "
                        "series) total for good, up to %d series more each minute; set a "
                        "horizon to bound it (docs/contract.md)", series.max_series + 1)
        log.info("state of %s: %d minute totals%s, offsets %s, restored in %.2fs",
                 self.state_topic, state.cells(),
                 "" if series is None else f" in {series.named} named series",
                 _span(state.offsets), self.clock() - t0)

    # -- let go of: a hang, a fencing, an outage ----------------------------------------------
    def let_go(self) -> None:
        """Let go of the clients (closed on threads of their own, which may never return)."""
        sink, group, self.sink, self.group = self.sink, self.group, None, None
        if sink is not None:  # None: the hang was in replacing them (start() closed them)
            sink.abandon()
        if group is not None:
            threading.Thread(target=_best_effort, args=(group.close,), daemon=True).start()

    def hung(self, hung: HungClientError) -> None:
        """A librdkafka call hung: let go of the clients, and count it; one hang too many is the
        stage's exit."""
        self.report.metrics.hung_calls.labels(call=hung.call or "unknown").inc()
        self.let_go()
        if not self.recovery.hung():
            raise hung
        self.report.aborted()
        log.warning("%s; replacing the stage's Kafka clients unless another instance took over",
                    hung)

    def retire(self) -> None:
        """Let go of clients that saw the cluster fail, between two batches: the loop makes
        new ones (recover) before the next transaction, retrying until it answers."""
        self.recovery.outage()
        self.let_go()  # nothing open: flushes nothing, on a thread of its own all the same
        log.info("replacing the stage's Kafka clients before the next transaction (they saw "
                 "the cluster fail), unless another instance took over")

    def fenced(self, fenced: FencedError) -> None:
        """Our producer was fenced. Unless another instance took over (the claim check in
        recover), the broker fenced it for our own transaction: aborted after
        transaction.timeout.ms, most often because this process stood stopped longer than that.
        The batch is abandoned (nothing of it reached the in-memory state, which moves only
        after a commit) and the clients are replaced like hung ones."""
        timeout_s = getattr(self.sink, "transaction_timeout_s", None)
        self.let_go()
        frozen = self.frozen(self.batch.started)
        cause = ("fenced_after_freeze" if timeout_s is not None and frozen >= timeout_s
                 else "fenced")
        if not self.recovery.fenced(cause):
            raise FatalKafkaError(
                f"the producer was fenced {self.recovery.fences} times without a commit in "
                f"between (last: {fenced}); giving up: the cause is not passing") from fenced
        self.report.aborted()
        if cause == "fenced_after_freeze":
            why = (f"this process was stopped for {frozen:.1f}s, longer than "
                   f"transaction.timeout.ms ({timeout_s:.0f}s), and the broker aborted its "
                   f"transaction")
        else:
            stopped = f" (the process was stopped for {frozen:.1f}s)" if frozen else ""
            why = f"the broker fenced the producer{stopped}: {fenced}"
        log.warning("producer fenced, cause %s: %s; abandoning batch %d and replacing the "
                    "Kafka clients unless another instance took over", cause, why,
                    self.batch.number)

    # -- replaced --------------------------------------------------------------------------------
    def recover(self) -> None:
        """After a hang: what a restart does, without its Spark start. First the rule that keeps
        a superseded instance from coming back: if the state topic's last claim is not this
        instance's, another one took the transactional id while this one hung (an orchestrator
        replaced it): exit without publishing (TakenOverError). Else a new producer with the
        same transactional.id fences the hung one and settles its transaction (committed if its
        commit had reached the coordinator, else aborted), and the state is read back, so
        nothing in memory from before the hang is trusted."""
        s = self.s
        if s.delivery == "exactly-once":
            holder = claimant(self.cluster.state_table())
            if holder == self.instance and self.recovery.cause == "fenced":
                holder = self.watch_claim()
            if holder != self.instance:
                while_ = {"hung_call": "this one's Kafka call hung",
                          "after_outage": "the cluster was away"}.get(
                              self.recovery.cause or "", "its producer was fenced")
                raise TakenOverError(
                    f"another instance ({holder or 'unknown'}) took transactional id {s.txn_id} "
                    f"while {while_}; this instance stops without publishing anything more")
        self.start()
        cause = self.recovery.recovered()
        self.report.metrics.producer_recoveries.labels(cause=cause).inc()
        log.info("Kafka clients replaced (%s); batch %d is planned again from the committed "
                 "state", cause, self.batch.number + 1)

    def watch_claim(self) -> str | None:
        """Fenced with no freeze to explain it: the claim's holder once another instance
        claims, or still this one when CLAIM_GRACE_S (or a stop) ends the watch."""
        holder: str | None = self.instance
        stopped = False

        def claimed() -> bool | None:
            nonlocal holder
            if stopped:  # a stop ends the watch without another look
                return True
            holder = claimant(self.cluster.state_table())
            return True if holder != self.instance else None

        def pause(seconds: float) -> None:
            nonlocal stopped
            stopped = bool(self.sleep(seconds))

        # The first look was the caller's: the watch begins with a pause.
        watch = Backoff(CLAIM_POLL_S, give_up_s=CLAIM_GRACE_S, clock=self.clock).begin()
        first = watch.failed()
        if first is None:
            return holder
        pause(first)
        poll(claimed, watch, sleep=pause)
        return holder

    def close(self) -> None:
        close(self.sink, self.group)


def close(sink: Publisher | None, group: Group | None) -> None:
    if sink is not None:
        sink.close()
    if group is not None:
        with contextlib.suppress(Exception):  # never mask the error that got us here
            group.close()


def _best_effort(fn: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        fn()


def _span(offsets: dict[int, int]) -> str:
    return " ".join(f"p{p}:{o}" for p, o in sorted(offsets.items())) or "-"
