"""Input for the stage: lines as given (`write_lines`), or a mixed input topic and, by
construction, what the stage must make of it (`build_input`); for the sink, an output topic
with totals as a stage publishes them (`create_topic`, `write_totals`).

The expectation is not computed by logcount's parser: every line is generated from a known
(minute, level, kind) and the test counts what it generated. Delivery reports give each
malformed line's (partition, offset) for the DLQ check.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import NewTopic

from logcount.connectors import kafka_io
from tests.support.readers import held_topics
from tests.support.run import wait_for

MALFORMED = (
    b"",
    b"\x00\xff\xfe binary garbage",
    b"2017-02-30 10:00:00 ERROR february 30th",
    b"2017-07-30 25:00:00 ERROR hour 25",
    b"2017-07-30 14:09:\xff8 ERROR non-utf-8 in the timestamp",
    b"2017-07-30 14:09:08",
    b"x" * 5000,
)


@dataclass
class Input:
    topic: str
    expected: Counter = field(default_factory=Counter)
    malformed: set = field(default_factory=set)  # (partition, offset) of committed malformed
    aborted_errors: int = 0
    lines: int = 0
    # partition -> the newest minute of its committed well-formed lines, of any level
    newest: dict = field(default_factory=dict)
    newest_other: dict = field(default_factory=dict)  # the same, of the other levels' lines


def _line(rng: random.Random, i: int, level: bytes) -> tuple[bytes, str]:
    minute = f"2017-07-30 {10 + i % 5:02d}:{(i * 7) % 60:02d}"
    line = b"%s:%02d %s message %d" % (minute.encode(), rng.randrange(60), level, i)
    if i % 11 == 0:
        line += b" \xc3\x28\xff not utf-8"
    if i % 13 == 0:
        line += b"\r"
    return line, minute + ":00"


class _Writer:
    def __init__(self, inp: Input, producer: Producer, counted: bool) -> None:
        self.inp, self.p, self.counted = inp, producer, counted

    def write(self, value: bytes, partition: int, minute: str | None, malformed: bool,
              seen: str | None = None) -> None:
        """`minute`: a counted line's; `seen`: the time of a well-formed line of another level."""
        inp, counted = self.inp, self.counted
        at = minute or seen
        if counted and at and not malformed:
            inp.newest[partition] = max(inp.newest.get(partition, at), at)
            if not minute:
                inp.newest_other[partition] = max(inp.newest_other.get(partition, at), at)

        def on_delivery(err, msg):
            assert err is None, err
            if counted and malformed:
                inp.malformed.add((msg.partition(), msg.offset()))

        self.p.produce(inp.topic, value, partition=partition, on_delivery=on_delivery)
        if counted and minute:
            inp.expected[minute] += 1
        if not counted and minute:
            inp.aborted_errors += 1
        inp.lines += 1


def build_input(bootstrap: str, topic: str, txn_id: str, n_plain: int = 1200,
                n_txn: int = 600, seed: int = 3) -> Input:
    """4 partitions: plain records, committed and aborted transactions, malformed lines.

    Partition 3 ends with an aborted transaction only (its end sits right after an abort
    marker); every other partition ends right after a commit marker.
    """
    rng = random.Random(seed)
    kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, 4)
    inp = Input(topic)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    w = _Writer(inp, plain, counted=True)
    levels = (b"ERROR", b"INFO ", b"WARN ", b"DEBUG", b"ERRORS")
    for i in range(n_plain):
        if i % 17 == 0:
            w.write(MALFORMED[i % len(MALFORMED)], i % 4, None, malformed=True)
            continue
        level = levels[i % len(levels)]
        line, minute = _line(rng, i, level)
        w.write(line, i % 4, minute if level == b"ERROR" else None, malformed=False,
                seen=minute)
    assert plain.flush(30) == 0

    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    txn.init_transactions(30)
    for round_ in range(3):
        for committed in (True, False):
            txn.begin_transaction()
            w = _Writer(inp, txn, counted=committed)
            for j in range(n_txn // 6):
                i = 100_000 * (round_ + 1) + j + (50_000 if committed else 0)
                if committed and j % 19 == 0:
                    w.write(MALFORMED[j % len(MALFORMED)], j % 3, None, malformed=True)
                    continue
                line, minute = _line(rng, i, b"ERROR")
                w.write(line, j % 3, minute, malformed=False)
            if committed:
                txn.commit_transaction(30)
            else:
                txn.flush(30)
                txn.abort_transaction(30)
    # Partition 3: nothing after its plain records but one aborted transaction.
    txn.begin_transaction()
    w = _Writer(inp, txn, counted=False)
    for j in range(50):
        line, minute = _line(rng, 900_000 + j, b"ERROR")
        w.write(line, 3, minute, malformed=False)
    txn.flush(30)
    txn.abort_transaction(30)
    # The coordinator writes the markers after abort_transaction returns: until then a
    # read_committed end (the last stable offset) stops before them (p3:50, not 101; seen once).
    wait_for(lambda: not held_topics(bootstrap, [topic]), 30, 0.05,
             what=f"the markers of {topic}'s last transaction")
    return inp


def write_lines(bootstrap: str, topic: str, lines: Iterable[bytes | str],
                partitions: int | None = None) -> None:
    """Plain, idempotent writes of `lines`, in order; `partitions`: make the topic first."""
    if partitions is not None:
        kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for line in lines:
        p.produce(topic, line.encode() if isinstance(line, str) else line)
    assert p.flush(60) == 0


# -- the sink's input ----------------------------------------------------------------------------


def minute(i: int) -> str:
    return f"2024-05-{1 + i // 1440:02d} {i // 60 % 24:02d}:{i % 60:02d}:00"


def create_topic(bootstrap: str, topic: str) -> str:
    """Create `topic` compacted with 2 partitions (retrying while a deletion of the same name
    is still settling); return its id."""
    adm = kafka_io.admin(bootstrap)

    def created() -> bool:
        fut = adm.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1,
                                          config={"cleanup.policy": "compact"})])[topic]
        try:
            fut.result(timeout=15)
            return True
        except KafkaException:  # still marked for deletion: try again
            return False

    wait_for(created, timeout_s=30, step_s=0.5, what=f"creating {topic}")
    return wait_for(lambda: kafka_io.partitions_of(adm, topic) == [0, 1]
                    and kafka_io.topic_ids(adm, [topic])[topic],
                    timeout_s=30, what=f"{topic} to appear")


def write_totals(bootstrap: str, topic: str, totals: dict[str, int], txn_id: str) -> None:
    """Publish the totals in one committed transaction, keyed by minute as the stage does."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 30000, "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    for log_time, count in totals.items():
        p.produce(topic, key=log_time.encode(), value=json.dumps(
            {"log_time": log_time, "log_count": count, "level": "ERROR"}).encode())
    p.commit_transaction(30)
