"""A chaos run, modelled on Kafka's transactions_test.py and the Kafka Streams EOS system test.

A writer fills the input (plain records, committed and aborted transactions) while the stage and
the sink run under a supervisor that restarts them; a schedule kills and bounces everything at
random moments. Then a fresh read_committed reader recomputes the expectation from the committed
input with the independent reference parser (tests/support/reference.py) and checks every output.
With `grouped`, a second stage (--group-by) and sink over the same input die with the first, and
their series are checked against what the generator wrote for each committed record.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from confluent_kafka import KafkaException, Producer

from logcount.connectors import kafka_io, stack
from logcount.core.records import decode_final
from logcount.formats.shapes import SeriesCounts, SyntheticRecord, synthetic_records
from logcount.pipeline.crash import CRASH_EXIT_CODE
from tests.support.names import Names
from tests.support.readers import (
    end_offsets,
    group_offsets,
    held_topics,
    read_all,
    read_series_table,
    read_table,
    sink_offsets,
    totals_history,
)
from tests.support.reference import expectation
from tests.support.run import sink_args, stage_args, start_cli, wait_for


@dataclass(frozen=True)
class ChaosConfig:
    lines: int = 150_000
    partitions: int = 4
    stage_sigkills: int = 10
    stage_sigterms: int = 3
    # Some of the stage's SIGKILL-like deaths come from crash points at the worst moments
    # (after producing, before offsets); they are what at-least-once cannot survive. A point
    # dies in its process's first batch, or in batch N as `point:N`.
    stage_crash_points: int = 2
    crash_at: tuple[str, ...] = ("after_produce", "after_send_offsets")
    sink_sigkills: int = 5
    broker_bounces: int = 2
    mysql_restarts: int = 2
    delivery: str = "exactly-once"
    batch: int = 20_000
    # 15 stage-side faults over 240 s: one every ~15 s, so a restarted stage (~10 s to its
    # first commit) usually commits between two; the sink's 7 run on their own lane meanwhile.
    duration_s: float = 240.0
    seed: int = 11
    # A second stage with --group-by and its own sink over the same input, killed with the
    # first: keyed input (the generator's fleet, some keys nasty), checked per series.
    grouped: bool = False
    # The stage with --emit-final GRACE --rollup 1h, its input written in time order (each
    # partition in order; the writer's two producers may interleave chunks, so GRACE must
    # exceed what a broker bounce can hold one back), its final topic checked record by record.
    emit_final: str | None = None


# The grouped stage's dimensions and its sink's table; the fleet's quiet services get keys that
# an encoding or a collation could mangle (the generator's own names are plain words).
GROUP_BY = (("service", "key"), ("level", "level"))
SERIES_TABLE = "chaos_series"
NASTY_KEYS = {b"email": b"e|mail", b"inventory": b"in\"vent'ory", b"gateway": b"gate\nway",
              b"recommend": "r\u00e9commend \u2713".encode(), b"shipping": b""}


@dataclass
class Report:
    faults: Counter = field(default_factory=Counter)
    lines_checked: int = 0
    aborted_lines: int = 0
    lost: int = 0
    duplicated: int = 0
    series_checked: int = 0  # (minute, series) totals of the grouped run
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self, delivery: str) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        return (f"chaos[{delivery}]: faults injected: {faults}; lines checked "
                f"{self.lines_checked} (+{self.aborted_lines} aborted); series totals checked "
                f"{self.series_checked}; lost {self.lost}, "
                f"duplicated {self.duplicated}; "
                f"{'PASS' if self.ok else 'FAIL: ' + '; '.join(self.failures)}")


# A restarted process's seconds before the drain may stop it (its imports take ~1-2 s).
SETTLE_S = 5.0


class Supervised:
    """A logcount process that a supervisor restarts whenever it is found dead."""

    def __init__(self, name: str, args: list[str], log_path: Path) -> None:
        self.name, self.args, self.log_path = name, args, log_path
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.started_at = 0.0
        self.lock = threading.Lock()
        # A crash point stays armed until the process dies of it: a kill that lands before the
        # point is reached (a slow start on a busy machine) restarts the process armed again,
        # so every scheduled crash point fires whatever the machine's load.
        self.armed: dict | None = None
        self.crashes = 0

    def start(self, env: dict | None = None) -> None:
        with self.lock:
            if env is not None:
                self.armed = env
            self.proc = start_cli(*self.args, env=self.armed, log_path=self.log_path)
            self.starts += 1
            self.started_at = time.monotonic()

    def reap(self) -> None:
        """Disarm the crash point once the process died of it."""
        if self.proc is not None and self.proc.poll() == CRASH_EXIT_CODE and self.armed:
            self.armed = None
            self.crashes += 1

    def settled(self) -> bool:
        """Alive long enough to have its SIGTERM handler: a SIGTERM in its first second (still
        importing) ends it with -15, which the final stop would report as a failed stop."""
        return self.alive() and time.monotonic() - self.started_at >= SETTLE_S

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        with self.lock:
            proc = self.proc
            if proc is not None and self.alive():
                proc.send_signal(sig)
                try:
                    proc.wait(90)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def ensure(self) -> None:
        if not self.alive():
            self.reap()
            self.start()

    def stop(self) -> int | None:
        with self.lock:
            if self.proc is None:
                return None
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    return self.proc.wait(120)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    return self.proc.wait()
            return self.proc.returncode


class Writer(threading.Thread):
    """Writes the input over `duration_s` (or until `stop` is set): plain chunks, committed and
    aborted transactions. Survives broker bounces and kills: a transaction whose commit fails is
    aborted (or its producer replaced); whatever committed is what the checker counts. `conf`:
    client settings of a secured cluster."""

    def __init__(self, bootstrap: str, topic: str, cfg: ChaosConfig, txn_id: str,
                 conf: dict | None = None) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.cfg, self.txn_id = bootstrap, topic, cfg, txn_id
        self.conf = {**(conf or {}), "bootstrap.servers": bootstrap, "log_level": 0}
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.stop = threading.Event()
        self.aborted = 0  # transactions whose abort the broker confirmed
        # grouped: (key, value) -> what the generator wrote there, for the per-series check
        self.generated: dict[tuple[bytes | None, bytes], SyntheticRecord] = {}

    def _txn_producer(self) -> Producer:
        p = Producer({**self.conf, "transactional.id": self.txn_id,
                      "transaction.timeout.ms": 30000, "linger.ms": 20})
        while True:
            try:
                p.init_transactions(30)
                return p
            except KafkaException:
                time.sleep(1)

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc
        finally:
            self.done.set()

    def _run(self) -> None:
        cfg = self.cfg
        rng = random.Random(cfg.seed)
        plain = Producer({**self.conf, "enable.idempotence": True, "linger.ms": 20,
                          "message.timeout.ms": 600000})
        txn = self._txn_producer()
        lines = self._lines()
        chunk = max(500, cfg.lines // 200)
        pause = cfg.duration_s * 0.8 / (cfg.lines / chunk)
        # Paced by the clock, not by sleeps after each chunk: a transaction held up by a bounce
        # is caught up, so the input ends at 80% of the run, inside the fault window.
        t0, written = time.monotonic(), 0
        while written < cfg.lines and not self.stop.is_set():
            batch = [next(lines) for _ in range(min(chunk, cfg.lines - written))]
            written += len(batch)
            kind = rng.choice(("plain", "plain", "commit", "abort"))
            if kind == "plain":
                for kv in batch:
                    self._produce(plain, kv, rng)
                plain.poll(0)
            else:
                txn = self._transaction(txn, batch, rng, commit=kind == "commit")
            time.sleep(max(0.0, t0 + pause * written / chunk - time.monotonic()))
        left = plain.flush(600)
        assert left == 0, f"{left} plain records undelivered"

    def _lines(self):
        """(key, value) pairs: the seed shape's lines (the same with or without the fleet), keyed
        by the fleet's service when grouped."""
        records = synthetic_records("seed", self.cfg.lines, self.cfg.seed, malformed_ratio=0.01,
                                    dimensions=self.cfg.grouped)
        if self.cfg.emit_final:  # time order (the malformed lines, which have none, first)
            records = iter(sorted(records, key=lambda r: (r.minute is not None,
                                                          r.minute or 0)))
        for r in records:
            if not self.cfg.grouped:
                yield None, r.value
                continue
            if r.key is not None:
                r = replace(r, key=NASTY_KEYS.get(r.key, r.key))
            self.generated[(r.key, r.value)] = r
            yield r.key, r.value

    def _produce(self, p: Producer, kv: tuple[bytes | None, bytes], rng: random.Random) -> None:
        while True:
            try:
                p.produce(self.topic, kv[1], kv[0], partition=rng.randrange(self.cfg.partitions))
                return
            except BufferError:
                p.poll(0.1)

    def _transaction(self, txn: Producer, batch, rng, commit: bool) -> Producer:
        try:
            txn.begin_transaction()
            for kv in batch:
                self._produce(txn, kv, rng)
            if commit:
                txn.commit_transaction(60)
            else:
                txn.flush(60)
                txn.abort_transaction(60)
                self.aborted += 1
            return txn
        except KafkaException as exc:
            err = exc.args[0]
            if err.txn_requires_abort():
                try:
                    txn.abort_transaction(60)
                    return txn
                except KafkaException:
                    pass
            # Fatal, or abort failed: a new producer with the same id aborts what is open.
            return self._txn_producer()


