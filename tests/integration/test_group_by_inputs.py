"""`--group-by` on the shippers' envelopes through the real CLI, broker and MySQL: Fluent Bit by
namespace and container (with bad dimension values, then a flood of new series), ECS by service.

Expected counts come from the generator (`produce --expect-group-by`) or from the values the
test itself wrote, never from the project's parser. Each grouped table the sink fills must hold
exactly the output topic's last total per series.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import threading
from collections import Counter

import pymysql
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from logcount.connectors import kafka_io
from logcount.pipeline.state import state_topic_name
from tests.support.flood import write_flood
from tests.support.metrics import metric
from tests.support.ports import free_port
from tests.support.readers import read_all
from tests.support.run import cli, sink_args, stage_args, start_cli, wait_for

Series = dict[tuple[str, ...], int]
FB_GROUP = "ns=kubernetes.namespace_name,container=kubernetes.container_name"
# LOGCOUNT_FLOOD_LINES=1000000 runs the full flood (figures: docs/tuning.md#series-flood).
FLOOD = int(os.environ.get("LOGCOUNT_FLOOD_LINES", "100000"))
BAD_MINUTE = "2017-07-30 12:34"
FLOOD_MINUTE = "2017-07-31 00:00"
EURO = "\u20ac"
# (the namespace_name as JSON text, what the stage must make of it); the container is "bad".
BAD_VALUES: list[tuple[bytes, str]] = [
    (b'"nul\\u0000byte"', "nul\x00byte"),
    (b'"bad\xffbyte"', "bad\ufffdbyte"),  # a raw invalid byte: one U+FFFD
    (json.dumps('say "hi", it\'s').encode(), 'say "hi", it\'s'),
    (b'"a|b|c"', "a|b|c"),
    (b"\"'; DROP TABLE x; --\"", "'; DROP TABLE x; --"),
    # ~1 MB of 3-byte characters after 2 ASCII ones: cut to 254 bytes, not mid-character
    (json.dumps("ab" + EURO * 349_526, ensure_ascii=False).encode(), "ab" + EURO * 84),
    (b"42", "42"),
    (b"null", ""),
]
INVALID = [b'{"a": 1}', b'["x"]']  # objects and arrays: `invalid dimension` in the DLQ


def _envelope(ns: bytes, line: str, container: bytes = b'"bad"') -> bytes:
    return (b'{"log":"%s","stream":"stdout","kubernetes":{"namespace_name":%s,'
            b'"container_name":%s}}' % (line.encode(), ns, container))


def _create_topic(bootstrap: str, topic: str) -> None:
    """2 partitions that take a 1 MB record (the broker's default stops just short of one)."""
    adm = kafka_io.admin(bootstrap)  # held: a collected client cancels its futures
    adm.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1,
                                config={"max.message.bytes": str(4 << 20)})])[topic].result(30)
    wait_for(lambda: kafka_io.partitions_of(adm, topic) == [0, 1], 30, what=f"{topic}")


def _write(bootstrap: str, topic: str, values: list[bytes]) -> list[tuple[int, int]]:
    """Write `values` in order; return each one's (partition, offset)."""
    where: dict[int, tuple[int, int]] = {}
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "message.max.bytes": 4 << 20})

    def delivered(i: int, err, msg) -> None:
        if err is None:
            where[i] = (msg.partition(), msg.offset())

    for i, v in enumerate(values):
        p.produce(topic, v, on_delivery=functools.partial(delivered, i))
    assert p.flush(60) == 0
    assert len(where) == len(values)
    return [where[i] for i in range(len(values))]


def _generated(path) -> Series:
    doc = json.loads(path.read_text())
    return {(s["minute"], *s["dims"].values()): s["count"] for s in doc["series"]}


def _last(bootstrap: str, topic: str) -> Series:
    """The output topic's last total per key, keyed (minute, *values), each key checked
    against its value."""
    out: Series = {}
    for m in read_all(bootstrap, topic, timeout_s=120):
        v = json.loads(m.value())
        key = (v["log_time"], *v["dims"].values())
        assert tuple(json.loads(m.key())) == key, (m.key(), m.value())
        out[key] = v["log_count"]
    return out


