"""`logcount run --emit-final GRACE` through the real CLI and broker: one final record per
(minute, series) with the exact total, the closed records, a quiet input's minutes closed by the
clock, a late line in the DLQ and in no total, the start's identity rules, and the output, state
and DLQ records of a stage without the flag unchanged by it.

Expected counts are worked out by construction (the lines are written here), never by the
project's parser. Final records are read back read_committed and checked one by one: each
window's records exactly once, in order, its closed record last.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer

from logcount.connectors import kafka_io
from logcount.core.records import decode_dead_letter, decode_final
from tests.support.readers import read_all
from tests.support.run import cli, stage_args, start_cli, wait_for

PARTITIONS = 4


def _write(bootstrap: str, topic: str, lines: list[tuple[int, str]]) -> None:
    """(partition, line) pairs, in order per partition."""
    kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, PARTITIONS)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for part, line in lines:
        p.produce(topic, line.encode(), partition=part)
    assert p.flush(60) == 0


def _finals(bootstrap: str, topic: str) -> list[tuple[str, dict]]:
    """The final topic's records as (key, value), each checked against its key and shape."""
    out = []
    for m in read_all(bootstrap, topic):
        v = json.loads(m.value())
        r = decode_final(m.value())
        assert m.key().decode() == r.window_start == v["log_time"], (m.key(), m.value())
        out.append((m.key().decode(), v))
    return out


def _windows(finals: list[tuple[str, dict]]) -> dict[str, dict]:
    """{window start: {"series": {dims or (): total}, "closed": the closed record}}: every
    window once, its series records before its closed record, which counts them."""
    out: dict[str, dict] = {}
    for key, v in finals:
        w = out.setdefault(key, {"series": {}, "closed": None})
        assert w["closed"] is None, f"a record of {key} after its closed record: {v}"
        if v.get("closed"):
            assert v["series"] == len(w["series"]) and v["log_count"] == sum(
                w["series"].values()), v
            w["closed"] = v
        else:
            dims = tuple(sorted((v.get("dims") or {}).items()))
            assert dims not in w["series"], f"{key} {dims} published twice"
            w["series"][dims] = v["log_count"]
    return out


