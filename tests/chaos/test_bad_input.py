"""A flood of malformed input is routed exactly as the contract says; valid counts stay exact."""

from __future__ import annotations

import base64
import json
import random
from collections import Counter

from confluent_kafka import Producer

from logcount.connectors import kafka_io
from tests.support.readers import last_totals, read_all
from tests.support.reference import is_counted, reference_parse
from tests.support.run import cli, stage_args

ONE_MB = 1_000_000


def _flood(rng: random.Random, n: int) -> list[bytes]:
    lines = [
        b"",
        b"\r",
        rng.randbytes(ONE_MB),  # 1 MB of binary garbage
        b"2017-07-30 14:09:08 ERROR " + b"x" * ONE_MB,  # a 1 MB line that counts
        b"2017-02-30 10:00:00 ERROR no such day",
        b"2017-07-30 25:00:00 ERROR hour 25",
        b"2017-07-30 14:61:00 ERROR minute 61",
        b"2017-07-30 14:09:08 ERROR \xff\xfe\xc3\x28 non-utf-8 message",
        b"2017-07-30 14:09:08 ERROR trailing cr\r",
        b"2017-07-30 14:09:08 ERROR\r",
        b"2017-07-30 14:09:08 ERROR\n",
        b"2017-07-30 14:09:\xff8 ERROR non-utf-8 timestamp",
    ]
    for i in range(n):
        r = rng.random()
        if r < 0.5:
            lines.append(rng.randbytes(rng.randrange(0, 200)))
        elif r < 0.7:
            lines.append(b"2017-07-30 14:%02d:%02d ERROR valid %d" % (i % 60, i % 60, i))
        else:  # near misses: one byte of a valid line changed
            line = bytearray(b"2017-07-30 14:%02d:08 ERROR near miss" % (i % 60))
            line[rng.randrange(26)] = rng.randrange(256)
            lines.append(bytes(line))
    return lines


def test_a_flood_of_malformed_lines_is_routed_and_counts_stay_exact(endpoints, names):
    rng = random.Random(5)
    lines = _flood(rng, 20_000)
    topic = names.topic("in")
    kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), topic, 4,
                          {"max.message.bytes": str(3 * ONE_MB)})
    p = Producer({"bootstrap.servers": endpoints.bootstrap, "message.max.bytes": 3 * ONE_MB,
                  "linger.ms": 10})
    for i, line in enumerate(lines):
        p.produce(topic, line, partition=i % 4)
    assert p.flush(60) == 0

    # No record cap, but fewer malformed lines per batch than the flood holds: this also drives
    # the stage's cut-short path.
    proc = cli(*stage_args(endpoints, names, "--once", "--max-malformed-per-batch", "5000"))
    assert "batch 2 committed" in proc.stderr, "the malformed limit must have cut batch 1 short"

    expected: Counter = Counter()
    malformed = set()
    for m in read_all(endpoints.bootstrap, topic):
        parsed = reference_parse(m.value() or b"")
        if parsed is None:
            malformed.add((m.partition(), m.offset()))
        elif is_counted(parsed[1]):
            expected[parsed[0]] += 1
    assert len(malformed) > 10_000 and sum(expected.values()) > 4_000
    assert last_totals(read_all(endpoints.bootstrap, names.topic("out"))) == dict(expected)
    dlq = [json.loads(m.value()) for m in read_all(endpoints.bootstrap, names.topic("dlq"))]
    refs = [(d["partition"], d["offset"]) for d in dlq]
    assert len(refs) == len(set(refs)) and set(refs) == malformed
    assert max(d["raw_length"] for d in dlq) >= ONE_MB
    assert all(len(base64.b64decode(d["raw_prefix_base64"])) <= 256 for d in dlq)