def _table(url, table: str) -> Series:
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           database=url.database, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table}`")
            return {(row[0].strftime("%Y-%m-%d %H:%M:00"), *row[1:-1]): row[-1]
                    for row in cur.fetchall()}
    finally:
        conn.close()


def _peak_rss_mb(pid: int, peaks: dict[int, int], stop: threading.Event) -> None:
    """Every 0.2 s: VmHWM (kB) of `pid` and its children (the driver's JVM), into `peaks`."""
    while not stop.wait(0.2):
        for p in [pid, *_children(pid)]:
            try:
                with open(f"/proc/{p}/status") as f:
                    hwm = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
            except (OSError, StopIteration):
                continue
            peaks[p] = max(peaks.get(p, 0), hwm)


def _children(pid: int) -> list[int]:
    """Every process below `pid` (the JVM may sit under a launcher)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(c) for c in f.read().split()]
    except OSError:
        return []
    return [k for kid in kids for k in (kid, *_children(kid))]


def test_fluent_bit_by_namespace_and_container_bad_values_and_a_flood(
        endpoints, names, mysql_db, tmp_path):
    bs, topic = endpoints.bootstrap, names.topic("in")
    _create_topic(bs, topic)
    expect = tmp_path / "expect.json"
    cli("produce", "--bootstrap-servers", bs, "--topic", topic, "--synthetic", "3000",
        "--seed", "39", "--shape", "fluentbit", "--dimensions", "--expect", str(expect),
        "--expect-group-by", FB_GROUP)
    expected = Counter(_generated(expect))
    assert len({k[1:] for k in expected}) >= 8 and len({k[1] for k in expected}) >= 4

    bad: list[bytes] = []
    for i, (ns, text) in enumerate(BAD_VALUES):
        for j in range(i + 1):  # a count of its own per value
            bad.append(_envelope(ns, f"{BAD_MINUTE}:{j:02d} ERROR bad value {i}"))
        expected[(f"{BAD_MINUTE}:00", text, "bad")] += i + 1
    # Two values that differ only past the 255 bytes kept: one series (the stage cuts them
    # after its aggregation, so their two aggregated rows are summed).
    for tail in ("c" * 45, "d" * 45):
        bad.append(_envelope(b'"long"', f"{BAD_MINUTE}:00 ERROR long container",
                             json.dumps("c" * 255 + tail).encode()))
    expected[(f"{BAD_MINUTE}:00", "long", "c" * 255)] += 2
    invalid = [_envelope(v, f"{BAD_MINUTE}:00 ERROR invalid {k}") for k, v in enumerate(INVALID)]
    refs = _write(bs, topic, bad + invalid)[len(bad):]
    named = len({k[1:] for k in expected})  # every tuple so far, named and no room for more
    flags = ["--json-line-field", "log", "--group-by", FB_GROUP, "--max-series", str(named)]

    first = cli(*stage_args(endpoints, names, "--once", *flags))
    assert "reached" not in first.stderr, first.stderr[-3000:]
    before = _last(bs, names.topic("out"))
    assert before == dict(expected)
    dlq = {(d["partition"], d["offset"]): d for d in
           (json.loads(m.value()) for m in read_all(bs, names.topic("dlq")))}
    assert {r for r, d in dlq.items() if d["reason"] == "invalid dimension"} == set(refs)
    assert [dlq[r]["raw_prefix_text"] for r in refs] == [v.decode() for v in invalid]

    # The flood: FLOOD new namespaces in one minute, and a few lines of named series in it.
    busiest = max((k for k in expected if k[0] != f"{BAD_MINUTE}:00"), key=expected.__getitem__)
    flood_s = write_flood(bs, topic, FLOOD, f"{FLOOD_MINUTE}:07 ERROR flood".encode())
    extra = ([_envelope(json.dumps(busiest[1]).encode(), f"{FLOOD_MINUTE}:01 ERROR named",
                        json.dumps(busiest[2]).encode())] * 5
             + [_envelope(b'"a|b|c"', f"{FLOOD_MINUTE}:02 ERROR named")] * 3)
    _write(bs, topic, extra)
    expected[(f"{FLOOD_MINUTE}:00", *busiest[1:])] += 5
    expected[(f"{FLOOD_MINUTE}:00", "a|b|c", "bad")] += 3
    expected[(f"{FLOOD_MINUTE}:00", "__other__", "__other__")] += FLOOD

    port = free_port()
    log_path = tmp_path / "flood.log"
    stage = start_cli(*stage_args(endpoints, names, *flags, "--metrics-port", str(port)),
                      log_path=log_path)
    peaks: dict[int, int] = {}
    stop = threading.Event()
    sampler = threading.Thread(target=_peak_rss_mb, args=(stage.pid, peaks, stop), daemon=True)
    sampler.start()
    try:
        wait_for(lambda: metric(port, "logcount_records_read_total", down=0)
                 == FLOOD + len(extra), 600, step_s=1, what="the stage to read the flood")
        # (its batch's overflow metric is set right after the read one)
        overflow = wait_for(lambda: metric(port, "logcount_overflow_lines_total") or None, 10)
    finally:
        stage.send_signal(signal.SIGTERM)
        code = stage.wait(120)
        stop.set()
        sampler.join()
    log = log_path.read_text()
    assert code == 0, log[-3000:]
    assert overflow == FLOOD
    warns = [ln for ln in log.splitlines() if f"--max-series {named} reached" in ln]
    assert len(warns) == 1 and "most distinct values is ns" in warns[0], warns

    last = _last(bs, names.topic("out"))
    assert last == dict(expected)
    assert sum(last.values()) == sum(before.values()) + FLOOD + len(extra)

    # Bounded: the state names exactly --max-series tuples, whatever the flood brought.
    state = read_all(bs, state_topic_name(names.topic("out")), timeout_s=120)
    assert sum(m.key().startswith(b"series/") for m in state) == named
    state_bytes = sum(len(m.key()) + len(m.value() or b"") for m in state)
    assert state_bytes < 1 << 20, state_bytes  # one name each would be >10 bytes x FLOOD
    shown = json.loads(cli("state", "show", *stage_args(endpoints, names, *flags)[1:],
                           "--json").stdout)
    assert shown["series"] == named
    driver_mb = peaks.get(stage.pid, 0) / 1024
    jvm_mb = sum(v for p, v in peaks.items() if p != stage.pid) / 1024
    print(f"flood of {FLOOD}: written in {flood_s:.1f}s; driver peak RSS {driver_mb:.0f} MB "
          f"(python), {jvm_mb:.0f} MB (JVM); state {len(state)} records, {state_bytes} bytes")
    assert 0 < driver_mb < 1024, driver_mb

    cli(*sink_args(endpoints, names, mysql_db, "--once", "--table", "fb"))
    assert _table(mysql_db, "fb") == last


def test_ecs_by_service_name_dotted_and_nested(endpoints, names, mysql_db, tmp_path):
    """ECS as its loggers write it: `service.name` one literal key (ecs-dotted) or nested
    objects (ecs-nested), both in one topic, counted by service and level."""
    bs, topic = endpoints.bootstrap, names.topic("in")
    expected: Counter = Counter()
    for seed, shape in ((1, "ecs-dotted"), (2, "ecs-nested")):
        expect = tmp_path / f"{shape}.json"
        cli("produce", "--bootstrap-servers", bs, "--topic", topic, "--partitions", "2",
            "--synthetic", "2000", "--seed", str(seed), "--shape", shape, "--dimensions",
            "--expect", str(expect), "--expect-group-by", "svc=service.name,level",
            "--level", "ERROR,WARN")
        expected.update(_generated(expect))
    assert len({k[1] for k in expected}) >= 8 and {k[2] for k in expected} == {"ERROR", "WARN"}

    cli(*stage_args(endpoints, names, "--once", "--json-time-field", "@timestamp",
                    "--json-level-field", "log.level", "--level", "ERROR,WARN",
                    "--group-by", "svc=service.name,level"))
    last = _last(bs, names.topic("out"))
    assert last == dict(expected)
    cli(*sink_args(endpoints, names, mysql_db, "--once", "--table", "ecs"))
    assert _table(mysql_db, "ecs") == last
