"""The batch loop (pipeline/batch.py, loop.py, clients.py) over fakes (tests/support/fakes.py):
the transaction's call order, the abort path, the backoff and give-up, hang and fencing recovery,
in milliseconds.
The real TransactionalSink drives a fake Producer, so the order under test is the sink's own."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from logcount.connectors import transactional_sink
from logcount.core.errors import (
    ComputeError,
    DependencyError,
    FatalKafkaError,
    HungClientError,
    TakenOverError,
)
from logcount.pipeline import clients, loop
from logcount.pipeline.state import CLAIM_KEY, claim_value
from tests.support.fakes import Broker, abortable, fenced, hang_forever, rig

CLAIM = ["init", "begin", "produce", "commit"]  # the claim: a state record, no offsets
BATCH = ["begin", "produce", "produce", "produce", "send_offsets", "commit"]


def _raise(exc: BaseException):
    def go() -> None:
        raise exc
    return go


def _metric(stage, name: str, **labels: str) -> float:
    """A sample of the stage's /metrics registry (0 when it has none yet)."""
    return stage.metrics.registry.get_sample_value(name, labels) or 0.0


def _recoveries(stage, cause: str) -> float:
    return _metric(stage, "logcount_producer_recoveries_total", cause=cause)


def test_one_batch_is_begin_produce_send_offsets_commit_in_that_order():
    r = rig()
    assert r.stage.run() == 0
    produced = r.broker.calls[len(CLAIM):].count("produce")
    assert produced >= 2  # the minute's total and the state records
    assert r.broker.calls == CLAIM + ["begin"] + ["produce"] * produced + ["send_offsets",
                                                                           "commit"]
    assert r.broker.group == {0: 10}  # the group's offset came with the commit
    assert r.compute.jobs == [[(0, 0, 10)]]


def test_an_abortable_commit_aborts_and_the_batch_is_planned_again_from_the_old_offsets():
    broker = Broker(faults={"commit": [lambda: None, _raise(abortable())]})  # claim ok, batch not
    r = rig(broker)
    assert r.stage.run() == 0
    calls = broker.calls
    first = calls.index("send_offsets")
    assert calls[first + 1:first + 3] == ["commit", "abort"]  # aborted before anything else
    assert calls.count("commit") == 3 and calls.count("abort") == 1
    # The state did not advance: the second job reads the same range, and the group's offset is
    # the second commit's.
    assert r.compute.jobs == [[(0, 0, 10)], [(0, 0, 10)]]
    assert broker.group == {0: 10}
    assert r.clock.sleeps[0] == loop.RETRY_FIRST_S


def test_an_abortable_send_offsets_aborts_without_committing():
    broker = Broker(faults={"send_offsets": [_raise(abortable("send_offsets"))]})
    r = rig(broker)
    assert r.stage.run() == 0
    first = broker.calls.index("send_offsets")
    assert broker.calls[first + 1] == "abort"
    assert r.compute.jobs == [[(0, 0, 10)], [(0, 0, 10)]]


def test_state_moves_only_after_the_commit():
    """The in-memory offsets during the transaction are still the old ones."""
    r = rig()
    seen = []
    broker = r.broker
    broker.faults["commit"] = [lambda: None,
                               lambda: seen.append(dict(r.stage.state.offsets))]
    r.stage.run()
    assert seen == [{0: 0}]  # the start's offsets while the batch's commit is called
    assert r.stage.state.offsets == {0: 10}


def test_failing_jobs_back_off_then_give_up_after_five_minutes():
    r = rig()
    r.compute.errors = [ComputeError("the JVM is gone")] * 10_000
    with pytest.raises(DependencyError, match="the Spark job failed .* times in a row over 300s"):
        r.stage.run()
    assert r.clock.sleeps[:3] == [0.5, 1.0, 1.0]
    assert sum(r.clock.sleeps) == pytest.approx(loop.GIVE_UP_AFTER_S - 0.5, abs=1.0)
    assert _metric(r.stage, "logcount_batches_aborted_total") == len(r.clock.sleeps) + 1
    # The clients that saw the failure were replaced once, not at every retry.
    assert _recoveries(r.stage, "after_outage") == 1


def test_a_job_that_succeeds_again_resets_the_backoff():
    r = rig()
    r.compute.errors = [ComputeError("lost"), ComputeError("lost")]
    assert r.stage.run() == 0
    assert r.clock.sleeps == [0.5, 1.0]
    assert r.stage.backoff.failures == 0 and r.stage.backoff.since is None


def test_a_bug_in_pure_code_is_not_retried_as_a_dependency_failure():
    r = rig()
    r.compute.errors = [KeyError("minute")]  # e.g. batch_result reading a row it never had
    with pytest.raises(KeyError):
        r.stage.run()
    assert len(r.compute.jobs) == 1 and r.clock.sleeps == []
    assert _metric(r.stage, "logcount_batches_aborted_total") == 0


def _short_watchdog(monkeypatch) -> None:
    monkeypatch.setattr(transactional_sink, "SEND_OFFSETS_TIMEOUT_S", 0.01)
    monkeypatch.setattr(transactional_sink, "HANG_GRACE_S", 0.05)