def _bounce_broker() -> None:
    kafka = stack.Kafka()
    kafka.kill()
    time.sleep(2)
    kafka.up(log=lambda line: None)


def _restart_mysql(hard: bool) -> None:
    db = stack.MariaDB()
    if hard:
        db.kill()
    else:
        db.down(log=lambda line: None)
    time.sleep(2)
    db.up(log=lambda line: None)


def run_chaos(endpoints, names, url, cfg: ChaosConfig, workdir: Path) -> Report:
    report = Report()
    rng = random.Random(cfg.seed)
    kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), names.topic("in"), cfg.partitions)
    final = ["--emit-final", cfg.emit_final, "--rollup", "1h"] if cfg.emit_final else []
    stage = Supervised("stage", stage_args(
        endpoints, names, "--max-records-per-batch", str(cfg.batch), "--trigger-interval", "0.5",
        "--delivery", cfg.delivery, *final), workdir / "stage.log")
    sink = Supervised("sink", sink_args(endpoints, names, url), workdir / "sink.log")
    stages, sinks = [stage], [sink]
    gnames = grouped_names(names)
    if cfg.grouped:
        dims = ",".join(f"{n}={src}" for n, src in GROUP_BY)
        stages.append(Supervised("grouped stage", stage_args(
            endpoints, gnames, "--max-records-per-batch", str(cfg.batch), "--trigger-interval",
            "0.5", "--delivery", cfg.delivery, "--group-by", dims, "--level", "*",
            "--metrics-port", "0", input_topic=names.topic("in")), workdir / "gstage.log"))
        sinks.append(Supervised("grouped sink", sink_args(
            endpoints, gnames, url, "--table", SERIES_TABLE, "--metrics-port", "0"),
            workdir / "gsink.log"))
    writer = Writer(endpoints.bootstrap, names.topic("in"), cfg, names.txn_id + "-writer")

    schedule = fault_schedule(cfg, rng)
    everyone = stages + sinks
    for proc in everyone:
        proc.start()
    writer.start()
    t0 = time.monotonic()
    mysql_hard = True
    for at, fault in schedule:
        while time.monotonic() - t0 < at:
            for proc in everyone:
                proc.ensure()
            time.sleep(0.2)
        if fault == "stage_sigkill":
            for proc in stages:
                proc.signal(signal.SIGKILL)
        elif fault == "stage_sigterm":
            for proc in stages:
                proc.signal(signal.SIGTERM)
        elif fault == "stage_crash_point":
            point = rng.choice(cfg.crash_at)
            for proc in stages:
                proc.signal(signal.SIGKILL)
                proc.reap()  # an earlier point that fired meanwhile is counted, not re-armed
                proc.start(env={"LOGCOUNT_CRASH_AT": point if ":" in point else f"{point}:1"})
        elif fault == "sink_sigkill":
            for proc in sinks:
                proc.signal(signal.SIGKILL)
        elif fault == "broker_bounce":
            _bounce_broker()
        elif fault == "mysql_restart":
            _restart_mysql(hard=mysql_hard)
            mysql_hard = not mysql_hard
        report.faults[fault] += 1
    writer.join(timeout=cfg.duration_s * 3)
    if writer.error is not None or writer.is_alive():
        report.failures.append(f"writer failed: {writer.error!r}")
        for proc in everyone:
            proc.stop()
        return report

    # Drain: the stage commits the whole input, the sink stores the whole output in MySQL.
    ends = end_offsets(endpoints.bootstrap, names.topic("in"))

    def drained() -> bool:
        for proc in everyone:
            proc.ensure()
        if not all(proc.settled() for proc in everyone):
            return False  # one was just (re)started: stopping it now would be a kill
        return all(_drained(endpoints.bootstrap, n, url, names.topic("in"), ends)
                   for n in [names, gnames][:len(stages)])

    wait_for(drained, timeout_s=600, step_s=2, what="the stages and sinks to drain")
    for proc in everyone:
        proc.reap()
        code = proc.stop()
        if code != 0:
            report.failures.append(f"{proc.name} exited {code} on SIGTERM")
    report.faults["crash_point_fired"] = sum(proc.crashes for proc in stages)
    committed, malformed, totals = check(endpoints, names, url, report)
    if cfg.emit_final:
        check_finals(endpoints.bootstrap, names, report, totals)
    if cfg.grouped:
        check_grouped(endpoints.bootstrap, names, url, report, committed, malformed, totals,
                      writer.generated)
    return report


