"""One batch (pipeline/batch.py) step by step over fakes: the transaction's calls in their order,
the abort of a failed publish, the state advanced only after the commit, and which failures are
planned again (a step failed) and which end the stage; and the Spark adapter (pipeline/compute.py)
turning Spark's and py4j's errors into the project's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from py4j.protocol import Py4JError

from logcount.connectors.transactional_sink import OutRecord
from logcount.core.errors import (
    AbortableKafkaError,
    AuthorizationError,
    ComputeError,
    DependencyError,
    FencedError,
)
from logcount.pipeline import compute
from logcount.pipeline.batch import (
    Batch,
    JobFailed,
    PlanFailed,
    PublishAborted,
    transaction,
)
from logcount.pipeline.job import BatchResult, MalformedRef
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.state import state_topic_name
from tests.support.fakes import FakeGroup, Rig, rig

STEPS = ["begin", "produce", "send_offsets", "commit"]


class Recorder:
    """A Publisher that records its calls, and the state's offsets at each; `fail` maps a step
    to what it raises (once)."""

    def __init__(self, batch: Batch | None = None,
                 fail: dict[str, BaseException] | None = None) -> None:
        self.batch, self.fail = batch, dict(fail or {})
        self.calls: list[str] = []
        self.offsets_at: dict[str, dict[int, int]] = {}
        self.records: list[OutRecord] = []
        self.sent: tuple[str, dict[int, int], object] | None = None

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.batch is not None:
            self.offsets_at[name] = dict(self.batch.state.offsets)
        if name in self.fail:
            raise self.fail.pop(name)

    def init(self) -> None:
        self._call("init")

    def begin(self) -> None:
        self._call("begin")

    def produce(self, records: Sequence[OutRecord]) -> None:
        self.records = list(records)
        self._call("produce")

    def send_offsets(self, topic: str, offsets: Mapping[int, int],
                     group_metadata: object) -> None:
        self.sent = (topic, dict(offsets), group_metadata)
        self._call("send_offsets")

    def commit(self) -> None:
        self._call("commit")

    def abort(self) -> None:
        self._call("abort")

    def close(self) -> None:
        pass

    def abandon(self) -> None:
        pass


def _started(**settings) -> Rig:
    """A stage over fakes, started (fenced in, its state read back, its claim committed): its
    batch is ready to run through any publisher."""
    r = rig(**settings)
    r.stage.start()
    return r


def _abortable() -> AbortableKafkaError:
    return AbortableKafkaError("the transaction must be aborted")


def test_the_transaction_is_begin_produce_send_offsets_commit():
    rec = Recorder()
    transaction(rec, [OutRecord("out", b"k", b"v")], "in", {0: 5}, "meta")
    assert rec.calls == STEPS
    assert rec.sent == ("in", {0: 5}, "meta")


@pytest.mark.parametrize("step", STEPS)
def test_an_abortable_error_at_any_step_aborts_and_goes_no_further(step):
    rec = Recorder(fail={step: _abortable()})
    with pytest.raises(AbortableKafkaError):
        transaction(rec, [], "in", {0: 5}, "meta")
    assert rec.calls == STEPS[:STEPS.index(step) + 1] + ["abort"]


def test_a_batch_publishes_its_records_and_offsets_then_advances():
    r = _started()
    batch = r.stage.batch
    rec = Recorder(batch)
    assert batch.run(rec, FakeGroup()) is True
    assert rec.calls == STEPS
    assert rec.sent == ("in", {0: 10}, "group-metadata")
    topics = {record.topic for record in rec.records}
    assert topics == {"out", state_topic_name("out")}
    # Every step saw the old state: it moved only after the commit returned.
    assert rec.offsets_at == {name: {0: 0} for name in STEPS}
    assert batch.state.offsets == {0: 10}
    assert r.compute.jobs == [[(0, 0, 10)]]


@pytest.mark.parametrize("step", STEPS)
def test_a_publish_that_must_abort_leaves_the_state_and_is_planned_again(step):
    r = _started()
    batch = r.stage.batch
    rec = Recorder(batch, fail={step: _abortable()})
    with pytest.raises(PublishAborted) as failed:
        batch.run(rec, FakeGroup())
    assert isinstance(failed.value.cause, AbortableKafkaError)
    assert rec.calls[-2:] == [step, "abort"]
    assert batch.state.offsets == {0: 0}
    # Planned again from the old offsets: the same range, and this time it commits.
    assert batch.run(rec, FakeGroup()) is True
    assert r.compute.jobs == [[(0, 0, 10)], [(0, 0, 10)]]
    assert batch.state.offsets == {0: 10}


def test_a_fenced_producer_is_not_aborted_nor_planned_again_here():
    r = _started()
    batch = r.stage.batch
    rec = Recorder(batch, fail={"commit": FencedError("fenced")})
    with pytest.raises(FencedError):
        batch.run(rec, FakeGroup())
    assert "abort" not in rec.calls
    assert batch.state.offsets == {0: 0}


def test_a_failed_job_is_a_step_to_plan_again_and_nothing_is_published():
    r = _started()
    batch = r.stage.batch
    r.compute.errors = [ComputeError("an executor was lost")]
    rec = Recorder(batch)
    with pytest.raises(JobFailed) as failed:
        batch.run(rec, FakeGroup())
    assert failed.value.doing == "the Spark job"
    assert rec.calls == [] and batch.state.offsets == {0: 0}


def test_a_cluster_that_does_not_answer_the_plan_is_a_step_to_plan_again():
    r = _started()
    batch = r.stage.batch

    def away(parts, latest):
        raise DependencyError("the broker is away")

    batch.cluster.input_offsets = away  # type: ignore[method-assign]
    with pytest.raises(PlanFailed):
        batch.run(Recorder(batch), FakeGroup())
    assert r.compute.jobs == []


def test_executors_refused_by_the_cluster_end_the_stage():
    r = _started()
    r.compute.errors = [AuthorizationError("not authorized")]
    with pytest.raises(AuthorizationError):
        r.stage.batch.run(Recorder(r.stage.batch), FakeGroup())


def test_the_loop_plans_a_failed_job_again_and_then_commits():
    r = rig()
    r.compute.errors = [ComputeError("an executor was lost")]
    assert r.stage.run() == 0
    assert r.compute.jobs == [[(0, 0, 10)], [(0, 0, 10)]]
    assert r.broker.group == {0: 10}


def test_the_loop_plans_a_publish_that_must_abort_again():
    r = _started()
    stage = r.stage
    rec = Recorder(stage.batch, fail={"commit": _abortable()})
    stage.clients.sink = rec
    stage.loop.run()  # --once: until nothing is left
    assert rec.calls == STEPS + ["abort"] + STEPS  # backed off, planned again, committed
    assert r.clock.sleeps == [0.5] and stage.batch.state.offsets == {0: 10}


# -- the Spark adapter ---------------------------------------------------------------------------
def test_spark_errors_become_a_compute_error_with_the_same_text(monkeypatch):
    adapter = compute.SparkCompute.__new__(compute.SparkCompute)
    adapter.s, adapter.session, adapter.options = rig().stage.s, None, {}
    adapter.late_seen = False

    def lost(*args, **kwargs):
        raise Py4JError("An error occurred while calling o42.collect")

    monkeypatch.setattr(compute, "compute_batch", lost)
    with pytest.raises(ComputeError, match="^An error occurred while calling o42.collect$"):
        adapter.batch([], None)


def test_a_batch_with_late_lines_makes_the_next_apply_the_bound_at_once(monkeypatch):
    """compute_batch applies the lateness bound on demand (a second job when a batch counted an
    earlier minute); after a batch with late lines the adapter asks for it at once, and after
    one without, on demand again."""
    adapter = compute.SparkCompute.__new__(compute.SparkCompute)
    adapter.s, adapter.session, adapter.options = rig().stage.s, None, {}
    adapter.late_seen = False
    asked: list[bool] = []
    results = [BatchResult(malformed=[MalformedRef(0, 5, "late", b"x", 1)]), BatchResult(),
               BatchResult(malformed=[MalformedRef(0, 6, "bad timestamp", b"x", 1)])]

    def job(*args, late_first, **kwargs):
        asked.append(late_first)
        return results[len(asked) - 1]

    monkeypatch.setattr(compute, "compute_batch", job)
    for _ in results:
        adapter.batch([OffsetRange(0, 0, 10)], 100)
    assert asked == [False, True, False] and adapter.late_seen is False


def test_executors_refused_become_an_authorization_error():
    text = ("Job aborted due to stage failure: ...\n"
            "  org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to "
            "access topics: [in]\n  at ...")
    err = compute.job_error(Py4JError(text))
    assert isinstance(err, AuthorizationError)
    assert str(err) == ("the Spark job's Kafka reads: not authorized: TopicAuthorizationException"
                        ": Not authorized to access topics: [in]; grant the ACLs in "
                        "docs/deploy.md")
    assert isinstance(compute.job_error(Py4JError("lost")), ComputeError)
