"""The batch loop with --group-by over fakes (tests/support/fakes.py): one record per series
with its dims, the overflow series and its metric, the names in the state, and a restart that
goes on from them."""

from __future__ import annotations

import json

from logcount.pipeline.job import BatchResult
from logcount.pipeline.offsets import OffsetRange
from tests.support.fakes import MINUTE, Broker, rig


def _grouped(compute, series):
    def batch(ranges: list[OffsetRange], late_before: int | None) -> BatchResult:
        compute.jobs.append([(r.partition, r.start, r.end) for r in ranges])
        n = sum(r.size for r in ranges)
        return BatchResult(counts={MINUTE: n}, series=series, ranges=list(ranges), records=n)
    compute.batch = batch


Published = list[tuple[bytes, bytes]]  # (key, value) of each output record


def _published(broker: Broker, out: Published) -> None:
    """Snapshot the output records of each transaction as it commits."""
    def grab() -> None:
        for t, v, k in broker.producers[-1].pending:
            if t == "out":
                assert v is not None, k  # tombstones go to the state topic only
                out.append((k, v))
    broker.faults["commit"] = [grab] * 10


def test_each_series_is_a_record_and_the_overflow_is_counted():
    broker, out = Broker(), Published()
    _published(broker, out)
    r = rig(broker, level="*", group_by="level", max_series=1)
    _grouped(r.compute, {("ERROR",): {MINUTE: 6}, ("INFO",): {MINUTE: 4}})
    assert r.stage.run() == 0
    got = {tuple(json.loads(k)): json.loads(v) for k, v in out}
    label = r.stage.state.series.tuples  # type: ignore[union-attr]
    assert label == {0: ("__other__",), 1: ("ERROR",)}
    assert {k[1:]: v["log_count"] for k, v in got.items()} == {("ERROR",): 6, ("__other__",): 4}
    assert all(v["dims"] == {"level": k[1]} and v["level"] == "*" for k, v in got.items())
    metric = r.stage.metrics.registry.get_sample_value("logcount_overflow_lines_total")
    assert metric == 4
    assert json.loads(broker.table[b"series/1"]) == ["ERROR"]

    # a restart from the same table: the names come back, totals go on
    broker.end, out2 = 20, Published()
    _published(broker, out2)
    again = rig(broker, level="*", group_by="level", max_series=1)
    _grouped(again.compute, {("INFO",): {MINUTE: 1}, ("ERROR",): {MINUTE: 2}})
    assert again.stage.run() == 0
    got = {tuple(json.loads(k))[1:]: json.loads(v)["log_count"] for k, v in out2}
    assert got == {("ERROR",): 8, ("__other__",): 5}


def test_a_state_of_the_first_layout_is_rewritten_as_chunks_by_the_restart():
    from logcount.pipeline.hour_records import encode_hour
    from logcount.pipeline.series import cell_key, decode_chunk, parse_cell_key, parse_chunk_key

    broker = Broker()
    r = rig(broker, level="*", group_by="level")
    _grouped(r.compute, {("ERROR",): {MINUTE: 6}, ("INFO",): {MINUTE: 4}})
    assert r.stage.run() == 0
    # the same state as the first grouped layout wrote it: one record per (hour, series)
    for key in [k for k in broker.table if parse_chunk_key(k)]:
        chunk, hour = parse_chunk_key(key)  # type: ignore[misc]
        sids, offs, tots = decode_chunk(broker.table.pop(key), chunk)
        for sid in set(sids.tolist()):
            mine = sids == sid
            broker.table[cell_key(sid, hour)] = encode_hour(
                dict(zip(offs[mine].tolist(), tots[mine].tolist(), strict=True)))
    assert sum(1 for k in broker.table if parse_cell_key(k)) == 2

    broker.end, out = 20, Published()
    _published(broker, out)
    again = rig(broker, level="*", group_by="level")
    _grouped(again.compute, {("INFO",): {MINUTE: 1}, ("ERROR",): {MINUTE: 2}})
    assert again.stage.run() == 0
    got = {tuple(json.loads(k))[1:]: json.loads(v)["log_count"] for k, v in out}
    assert got == {("ERROR",): 8, ("INFO",): 5}
    assert not [k for k in broker.table if parse_cell_key(k)]
    assert [k for k in broker.table if parse_chunk_key(k)] == [b"totals/2026-11-26 09/c0"]
