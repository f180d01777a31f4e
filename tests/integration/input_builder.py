"""Builds a mixed input topic and, by construction, what the stage must make of it.

The expectation is not computed by logcount's parser: every line is generated from a known
(minute, level, kind) and the test counts what it generated. Delivery reports give each
malformed line's (partition, offset) for the DLQ check.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import Producer

from logcount.connectors import kafka_io

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

    def write(self, value: bytes, partition: int, minute: str | None, malformed: bool) -> None:
        inp, counted = self.inp, self.counted

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
        w.write(line, i % 4, minute if level == b"ERROR" else None, malformed=False)
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
    return inp