# Faults that a stage must recover from before the next one (~10 s to its first commit after a
# restart or a broker bounce) and faults only the sinks feel (a sink restarts in ~2 s).
STAGE_LANE = ("stage_sigkill", "stage_crash_point", "stage_sigterm", "broker_bounce")
SINK_LANE = ("sink_sigkill", "mysql_restart")


def fault_schedule(cfg: ChaosConfig, rng: random.Random) -> list[tuple[float, str]]:
    """(seconds from the start, fault) in time order: each lane's faults shuffled and evenly
    spaced over the run with jitter, the two lanes independent of each other, so a sink fault
    may land while a stage is restarting (the sink never waits on the stage)."""
    faults = (["stage_sigkill"] * (cfg.stage_sigkills - cfg.stage_crash_points)
              + ["stage_crash_point"] * cfg.stage_crash_points
              + ["stage_sigterm"] * cfg.stage_sigterms + ["sink_sigkill"] * cfg.sink_sigkills
              + ["broker_bounce"] * cfg.broker_bounces + ["mysql_restart"] * cfg.mysql_restarts)
    rng.shuffle(faults)
    schedule = []
    for lane in (STAGE_LANE, SINK_LANE):
        mine = [f for f in faults if f in lane]
        step = cfg.duration_s / (len(mine) + 1)
        schedule += [(step * (i + 1) + rng.uniform(-step / 3, step / 3), f)
                     for i, f in enumerate(mine)]
    return sorted(schedule)