def _minute(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:00")


def test_minutes_close_by_the_watermark_and_a_quiet_input_s_by_the_clock_exactly_once(
        endpoints, names, tmp_path):
    # Lines of the 4 minutes that ended 6-3 minutes ago, ERROR on two lines of three; the
    # partitions' newest minutes differ, so the oldest of them holds the watermark.
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    first = now - timedelta(minutes=6)
    expected: Counter = Counter()
    lines = []
    for back in range(4):
        t = first + timedelta(minutes=back)
        for i in range(12 + back):
            level = "INFO" if i % 3 == 0 else "ERROR"
            part = i % PARTITIONS if back < 3 else i % 2  # only p0, p1 reach the last minute
            lines.append((part, f"{t:%Y-%m-%d %H:%M}:{i % 60:02d} {level} request {i} failed"))
            expected[_minute(t)] += level == "ERROR"
    _write(endpoints.bootstrap, names.topic("in"), lines)
    final_topic = names.topic("final")
    args = stage_args(endpoints, names, "--emit-final", "30s", "--final-topic", final_topic,
                      "--metrics-port", "0")
    log = tmp_path / "stage.log"
    proc = start_cli(*args, log_path=log)
    try:
        wait_for(lambda: read_all(endpoints.bootstrap, names.topic("out")), timeout_s=120,
                 what="the stage's first batch")
        # The minute the stage caught up in holds no line: the clock closes it once every
        # partition has been caught up for GRACE (30 s), GRACE after its end.
        caught_up = datetime.now(UTC)
        quiet = _minute(caught_up)
        quiet_end = caught_up.replace(second=0, microsecond=0) + timedelta(minutes=1)
        wait_for(lambda: quiet in _windows(_finals(endpoints.bootstrap, final_topic)),
                 timeout_s=240, step_s=1, what=f"the quiet minute {quiet} to close")
        closed_at = datetime.now(UTC)
        # GRACE after the minute's end, plus a batch's pace (1 s) and this poll's (1 s); the
        # bound is generous for a busy machine: the figure is the bench's.
        assert (closed_at - quiet_end).total_seconds() <= 30 + 15, (closed_at, quiet_end)
        windows = _windows(_finals(endpoints.bootstrap, final_topic))
        # Every minute from the first counted one on, zero minutes included, each once.
        m, minutes = first, []
        while _minute(m) <= quiet:
            minutes.append(_minute(m))
            m += timedelta(minutes=1)
        assert list(windows)[:len(minutes)] == minutes
        for minute in minutes:
            w = windows[minute]
            assert w["series"] == {(): expected[minute]}, minute
            assert w["closed"]["window_end"] == _minute(
                datetime.strptime(minute, "%Y-%m-%d %H:%M:%S") + timedelta(minutes=1))
            assert w["closed"]["grace"] == "30s" and w["closed"]["final"] is True
        # The output topic's last total of a closed minute is its final one.
        last = {m.key().decode(): json.loads(m.value())["log_count"]
                for m in read_all(endpoints.bootstrap, names.topic("out"))}
        assert {k: v for k, v in last.items() if k in minutes} == {
            k: n for k, n in expected.items() if n}

        # A late line: a counted line of a closed minute goes to the DLQ as late and changes
        # nothing; a line of an open minute still counts.
        late_minute = _minute(first + timedelta(minutes=1))
        open_time = datetime.now(UTC) + timedelta(seconds=5)
        _write(endpoints.bootstrap, names.topic("in"), [
            (2, f"{late_minute[:16]}:30 ERROR a straggler"),
            (3, f"{open_time:%Y-%m-%d %H:%M:%S} ERROR on time")])
        dlq = wait_for(lambda: [decode_dead_letter(m.value()) for m in
                                read_all(endpoints.bootstrap, names.topic("dlq"))],
                       timeout_s=60, what="the late line in the DLQ")
        assert [(d.partition, d.reason) for d in dlq] == [(2, "late")]
        wait_for(lambda: _minute(open_time) in {
            m.key().decode() for m in read_all(endpoints.bootstrap, names.topic("out"))},
            timeout_s=60, what="the open minute's line counted")
        after = _windows(_finals(endpoints.bootstrap, final_topic))
        assert after[late_minute] == windows[late_minute]
        last = {m.key().decode(): json.loads(m.value())["log_count"]
                for m in read_all(endpoints.bootstrap, names.topic("out"))}
        assert last[late_minute] == expected[late_minute]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0, log.read_text()[-3000:]

    # The state's identity: turning it off, or another final topic, is refused in one line.
    base = [a for a in args if a not in ("--emit-final", "30s", "--final-topic", final_topic)]
    off = cli(*base, "--once", check=False)
    assert off.returncode == 2
    assert f"closes minutes into final topic {final_topic} (--emit-final 30s)" in off.stderr
    other = cli(*base, "--once", "--emit-final", "30s", "--final-topic",
                names.topic("final2"), check=False)
    assert other.returncode == 2 and f"--final-topic {names.topic('final2')}" in other.stderr
    # Another grace is allowed, and a restart publishes no final record twice.
    before = _finals(endpoints.bootstrap, final_topic)
    again = cli(*base, "--once", "--emit-final", "2m", "--final-topic", final_topic)
    assert "--emit-final changed from 30s to 2m" in again.stderr
    assert _finals(endpoints.bootstrap, final_topic)[:len(before)] == before
    _windows(_finals(endpoints.bootstrap, final_topic))  # still each window once


def _json_lines(start: datetime, expected: Counter) -> list[tuple[int, str]]:
    """JSON lines by service and level: 20 in each of the first 5 minutes, then one a minute
    in every partition for an hour more, so every partition's newest minute is 11:05."""
    out = []
    services = ["api", "web", "db", "caf\u00e9"]
    for minute in range(66):
        t = start + timedelta(minutes=minute)
        for i in range(20 if minute < 5 else PARTITIONS):
            service, level = services[(i * 7 + minute) % 4], ("ERROR", "WARN", "error")[i % 3]
            line = {"ts": f"{t:%Y-%m-%dT%H:%M}:{i:02d}Z", "level": level, "service": service,
                    "msg": f"request {i}"}
            out.append((i % PARTITIONS, json.dumps(line)))
            if level.upper() == "ERROR" and minute < 5:
                expected[(_minute(t), service)] += 1
    return out


def test_grouped_finals_by_the_watermark_and_records_without_the_flag_unchanged(
        endpoints, names):
    start = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    expected: Counter = Counter()
    _write(endpoints.bootstrap, names.topic("in"), _json_lines(start, expected))
    fmt = ["--json-time-field", "ts", "--json-level-field", "level", "--group-by", "service"]
    final_topic = names.topic("final")
    # An hour's grace: the clock cannot close these old minutes while the test runs (it would
    # once every partition had been caught up for an hour), so only the watermark closes.
    flags = ["--once", *fmt, "--emit-final", "1h", "--final-topic", final_topic]
    cli(*stage_args(endpoints, names, *flags))
    # Every partition's newest minute is 11:05: with an hour of grace 10:00-10:04 are closed (a
    # minute closes when the watermark's start is at or past its end plus GRACE), 10:05 not.
    windows = _windows(_finals(endpoints.bootstrap, final_topic))
    assert list(windows) == [_minute(start + timedelta(minutes=i)) for i in range(5)]
    got = {(minute, dict(dims)["service"]): n for minute, w in windows.items()
           for dims, n in w["series"].items()}
    assert got == dict(expected)
    assert all(w["closed"]["grace"] == "1h" for w in windows.values())
    # A second run reads nothing new and publishes no final record again.
    before = _finals(endpoints.bootstrap, final_topic)
    cli(*stage_args(endpoints, names, *flags))
    assert _finals(endpoints.bootstrap, final_topic) == before

    # The same input without the flag: every output record byte for byte the same,
    # no final topic, and no closing field in the state.
    plain = names.topic("plain")
    cli(*stage_args(endpoints, names, "--once", *fmt, "--output-topic", plain,
                    "--group-id", names.group + "-plain", "--transactional-id",
                    names.txn_id + "-plain"))

    def records(topic: str) -> list[tuple[bytes, bytes]]:
        return [(m.key(), m.value()) for m in read_all(endpoints.bootstrap, topic)]

    assert records(plain) == records(names.topic("out"))
    assert not kafka_io.partitions_of(kafka_io.admin(endpoints.bootstrap), plain + "-final")
    progress = [json.loads(m.value()) for m in read_all(endpoints.bootstrap, plain + "-state")
                if m.key() == b"progress"]
    assert progress and all("closing" not in p for p in progress)
    with_flag = [json.loads(m.value()) for m in read_all(endpoints.bootstrap,
                                                         names.topic("out") + "-state")
                 if m.key() == b"progress"]
    assert with_flag[-1]["closing"]["final_topic"] == final_topic
    assert {k: v for k, v in with_flag[-1].items() if k not in (
        "closing", "output_topic", "output_topic_id")} == {
        k: v for k, v in progress[-1].items() if k not in ("output_topic", "output_topic_id")}


def test_a_final_topic_that_holds_records_the_state_never_closed_into_is_refused(
        endpoints, names):
    final_topic = names.topic("final")
    kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), final_topic, 1)
    _write(endpoints.bootstrap, final_topic, [(0, "someone else's record")])
    _write(endpoints.bootstrap, names.topic("in"), [(0, "2024-05-01 10:00:00 ERROR x")])
    t0 = time.monotonic()
    proc = cli(*stage_args(endpoints, names, "--once", "--emit-final", "1m", "--final-topic",
                           final_topic), check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"final topic {final_topic} already holds 1 offsets" in proc.stderr
    assert not read_all(endpoints.bootstrap, names.topic("out")), time.monotonic() - t0


def test_a_final_topic_recreated_under_the_state_is_refused(endpoints, names):
    final_topic = names.topic("final")
    _write(endpoints.bootstrap, names.topic("in"), [(0, "2024-05-01 10:00:00 ERROR x")])
    args = stage_args(endpoints, names, "--once", "--emit-final", "1m", "--final-topic",
                      final_topic)
    cli(*args)
    adm = kafka_io.admin(endpoints.bootstrap)
    adm.delete_topics([final_topic])[final_topic].result(30)
    wait_for(lambda: not kafka_io.partitions_of(adm, final_topic), timeout_s=30,
             what="the final topic to go")
    proc = cli(*args, check=False)  # the start creates it anew: another id
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"final topic {final_topic} was recreated (id" in proc.stderr
