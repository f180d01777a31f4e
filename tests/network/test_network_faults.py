"""Network faults, as an operator's network deals them.

The stage and the sink run without a break through the whole module against the secured 3-broker
cluster (the session's, shared with the secured tier) and MariaDB, reaching every broker and MySQL
only through toxiproxy (tests/support/toxiproxy.py): each broker's PROXIED listener advertises its
proxy, so the driver's clients, Spark's executors and the sink all go through it. A writer fills
the input on the brokers' direct listeners (producers elsewhere on the network are unaffected)
with plain records and committed and aborted transactions.

Each fault test cuts, heals, and measures the resume: the seconds from the heal to the stage's
next commit and to the sink's next MySQL write, from their own /metrics; each must be <= 15 s.
Then the writer pauses, both drain, and the test ends exact against an independent count: the
committed input recomputed by tests/support/reference.py against MySQL's error_log and the output
topic.
The hung-and-replaced case runs its own pair of stages with a deterministic crash point.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pymysql
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from logcount.connectors import stack
from logcount.core.settings import MySQLUrl
from logcount.formats.shapes import synthetic_lines
from tests.support.cluster import ADMIN_USER, SecuredCluster
from tests.support.exact import assert_exact
from tests.support.metrics import metric
from tests.support.names import Names
from tests.support.ports import free_ports
from tests.support.readers import end_offsets, group_offsets, read_all, read_table, sink_offsets
from tests.support.reference import expectation
from tests.support.run import start_cli, wait_for
from tests.support.toxiproxy import Proxy, Toxiproxy, binary

# The bound: a stage and a sink back at work within 15 s of a heal.
RESUME_LIMIT_S = 15.0
# ~1,000 lines/s: enough that every batch and every resume carries new data, little enough that
# a drain after a 90 s cut takes seconds.
CHUNK, PAUSE_S = 200, 0.2


class PacedWriter(threading.Thread):
    """Seed-format lines (1 % garbage) on the brokers' direct listeners, paced, until stopped:
    plain chunks, and every few chunks a committed or an aborted transaction. `pause()` returns
    once everything written is acknowledged, so a drain has a fixed end."""

    def __init__(self, conf: dict, topic: str, txn_id: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.conf, self.topic, self.txn_id, self.partitions = conf, topic, txn_id, partitions
        self.go = threading.Event()
        self.idle = threading.Event()
        self.stop = threading.Event()
        self.aborted = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the rig
            self.error = exc
        finally:
            self.idle.set()

    def _run(self) -> None:
        rng = random.Random(27)
        plain = Producer({**self.conf, "enable.idempotence": True, "linger.ms": 20,
                          "log_level": 0})
        txn = Producer({**self.conf, "transactional.id": self.txn_id, "log_level": 0})
        txn.init_transactions(60)
        lines = synthetic_lines(50_000_000, 27, malformed_ratio=0.01)
        n = 0
        while not self.stop.is_set():
            if not self.go.is_set():
                assert plain.flush(60) == 0, "plain records undelivered"
                self.idle.set()
                self.go.wait(0.5)
                continue
            self.idle.clear()
            batch = [next(lines) for _ in range(CHUNK)]
            n += 1
            kind = "commit" if n % 5 == 0 else "abort" if n % 7 == 0 else "plain"
            producer = plain if kind == "plain" else txn
            if kind != "plain":
                txn.begin_transaction()
            for v in batch:
                producer.produce(self.topic, v, partition=rng.randrange(self.partitions))
            if kind == "commit":
                txn.commit_transaction(60)
            elif kind == "abort":
                txn.flush(60)
                txn.abort_transaction(60)
                self.aborted += 1
            plain.poll(0)
            time.sleep(PAUSE_S)
        plain.flush(60)

    def pause(self) -> None:
        self.go.clear()
        time.sleep(0.3)
        wait_for(self.idle.is_set, 120, what="the writer to pause")

    def resume(self) -> None:
        self.go.set()


@dataclass
class Rig:
    cluster: SecuredCluster
    names: Names
    tmp: Path
    toxi: Toxiproxy
    brokers: dict[int, Proxy]
    mysql: Proxy
    url: MySQLUrl  # the database, reached directly (the checks)
    writer: PacedWriter
    ports: dict[str, int] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    report: list[str] = field(default_factory=list)

    @property
    def admin(self) -> dict:
        return self.cluster.admin_conf()

    def commits(self) -> float | None:
        # None while a process does not answer; 2 s: a wedged one, not a slow one.
        return metric(self.ports["stage"], "logcount_batches_committed_total", None, down=None,
                      timeout=2)

    def writes(self) -> float | None:
        return metric(self.ports["sink"], "logcount_sink_batches_written_total", None, down=None,
                      timeout=2)

    def alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                log = (self.tmp / f"{name}.log").read_text()[-3000:]
                pytest.fail(f"the {name} exited {proc.returncode} during the faults:\n{log}")

    def progressing(self) -> None:
        """Both at work before a fault: the stage commits and the sink writes."""
        c, w = self.commits() or 0, self.writes() or 0
        wait_for(lambda: (self.commits() or 0) > c and (self.writes() or 0) > w, 120,
                 what="the stage and the sink to make progress")

    def resume_after(self, heal: Callable[[], None], *, stage: bool = True,
                     sink: bool = True) -> dict[str, float]:
        """Heal, then the seconds until the stage's next commit and the sink's next write."""
        c0, w0 = self.commits(), self.writes()
        heal()
        t0 = time.monotonic()
        took: dict[str, float] = {}
        while len(took) < stage + sink and time.monotonic() - t0 < 120:
            now = time.monotonic() - t0
            if stage and "stage" not in took and (self.commits() or 0) > (c0 or 0):
                took["stage"] = now
            if sink and "sink" not in took and (self.writes() or 0) > (w0 or 0):
                took["sink"] = now
            time.sleep(0.05)
        self.alive()
        return took

    def exact(self) -> tuple[int, int]:
        """Pause the writer, let both drain, compare with the independent count; returns
        (lost, duplicated)."""
        self.writer.pause()
        try:
            assert self.writer.error is None, self.writer.error
            n = self.names
            in_ends = end_offsets(self.admin, n.topic("in"))
            wait_for(lambda: group_offsets(self.admin, n.group, n.topic("in")) == in_ends, 180,
                     what="the stage to drain the input")
            out_ends = {p: e for p, e in end_offsets(self.admin, n.topic("out")).items() if e > 0}
            wait_for(lambda: sink_offsets(self.url, n) == out_ends, 120,
                     what="the sink to drain the output")
            expected, malformed, aborted = expectation(
                read_all(self.admin, n.topic("in"), True, 120),
                read_all(self.admin, n.topic("in"), False, 120))
            table = read_table(self.url)
            lost = sum(max(0, v - table.get(k, 0)) for k, v in expected.items())
            dup = sum(max(0, v - expected.get(k, 0)) for k, v in table.items())
            assert aborted and sum(expected.values()) > 0, "the input holds what it claims"
            assert table == dict(expected), f"MySQL: lost {lost}, duplicated {dup}"
            assert_exact(self.admin, n, expected, malformed=malformed, timeout_s=120)
            self.alive()
            return lost, dup
        finally:
            self.writer.resume()

    def record(self, fault: str, took: dict[str, float], lost: int, dup: int) -> None:
        def cell(k: str) -> str:
            return f"{took[k]:.1f}s" if k in took else "-"
        line = (f"{fault}: resume after heal stage {cell('stage')}, sink {cell('sink')}; "
                f"lost {lost}, duplicated {dup}")
        self.report.append(line)
        print(f"\n{line}")


@pytest.fixture(scope="module")
def rig(secured_cluster, endpoints, tmp_path_factory) -> Iterator[Rig]:
    if binary() is None:  # CI has Go: a missing proxy there is a broken set-up, not a skip
        (pytest.fail if os.environ.get("CI") else pytest.skip)(
            "toxiproxy-server missing (scripts/setup.sh builds it with Go)")
    cluster = secured_cluster
    tmp = tmp_path_factory.mktemp("network-faults")
    names = Names.unique("net")
    toxi = Toxiproxy()
    toxi.start(tmp)
    url = endpoints.mysql.with_database(names.database)
    db = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                         autocommit=True)
    with db.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{url.database}`")
    db.close()
    writer = None
    rig_ = None
    try:
        brokers = {b: toxi.create(f"broker-{b}", cluster.proxy_address(b),
                                  cluster.proxied_listener(b)) for b in cluster.brokers}
        mysql = toxi.create("mysql", "127.0.0.1:0", f"{url.host}:{url.port}")
        cluster.admin().create_topics([NewTopic(names.topic("in"), 4)])[
            names.topic("in")].result(30)
        writer = PacedWriter(cluster.admin_conf(), names.topic("in"), names.txn_id + "-writer", 4)
        rig_ = Rig(cluster, names, tmp, toxi, brokers, mysql, url, writer)
        props = cluster.write_java_properties(tmp / "client.properties", ADMIN_USER,
                                              cluster.admin_password,
                                              bootstrap=cluster.proxied_bootstrap)
        rig_.ports = dict(zip(("stage", "sink"), free_ports(2), strict=True))
        host, port = mysql.listen.rsplit(":", 1)
        pw = f":{url.password}" if url.password else ""
        rig_.procs["stage"] = start_cli(
            "run", "--client-config", str(props), "--input-topic", names.topic("in"),
            "--output-topic", names.topic("out"), "--dlq-topic", names.topic("dlq"),
            "--group-id", names.group, "--master", "local[2]", "--trigger-interval", "0.5",
            "--min-batch-interval", "0",
            "--max-records-per-batch", "20000", "--metrics-port", str(rig_.ports["stage"]),
            log_path=tmp / "stage.log")
        rig_.procs["sink"] = start_cli(
            "sink", "--client-config", str(props), "--topic", names.topic("out"),
            "--group-id", names.group + "-sink", "--metrics-port", str(rig_.ports["sink"]),
            "--mysql-url", f"mysql://{url.user}{pw}@{host}:{port}/{url.database}",
            log_path=tmp / "sink.log")
        writer.start()
        writer.resume()
        wait_for(lambda: (rig_.writes() or 0) > 0, 240, what="the stage and sink to start")
        yield rig_
        # Both stop cleanly on SIGTERM after every fault, and nothing printed a traceback.
        writer.stop.set()
        for proc in rig_.procs.values():
            proc.send_signal(signal.SIGTERM)
        codes = {name: proc.wait(120) for name, proc in rig_.procs.items()}
        logs = {name: (tmp / f"{name}.log").read_text() for name in rig_.procs}
        assert codes == {"stage": 0, "sink": 0}, {k: v[-2000:] for k, v in logs.items()}
        for name, text in logs.items():
            assert "Traceback" not in text, f"{name} printed a traceback:\n{text[-4000:]}"
        print("\n" + "\n".join(rig_.report))
    finally:
        if writer is not None:
            writer.stop.set()
        if rig_ is not None:
            for proc in rig_.procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        toxi.stop()
        with pymysql.connect(host=url.host, port=url.port, user=url.user,
                             password=url.password, autocommit=True) as db, db.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{url.database}`")


def assert_resumed(took: dict[str, float], *who: str) -> None:
    late = {w: took.get(w) for w in who if took.get(w, 1e9) > RESUME_LIMIT_S}
    assert not late, f"resumed later than {RESUME_LIMIT_S:.0f}s after the heal: {late} ({took})"


def _all(rig: Rig, fault: Callable[[Proxy], None]) -> None:
    for proxy in rig.brokers.values():
        fault(proxy)


def _heal_brokers(rig: Rig) -> Callable[[], None]:
    return lambda: _all(rig, Proxy.heal)


@pytest.mark.parametrize("seconds", [20, 90])
def test_all_broker_links_blackholed_then_healed(rig, seconds):
    """Every link to every broker drops its bytes (connections stay open, as in a partition).
    The stage's calls time out and it re-plans; on the heal toxiproxy closes the dead
    connections and everything reconnects."""
    rig.progressing()
    _all(rig, Proxy.blackhole)
    time.sleep(seconds)
    took = rig.resume_after(_heal_brokers(rig))
    rig.record(f"all broker links blackholed {seconds}s", took, *rig.exact())
    assert_resumed(took, "stage", "sink")


def test_connections_reset_then_healed(rig):
    """Every connection to every broker is reset as soon as it carries data, for 10 s."""
    rig.progressing()
    _all(rig, Proxy.reset)
    time.sleep(10)
    took = rig.resume_after(_heal_brokers(rig))
    rig.record("broker connections reset 10s", took, *rig.exact())
    assert_resumed(took, "stage", "sink")


def test_latency_slows_but_never_stops(rig):
    """300 ms on every broker link for 20 s: slower batches, still committed and written."""
    rig.progressing()
    c0, w0 = rig.commits(), rig.writes()
    _all(rig, lambda p: p.latency(300))
    time.sleep(20)
    during = (rig.commits() - c0, rig.writes() - w0)
    took = rig.resume_after(_heal_brokers(rig))
    rig.record("300 ms latency on broker links 20s", took, *rig.exact())
    assert during[0] > 0 and during[1] > 0, f"no progress under latency: {during}"
    assert_resumed(took, "stage", "sink")


def test_only_the_transaction_coordinator_cut(rig):
    """Only the broker that coordinates the stage's transactions is blackholed, 20 s."""
    rig.progressing()
    node = rig.cluster.transaction_coordinator(rig.names.group + "-stage")
    rig.brokers[node].blackhole()
    time.sleep(20)
    took = rig.resume_after(rig.brokers[node].heal)
    rig.record(f"transaction coordinator (broker {node}) cut 20s", took, *rig.exact())
    assert_resumed(took, "stage", "sink")


