"""In-memory fakes of what the stage works through (pipeline/driver.py's Seams), for unit tests
of the batch loop in milliseconds: a broker that keeps the state topic's table and the group's
offsets and applies a transaction only at its commit, confluent-kafka's transactional Producer
(driven by the real TransactionalSink), the group consumer, and the Spark job. Each fake of a
protocol (pipeline/batch.py's Group, Cluster, Compute) names it as its base, so mypy checks
the fake against it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import KafkaError, KafkaException, Producer

from logcount.connectors.transactional_sink import TransactionalSink
from logcount.core.settings import RunSettings
from logcount.pipeline.batch import Cluster, Compute, Group
from logcount.pipeline.driver import Seams, Stage
from logcount.pipeline.hour_records import minute_index
from logcount.pipeline.job import BatchResult
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.start_facts import Facts
from logcount.pipeline.state import StartFacts, state_topic_name

MINUTE = minute_index("2026-11-26 09:00")


def abortable(doing: str = "commit") -> KafkaException:
    """What librdkafka raises when the transaction must be aborted."""
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{doing} timed out",
                                     txn_requires_abort=True))


def fenced() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))


@dataclass
class Broker:
    """The cluster as the stage sees it: one input partition, the committed state table and
    group offsets, and every transactional call in order (`calls`)."""

    end: int = 10
    table: dict[bytes, bytes] = field(default_factory=dict)
    group: dict[int, int] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    producers: list[FakeProducer] = field(default_factory=list)
    # call name -> what the next calls of that name raise (or do), in order, across producers
    faults: dict[str, list[Callable[[], None]]] = field(default_factory=dict)

    def fault(self, call: str) -> None:
        todo = self.faults.get(call)
        if todo:
            todo.pop(0)()


class FakeProducer:
    """confluent_kafka.Producer's transactional calls, against a Broker."""

    def __init__(self, broker: Broker, state_topic: str) -> None:
        self.broker, self.state_topic = broker, state_topic
        self.pending: list[tuple[str, bytes | None, bytes]] = []
        self.offsets: dict[int, int] = {}
        broker.producers.append(self)

    def _call(self, name: str) -> None:
        self.broker.calls.append(name)
        self.broker.fault(name)

    def init_transactions(self, timeout: float) -> None:
        self._call("init")

    def begin_transaction(self) -> None:
        self._call("begin")
        self.pending, self.offsets = [], {}

    def produce(self, topic: str, value: bytes | None, key: bytes) -> None:
        self._call("produce")
        self.pending.append((topic, value, key))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def send_offsets_to_transaction(self, offsets, metadata, timeout: float) -> None:
        self._call("send_offsets")
        self.offsets.update({tp.partition: tp.offset for tp in offsets})

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit")
        for topic, value, key in self.pending:
            if topic == self.state_topic:
                if value is None:
                    self.broker.table.pop(key, None)
                else:
                    self.broker.table[key] = value
        self.broker.group.update(self.offsets)
        self.pending, self.offsets = [], {}

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort")
        self.pending, self.offsets = [], {}

    def flush(self, timeout: float = 0) -> int:
        return 0


class FakeGroup(Group):
    def consumer_group_metadata(self) -> object:
        return "group-metadata"

    def close(self) -> None:
        pass


class FakeCluster(Cluster):
    def __init__(self, broker: Broker, s: RunSettings) -> None:
        self.broker, self.s = broker, s

    def connect(self) -> None:
        pass

    def ensure_topics(self) -> None:
        pass

    def input_partitions(self) -> list[int]:
        return [0]

    def input_offsets(self, parts: list[int], latest: bool) -> dict[int, int]:
        return {0: self.broker.end if latest else 0}

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        return {t: f"id-{t}" for t in topics}

    def state_table(self) -> dict[bytes, bytes]:
        return dict(self.broker.table)

    def facts(self, group: Group) -> Facts:
        s = self.s
        start = StartFacts(f"id-{s.input_topic}", f"id-{s.output_topic}", {0: 0},
                           {0: self.broker.end}, dict(self.broker.group))
        return Facts(dict(self.broker.table), [0], start, (0, 0))


class FakeCompute(Compute):
    """Counts every record of a range as one line of MINUTE; `errors` are raised first, in
    order, one per job."""

    def __init__(self) -> None:
        self.jobs: list[list[tuple[int, int, int]]] = []
        self.errors: list[BaseException] = []

    def check_format(self) -> None:
        pass

    def settle(self) -> None:
        pass

    def ready(self) -> None:
        pass

    def cancel(self) -> None:
        pass

    def batch(self, ranges: list[OffsetRange], late_before: int | None) -> BatchResult:
        self.jobs.append([(r.partition, r.start, r.end) for r in ranges])
        if self.errors:
            raise self.errors.pop(0)
        n = sum(r.size for r in ranges)
        return BatchResult(counts={MINUTE: n} if n else {}, ranges=list(ranges), records=n)


class Clock:
    """A clock that moves only when the stage sleeps; `sleeps` lists the delays."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        self.now += seconds
        return False


@dataclass
class Rig:
    stage: Stage
    broker: Broker
    compute: FakeCompute
    clock: Clock


def rig(broker: Broker | None = None, **settings) -> Rig:
    """A Stage over fakes, `--once`, exactly-once, with the real TransactionalSink."""
    s = RunSettings(**{"input_topic": "in", "output_topic": "out", "group_id": "g",
                       "once": True, **settings})
    broker = broker or Broker()
    compute, clock = FakeCompute(), Clock()
    state = state_topic_name(s.output_topic)

    def clients():
        # The sink types its producer as confluent-kafka's class: the fake has its calls.
        sink = TransactionalSink("fake:9092", s.txn_id, {}, make_producer=lambda conf:
                                 cast(Producer, FakeProducer(broker, state)))
        return sink, FakeGroup()

    stage = Stage(s, Seams(FakeCluster(broker, s), clients, compute, clock=clock,
                           sleep=clock.sleep, frozen=lambda since: 0.0, serve_metrics=False))
    stage.stop.install = lambda: None  # type: ignore[method-assign]  # pytest keeps its signals
    return Rig(stage, broker, compute, clock)


def hang_forever() -> None:
    """A librdkafka call that never returns (the test shortens the watchdog)."""
    threading.Event().wait()