def grouped_names(names: Names) -> Names:
    """The grouped stage's output, DLQ, group and transactional id (its input is `names`')."""
    return Names(names.prefix + "-g")


def _drained(bs: str, names: Names, url, in_topic: str, ends: dict[int, int]) -> bool:
    """The stage committed the whole input and the sink stored its whole output in MySQL."""
    try:
        if group_offsets(bs, names.group, in_topic, 20) != ends:
            return False
        out_ends = end_offsets(bs, names.topic("out"))
    except Exception:  # noqa: BLE001 - offsets unstable while a transaction is open
        return False
    return sink_offsets(url, names) == {p: o for p, o in out_ends.items() if o > 0}


def check(endpoints, names, url, report: Report) -> tuple[list, set, dict[str, int]]:
    """The checker: everything recomputed from the committed input by a fresh reader. Returns
    the committed input, the (partition, offset) of its malformed lines and the output's last
    totals (read before the probe below adds a record that is no total)."""
    bs = endpoints.bootstrap
    committed = read_all(bs, names.topic("in"), timeout_s=300)
    everything = read_all(bs, names.topic("in"), committed_only=False, timeout_s=300)
    expected, malformed, aborted_at = expectation(committed, everything)
    report.lines_checked = len(committed)
    report.aborted_lines = len(aborted_at)
    if not aborted_at:
        report.failures.append("no aborted input: the run did not test what it claims")

    table = read_table(url)
    for minute in set(expected) | set(table):
        diff = table.get(minute, 0) - expected.get(minute, 0)
        report.lost += max(0, -diff)
        report.duplicated += max(0, diff)
    if table != dict(expected):
        report.failures.append("MySQL error_log differs from the expectation")

    history = totals_history(read_all(bs, names.topic("out"), timeout_s=300))
    if any(v != sorted(v) for v in history.values()):
        report.failures.append("a total went down in the output topic")
    totals = {k: v[-1] for k, v in history.items()}
    if totals != dict(expected):
        report.failures.append("output topic (last per key) differs from the expectation")

    dlq = [json.loads(m.value()) for m in read_all(bs, names.topic("dlq"), timeout_s=300)]
    refs = [(d["partition"], d["offset"]) for d in dlq]
    if len(refs) != len(set(refs)):
        report.failures.append("a malformed line is in the DLQ more than once")
    if set(refs) != malformed:
        report.failures.append("DLQ differs from the malformed committed input")
    if set(refs) & aborted_at:
        report.failures.append("an aborted input record reached the DLQ")

    if group_offsets(bs, names.group, names.topic("in")) != end_offsets(bs, names.topic("in")):
        report.failures.append("group offsets differ from the input's end offsets")
    _check_no_hanging_transaction(bs, names, report)
    return committed, malformed, totals