def test_a_hang_is_recovered_in_process_with_new_clients(monkeypatch):
    _short_watchdog(monkeypatch)
    broker = Broker(faults={"send_offsets": [hang_forever]})
    r = rig(broker)
    assert r.stage.run() == 0
    assert len(broker.producers) == 2  # the hung one let go of, a new one fenced it
    assert broker.calls.count("init") == 2
    assert _metric(r.stage, "logcount_kafka_hung_calls_total",
                   call="send_offsets_to_transaction") == 1
    assert _recoveries(r.stage, "hung_call") == 1
    assert r.compute.jobs == [[(0, 0, 10)], [(0, 0, 10)]] and broker.group == {0: 10}


def test_a_hang_after_another_instance_claimed_is_the_takeover_exit(monkeypatch):
    _short_watchdog(monkeypatch)
    broker = Broker()

    def hang_after_takeover() -> None:
        broker.table[CLAIM_KEY] = claim_value("someone-else", "h", 1, "now")
        hang_forever()

    broker.faults["send_offsets"] = [hang_after_takeover]
    r = rig(broker)
    with pytest.raises(TakenOverError, match="someone-else"):
        r.stage.run()
    assert len(broker.producers) == 1  # no new producer: it would fence the newer instance
    assert broker.group == {}


def test_a_fourth_hang_without_a_commit_is_the_exit(monkeypatch):
    _short_watchdog(monkeypatch)
    broker = Broker(faults={"send_offsets": [hang_forever] * 4})
    r = rig(broker)
    with pytest.raises(HungClientError):
        r.stage.run()
    assert _recoveries(r.stage, "hung_call") == 3
    assert len(broker.producers) == 4 and broker.group == {}


def test_fenced_by_its_own_timeout_is_recovered_and_a_fourth_fencing_is_fatal():
    broker = Broker(faults={"commit": [lambda: None, _raise(fenced())]})
    r = rig(broker)
    assert r.stage.run() == 0
    assert _recoveries(r.stage, "fenced") == 1 and broker.group == {0: 10}
    # No freeze explains it: the claim was watched for CLAIM_GRACE_S before fencing anyone back.
    assert r.clock.sleeps == [clients.CLAIM_POLL_S] * 10

    broker = Broker(faults={"commit": [lambda: None] + [_raise(fenced()), lambda: None] * 4})
    r = rig(broker)
    with pytest.raises(FatalKafkaError, match="fenced 4 times without a commit"):
        r.stage.run()
    assert _recoveries(r.stage, "fenced") == 3 and broker.group == {}


def test_a_retriable_commit_error_is_retried_in_the_transaction_not_aborted(monkeypatch):
    monkeypatch.setattr(transactional_sink, "RETRY_PAUSE_S", 0.01)
    retriable = KafkaException(KafkaError(KafkaError._TIMED_OUT, "commit timed out",
                                          retriable=True))
    broker = Broker(faults={"commit": [lambda: None, _raise(retriable)]})  # claim ok, batch once
    r = rig(broker)
    assert r.stage.run() == 0
    assert "abort" not in broker.calls and broker.calls[-2:] == ["commit", "commit"]
    assert r.compute.jobs == [[(0, 0, 10)]] and broker.group == {0: 10}
    assert _metric(r.stage, "logcount_batches_aborted_total") == 0


def test_a_stop_during_a_failed_step_ends_the_loop_without_a_retry():
    r = rig()
    job = r.compute.batch

    def cancelled_by_sigterm(ranges, late_before):
        if len(r.compute.jobs) == 1:  # the second job: SIGTERM came, and cancelled it
            r.stage.stop.event.set()
        return job(ranges, late_before)

    r.compute.batch = cancelled_by_sigterm  # type: ignore[method-assign]
    r.compute.errors = [ComputeError("lost"), ComputeError("Job cancelled")]
    assert r.stage.run() == 0
    assert r.compute.jobs == [[(0, 0, 10)], [(0, 0, 10)]] and r.broker.group == {}
    assert r.clock.sleeps == [loop.RETRY_FIRST_S]
    assert _metric(r.stage, "logcount_batches_aborted_total") == 1


def test_a_latency_target_paces_a_caught_up_stage_by_its_batches_lengths():
    """A line arrives during every wait (one record): each caught-up batch is followed by the
    target less the slowest batch so far, measured from its own start."""
    r = rig(once=False, target_latency="250ms", min_batch_interval=0.0)
    lengths = iter([0.05, 0.09, 0.07, 0.06])
    count = r.compute.batch

    def timed(ranges, late_before):
        r.clock.now += next(lengths)
        return count(ranges, late_before)

    def arrive(seconds: float) -> bool:
        r.broker.end += 1
        if len(r.compute.jobs) == 4:
            r.stage.stop.event.set()
        return r.clock.sleep(seconds)

    r.compute.batch = timed  # type: ignore[method-assign]
    r.stage.loop.sleep = arrive
    assert r.stage.run() == 0
    assert len(r.compute.jobs) == 4
    assert r.clock.sleeps[:3] == pytest.approx([0.25 - 0.05 - 0.05, 0.25 - 0.09 - 0.09,
                                                0.25 - 0.09 - 0.07])
    assert r.broker.group == {0: 13}  # every line that arrived was counted


def test_without_a_target_an_unpaced_stage_runs_back_to_back():
    r = rig(once=False, min_batch_interval=0.0)
    count = r.compute.batch

    def busy(ranges, late_before):  # the input grows while a batch runs: never idle
        r.broker.end += 1
        if len(r.compute.jobs) == 2:  # the third batch: the loop stops after it
            r.stage.stop.event.set()
        return count(ranges, late_before)

    r.compute.batch = busy  # type: ignore[method-assign]
    assert r.stage.run() == 0
    assert r.clock.sleeps == [] and len(r.compute.jobs) == 3
