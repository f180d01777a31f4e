"""A production-shaped input topic (256 partitions) and several stages on one cluster.

The input holds plain records, a committed and an aborted transaction across many partitions,
garbage, and a few partitions that never get a record; the expectation is recomputed from the
committed input by the independent parser (tests/support/reference.py)."""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer

from logcount.connectors import kafka_io
from logcount.formats.shapes import synthetic_lines
from tests.support.exact import assert_exact
from tests.support.names import Names
from tests.support.readers import end_offsets, group_offsets, read_all, read_table, sink_offsets
from tests.support.reference import expectation
from tests.support.run import cli, sink_args, stage_args, start_cli, wait_for

PARTITIONS = 256
IDLE = 6  # the last partitions never get a record


def fill(bootstrap: str, topic: str, txn_id: str, lines: int, partitions: int = PARTITIONS,
         seed: int = 30) -> None:
    """Plain records over all but the last IDLE partitions, then one committed and one aborted
    transaction spread over them too."""
    kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, partitions)
    rng = random.Random(seed)
    busy = partitions - IDLE
    source = synthetic_lines(lines + 4_000, seed, malformed_ratio=0.01)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for _ in range(lines):
        plain.produce(topic, next(source), partition=rng.randrange(busy))
    assert plain.flush(60) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    txn.init_transactions(30)
    for commit in (True, False):
        txn.begin_transaction()
        for _ in range(2_000):
            txn.produce(topic, next(source), partition=rng.randrange(busy))
        if commit:
            txn.commit_transaction(30)
        else:
            txn.flush(30)
            txn.abort_transaction(30)


def expected_of(bootstrap: str, topic: str):
    return expectation(read_all(bootstrap, topic), read_all(bootstrap, topic, committed_only=False))


def check_topics(bootstrap: str, names: Names, expected, malformed) -> None:
    assert_exact(bootstrap, names, expected, malformed=malformed)
    ends = end_offsets(bootstrap, names.topic("in"))
    assert len(ends) == PARTITIONS and sum(1 for e in ends.values() if e == 0) == IDLE


@dataclass(frozen=True)
class OnInput(Names):
    """A test's own names (output, DLQ, group, transactional id, database) over an input topic
    that other tests read too."""

    input: str = ""

    def topic(self, role: str) -> str:
        return self.input if role == "in" else super().topic(role)


@pytest.fixture(scope="module")
def filled(endpoints):
    """The 256-partition input of test_256_input_partitions_are_exact, filled and read back
    once for its three cases (the same lines, seed and transactions each case filled for itself
    before), and its expectation: (topic, (expected, malformed, aborted)). Nothing writes to an
    input; each case reads it with its own group into its own output, DLQ and database."""
    n = Names.unique("256-in")
    fill(endpoints.bootstrap, n.topic("in"), n.txn_id + "-producer", 24_000)
    return n.topic("in"), expected_of(endpoints.bootstrap, n.topic("in"))


@pytest.mark.parametrize("case", ["defaults", "flags", "existing"])
def test_256_input_partitions_are_exact(endpoints, names, mysql_db, filled, case):
    """Output and DLQ get the partitions chosen for them (1 each by default, or the flags'), an
    output that already exists is used as it is; totals, DLQ and group offsets exact."""
    bs = endpoints.bootstrap
    topic, (expected, malformed, aborted) = filled
    names = OnInput(names.prefix, input=topic)
    flags: tuple[str, ...] = ()
    want = {"out": 1, "dlq": 1}
    if case == "flags":
        flags, want = ("--output-partitions", "3", "--dlq-partitions", "2"), {"out": 3, "dlq": 2}
    elif case == "existing":
        adm = kafka_io.admin(bs)
        kafka_io.ensure_topic(adm, names.topic("out"), 5, {"cleanup.policy": "compact"})
        want = {"out": 5, "dlq": 1}
    proc = cli(*stage_args(endpoints, names, "--once", "--max-records-per-batch", "5000",
                           *flags))
    assert "batch 3 committed" in proc.stderr, "expected several batches"
    adm = kafka_io.admin(bs)
    for role, n in want.items():
        assert len(kafka_io.partitions_of(adm, names.topic(role)) or []) == n, role
    assert aborted and malformed and sum(expected.values()) > 1000, "the input is what it claims"
    check_topics(bs, names, expected, malformed)
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert read_table(mysql_db) == dict(expected), "MySQL error_log"
    out_ends = end_offsets(bs, names.topic("out"))
    assert sink_offsets(mysql_db, names) == {p: o for p, o in out_ends.items() if o > 0}


def test_two_stages_on_one_cluster_never_fence_each_other(endpoints, names, tmp_path):
    """Two stages at once on disjoint input topics, each with its own group (hence its own
    transactional id, `<group>-stage`), output, state and DLQ: neither is fenced, both exact."""
    bs = endpoints.bootstrap
    pair = {"a": names, "b": Names(names.prefix + "-b")}
    for tag, n in pair.items():
        fill(bs, n.topic("in"), n.txn_id + "-producer", 12_000, seed=31 if tag == "a" else 32)
    procs = {tag: start_cli(*stage_args(endpoints, n, "--max-records-per-batch", "3000",
                                        "--trigger-interval", "0.3"),
                            log_path=tmp_path / f"{tag}.log")
             for tag, n in pair.items()}
    try:
        for _tag, n in pair.items():
            ends = end_offsets(bs, n.topic("in"))
            wait_for(lambda n=n, ends=ends: group_offsets(bs, n.group, n.topic("in")) == ends,
                     300, what=f"stage {n.prefix} to finish its input")
        for tag, proc in procs.items():
            assert proc.poll() is None, (tmp_path / f"{tag}.log").read_text()[-3000:]
            proc.send_signal(signal.SIGTERM)
        assert {tag: p.wait(120) for tag, p in procs.items()} == {"a": 0, "b": 0}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    for tag, n in pair.items():
        text = (tmp_path / f"{tag}.log").read_text()
        assert "fenced" not in text and "Traceback" not in text, text[-3000:]
        expected, malformed, _ = expected_of(bs, n.topic("in"))
        check_topics(bs, n, expected, malformed)