def test_sink_to_mysql_cut(rig):
    """The sink's link to MySQL drops its bytes for 20 s; the stage is untouched."""
    rig.progressing()
    rig.mysql.blackhole()
    time.sleep(20)
    took = rig.resume_after(rig.mysql.heal, stage=False)
    rig.record("sink to MySQL cut 20s", took, *rig.exact())
    assert_resumed(took, "sink")


def test_mariadb_killed(rig, endpoints):
    """MariaDB SIGKILLed and started again; resume counted from the moment it answers."""
    if endpoints.kind != "embedded":
        pytest.skip("kills the embedded stack's MariaDB (testcontainers' is not ours to kill)")
    rig.progressing()
    db = stack.MariaDB()
    db.kill()
    time.sleep(3)

    def heal() -> None:
        db.up(log=lambda line: None)  # returns once it accepts logins

    took = rig.resume_after(heal, stage=False)
    rig.record("MariaDB SIGKILLed, restarted", took, *rig.exact())
    assert_resumed(took, "sink")


def test_a_hung_stage_never_takes_the_id_back_from_its_replacement(secured_cluster, tmp_path):
    """The first stage hangs inside send_offsets_to_transaction (a deterministic crash point)
    and is frozen (SIGSTOP) while an orchestrator starts a second one with the same ids. Once
    the second has committed, the first is let go on: its watchdog fires once the call has run
    past its limit (the time it stood stopped does not count), it finds the second one's claim
    in the state topic, and exits non-zero without creating a producer (so without fencing
    anyone) and without publishing. The replacement runs on; totals are exact."""
    cluster = secured_cluster
    names = Names.unique("hung")
    admin = cluster.admin_conf()
    cluster.admin().create_topics([NewTopic(names.topic("in"), 2)])[names.topic("in")].result(30)
    p = Producer({**admin, "log_level": 0})
    for i, v in enumerate(synthetic_lines(20_000, 9, malformed_ratio=0.01)):
        p.produce(names.topic("in"), v, partition=i % 2)
    assert p.flush(60) == 0
    props = cluster.write_java_properties(tmp_path / "client.properties", ADMIN_USER,
                                          cluster.admin_password)
    args = ["run", "--client-config", str(props), "--input-topic", names.topic("in"),
            "--output-topic", names.topic("out"), "--dlq-topic", names.topic("dlq"),
            "--group-id", names.group, "--master", "local[2]", "--metrics-port", "0",
            "--trigger-interval", "0.2", "--min-batch-interval", "0",
            "--max-records-per-batch", "2000"]
    old_log, new_log = tmp_path / "old.log", tmp_path / "new.log"
    old = start_cli(*args, env={"LOGCOUNT_CRASH_AT": "in_send_offsets:3",
                                "LOGCOUNT_CRASH_MODE": "hang"}, log_path=old_log)
    new = None
    try:
        wait_for(lambda: "in_send_offsets of batch 3: this thread hangs" in old_log.read_text(),
                 240, step_s=0.02, what="the first stage to hang")
        # Frozen well before its watchdog (seconds away) can fire: the orchestrator's moment.
        os.kill(old.pid, signal.SIGSTOP)
        new = start_cli(*args, log_path=new_log)
        wait_for(lambda: "batch 1 committed" in new_log.read_text(), 240,
                 what="the replacement's first commit")
        old_text = old_log.read_text()
        os.kill(old.pid, signal.SIGCONT)
        assert old.wait(120) != 0, "the superseded stage must exit non-zero"
        text = old_log.read_text()
        after = text[len(old_text):]
        assert "did not return within" in after, after  # the watchdog caught the hang
        assert " committed: " not in after, f"the superseded stage published:\n{after}"
        last = text.strip().splitlines()[-1]
        assert last.startswith("logcount: error:") and "another instance" in last, last
        assert "Traceback" not in text, text[-3000:]
        # The replacement was never fenced: it runs on and finishes the input.
        in_ends = end_offsets(admin, names.topic("in"))
        wait_for(lambda: group_offsets(admin, names.group, names.topic("in")) == in_ends, 240,
                 what="the replacement to finish the input")
        assert new.poll() is None, new_log.read_text()[-3000:]
        new.send_signal(signal.SIGTERM)
        assert new.wait(120) == 0
        assert "fenced" not in new_log.read_text()
    finally:
        for proc in (old, new):
            if proc is not None and proc.poll() is None:
                if proc is old:
                    os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
                proc.wait()
    expected, malformed, _ = expectation(read_all(admin, names.topic("in"), True, 120),
                                         read_all(admin, names.topic("in"), False, 120))
    assert sum(expected.values()) > 0
    assert_exact(admin, names, expected, malformed=malformed, timeout_s=120)