def check_finals(bs: str, names: Names, report: Report, totals: dict[str, int]) -> None:
    """The final topic against the output's totals (which `check` held to the expectation):
    every minute from the first counted one on closed once and in order, its final total
    exact (zero included), its closed record last; every hour closed is the sum of its
    minutes."""
    minutes: dict[str, list] = {}
    hours: dict[str, list] = {}
    for m in read_all(bs, names.topic("out") + "-final", timeout_s=300):
        r = decode_final(m.value())
        span = (datetime.strptime(r.window_end, "%Y-%m-%d %H:%M:%S")
                - datetime.strptime(r.window_start, "%Y-%m-%d %H:%M:%S"))
        windows = minutes if span == timedelta(minutes=1) else hours
        windows.setdefault(r.window_start, []).append(r)
    for kind, windows in (("minute", minutes), ("hour", hours)):
        for start, recs in windows.items():
            if [r.closed for r in recs] != [False, True] or recs[0].count != recs[1].count:
                report.failures.append(f"final topic: {kind} {start} has "
                                       f"{[(r.count, r.closed) for r in recs]}")
    got = {k: v[0].count for k, v in minutes.items()}
    first = min(totals) if totals else None
    want = {}
    if got and first is not None:
        t, end = (datetime.strptime(x, "%Y-%m-%d %H:%M:%S") for x in (first, max(got)))
        while t <= end:
            key = t.strftime("%Y-%m-%d %H:%M:%S")
            want[key] = totals.get(key, 0)
            t += timedelta(minutes=1)
    if len(got) < 60:
        report.failures.append(f"final topic: only {len(got)} minutes closed")
    if got != want:
        differ = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        report.failures.append(f"final topic: {len(differ)} minutes differ from the totals, "
                               f"first {differ[:3]}")
    for start, recs in hours.items():
        h = datetime.strptime(start, "%Y-%m-%d %H:%M:%S")
        keys = [(h + timedelta(minutes=i)).strftime("%Y-%m-%d %H:%M:%S") for i in range(60)]
        if recs[0].count != sum(totals.get(k, 0) for k in keys):
            report.failures.append(f"final topic: hour {start} is not the sum of its minutes")
    report.series_checked += len(got) + len(hours)


def check_grouped(bs: str, names: Names, url, report: Report, committed: list,
                  malformed: set, totals: dict[str, int], generated: dict) -> None:
    """The grouped run, against what the generator wrote for each committed record (not a
    parse): every (minute, series) total, the sink's table, the ERROR series' sums against the
    ungrouped stage's totals, the DLQ and the offsets."""
    gnames = grouped_names(names)
    series = SeriesCounts(GROUP_BY, ["*"])
    for m in committed:
        r = generated.get((m.key(), m.value()))
        if r is None:
            report.failures.append(f"committed input {m.partition()}:{m.offset()} was never "
                                   f"written")
            return
        series.add(r)
    want = {(s["minute"], *s["dims"].values()): s["count"] for s in series.document()["series"]}
    report.series_checked = len(want)

    history: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for m in sorted(read_all(bs, gnames.topic("out"), timeout_s=300),
                    key=lambda m: (m.partition(), m.offset())):
        v = json.loads(m.value())
        key = (v["log_time"], *v["dims"].values())
        if list(v["dims"]) != [n for n, _ in GROUP_BY] or json.loads(m.key()) != list(key):
            report.failures.append(f"grouped record {m.key()!r} -> {v} is misshapen")
            return
        history[key].append(v["log_count"])
    last = {k: v[-1] for k, v in history.items()}
    if any(v != sorted(v) for v in history.values()):
        report.failures.append("a series total went down in the grouped output topic")
    if last != want:
        wrong = {k for k in set(last) | set(want) if last.get(k) != want.get(k)}
        report.failures.append(f"grouped output (last per key) differs from the generator's "
                               f"expectation in {len(wrong)} series totals, e.g. "
                               f"{sorted(wrong)[:3]}")
    if read_series_table(url, SERIES_TABLE, [n for n, _ in GROUP_BY]) != last:
        report.failures.append(f"MySQL {SERIES_TABLE} differs from the grouped output")
    nasty = {v.decode() for v in NASTY_KEYS.values()}
    if not nasty <= {k[1] for k in last}:
        report.failures.append("a nasty key is missing from the grouped output")

    errors: Counter = Counter()
    for (minute, _, level), n in last.items():
        errors[minute] += n if level == "ERROR" else 0
    if +errors != totals:
        report.failures.append("the grouped ERROR series do not add up to the ungrouped totals")

    dlq = [json.loads(m.value()) for m in read_all(bs, gnames.topic("dlq"), timeout_s=300)]
    refs = [(d["partition"], d["offset"]) for d in dlq]
    if len(refs) != len(set(refs)) or set(refs) != malformed:
        report.failures.append("the grouped DLQ differs from the malformed committed input")
    if group_offsets(bs, gnames.group, names.topic("in")) != end_offsets(bs, names.topic("in")):
        report.failures.append("grouped group offsets differ from the input's end offsets")
    for topic in held_topics(bs, (gnames.topic("out"), gnames.topic("dlq"))):
        report.failures.append(f"a transaction is left open on {topic}")


def _check_no_hanging_transaction(bs: str, names, report: Report) -> None:
    for topic in held_topics(bs, (names.topic("out"), names.topic("dlq"))):
        report.failures.append(f"a transaction is left open on {topic}")
    # A new transactional write commits and is read back within the transaction timeout.
    p = Producer({"bootstrap.servers": bs, "transactional.id": names.txn_id + "-probe",
                  "transaction.timeout.ms": 60000})
    t0 = time.monotonic()
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(names.topic("out"), b'{"probe": true}', b"__chaos_probe__")
    p.commit_transaction(60)
    seen = any(m.key() == b"__chaos_probe__" for m in read_all(bs, names.topic("out")))
    if not seen or time.monotonic() - t0 > 60:
        report.failures.append("a new transaction on the output topic was not readable in time")


def config_from_env(delivery: str) -> ChaosConfig:
    """`LOGCOUNT_CHAOS_SCALE=full`: the issue's full scale (1M lines); default: the CI run."""
    if os.environ.get("LOGCOUNT_CHAOS_SCALE") == "full":
        return ChaosConfig(lines=1_000_000, batch=100_000, duration_s=420.0, delivery=delivery)
    return ChaosConfig(delivery=delivery)
