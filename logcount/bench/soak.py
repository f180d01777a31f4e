"""Endurance: `logcount bench --soak MINUTES` or `python -m logcount.bench.soak --minutes MINUTES`.

Runs the real stage (`logcount run`, its own process tree) on the embedded stack for MINUTES at a
fixed input rate with a short trigger, and every `--sample-seconds` samples:
- RSS, threads and open file descriptors of the stage's Python process and of its JVM child
  (/proc/PID/status and /proc/PID/fd);
- the JVM's heap after a full collection and its metaspace (`jcmd PID GC.run` then
  `GC.heap_info`: why, in `jcmd_run`);
- batches committed, their mean Spark and commit time and the cycle (interval / batches) from
  the stage's own /metrics;
- the p50 of the probe latency (produced -> seen by a read_committed reader) of the interval.

Probe lines cycle over PROBE_MINUTES minutes of their own (in 2031) and the filler over the
synthetic day's 1,440 minutes of 2017, so the set of minutes the stage holds stops growing once
each has been seen: any growth the soak shows is the stage's own, not its input's. (A production
stage holds one more minute per minute, bounded by --lateness-horizon.)

At the end the producer stops, the stage drains and gets SIGTERM, and the output topic's totals
must equal what was produced, exactly. Per series the report gives the least-squares slope per
hour and the first third's mean and max against the last third's, and judges the soak's goals
(`goals`). A class histogram before the first sample and after the last names what grew
in the heap; `--nmt` samples the JVM's native memory by category. It writes DIR/soak.json,
DIR/soak.md and DIR/soak.png; the stage's own output is kept in DIR/logs/.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Producer

from logcount.bench import soak_report
from logcount.bench.latency import TICK_S, ProbeReader, percentile, probe_minute
from logcount.bench.procs import Child
from logcount.bench.runner import Bench, committed_totals
from logcount.bench.soak_analysis import (
    PROBE_MINUTES,
    SERIES,
    diff_totals,
    expected_totals,
    goals,
    histogram_growth,
    nmt_series,
    summarize,
)
from logcount.bench.soak_report import markdown
from logcount.bench.soak_sampling import Sampler, find_jvm, scrape
from logcount.connectors import kafka_io, stack
from logcount.core.errors import DependencyError
from logcount.core.paths import home
from logcount.core.records import decode_total
from logcount.core.settings import BenchSettings, RunSettings
from logcount.core.settings.commands import SOAK_MODES
from logcount.formats.shapes import expected_from_records, synthetic_records

log = logging.getLogger("logcount.bench.soak")

DEFAULT_RATE = 2_000
DEFAULT_SAMPLE_S = 15.0
# The stage sleeps --trigger-interval only when a plan finds nothing new; at a fixed rate a
# batch (~100-300 ms here) always finds the lines that arrived meanwhile, so the trigger only
# decides how soon an idle stage looks again. 50 ms keeps it from adding to the cycle.
DEFAULT_TRIGGER_S = 0.05
# Run before the first sample: JIT compilation, the heap sizing itself and the first ramp-up
# batches are not the steady state. A tenth of a shorter run, so a smoke run stays short.
DEFAULT_WARMUP_S = 60.0
FILLER_RECORDS = 100_000  # synthetic seed lines, sent in a cycle
PARTITIONS = 4


# -- the probe traffic ------------------------------------------------------------------------

class SoakProducer(threading.Thread):
    """`rate` lines/s until stopped: one probe per tick (probe k into minute k % M), the rest
    filler lines taken in a cycle, so what was sent is known from two counts."""

    def __init__(self, bootstrap: str, topic: str, filler: Sequence[bytes], rate: int,
                 partitions: int, probe_minutes: int = PROBE_MINUTES) -> None:
        super().__init__(daemon=True)
        self.args = (topic, filler, rate, partitions, probe_minutes)
        self.sent: list[float] = []  # probe k's send time (monotonic)
        self.filler_sent = 0
        self.failed = 0
        self.stop = threading.Event()
        self.seconds = 0.0
        # linger 5 ms: a record waits at most that long in the client; the latency is the stage's.
        self.p = Producer(kafka_io.client_config(bootstrap, None, **{
            "linger.ms": 5, "enable.idempotence": True, "compression.type": "lz4"}))

    def _send(self, topic: str, value: bytes, partition: int) -> None:
        while True:
            try:
                self.p.produce(topic, value, partition=partition, on_delivery=self._delivered)
                return
            except BufferError:  # the client's queue is full (a broker away): let it drain
                self.p.poll(0.1)

    def _delivered(self, err, _msg) -> None:
        if err is not None:
            self.failed += 1

    def run(self) -> None:
        topic, filler, rate, partitions, m = self.args
        per_tick = max(1, int(rate * TICK_S))
        start = time.monotonic()
        i = tick = 0
        while not self.stop.is_set():
            k = len(self.sent)
            minute = probe_minute(k % m)
            self._send(topic, f"{minute[:17]}07 ERROR probe {k}".encode(), k % partitions)
            self.sent.append(time.monotonic())
            for _ in range(per_tick - 1):
                self._send(topic, filler[i % len(filler)], (i // 100) % partitions)
                i += 1
            self.filler_sent = i
            self.p.poll(0)
            tick += 1
            delay = start + tick * TICK_S - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.seconds = time.monotonic() - start
        # 60 s: the idempotent producer retries through a broker blip; past that, what was
        # not delivered counts as failed and the totals check says so.
        left = self.p.flush(60)
        self.failed += left

    @property
    def lines(self) -> int:
        return len(self.sent) + self.filler_sent


class CyclingProbeReader(ProbeReader):
    """The latency reader, for probes that cycle over `probe_minutes` minutes. A probe minute's
    total T means probes j, j + M, ..., j + (T-1)M are in: each is marked seen when its total
    first shows."""

    def __init__(self, bootstrap: str, topic: str, group: str,
                 probe_minutes: int = PROBE_MINUTES) -> None:
        super().__init__(bootstrap, topic, group)
        self.m = probe_minutes
        self.index = {probe_minute(j).encode(): j for j in range(probe_minutes)}
        self.counted = [0] * probe_minutes
        self.seen = {}  # probe number -> when it was first seen

    def record(self, m, now: float) -> None:
        j = self.index.get(m.key())
        if j is None:
            return
        total = decode_total(m.value() or b"").count
        for n in range(self.counted[j], total):
            self.seen.setdefault(j + n * self.m, now)
        self.counted[j] = max(self.counted[j], total)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def warmup_seconds(minutes: float) -> float:
    """The default warm-up: DEFAULT_WARMUP_S, or a tenth of a shorter measured window."""
    return min(DEFAULT_WARMUP_S, minutes * 60 / 10)


@dataclass(frozen=True)
class SoakPlan:
    minutes: float
    out: str
    rate: int = DEFAULT_RATE
    sample_s: float = DEFAULT_SAMPLE_S
    warmup_s: float | None = None  # None: warmup_seconds(minutes)
    trigger_s: float = DEFAULT_TRIGGER_S
    # The stage's own default cadence unless told: `logcount bench --soak` soaks the defaults.
    min_batch_interval: float = RunSettings.min_batch_interval
    partitions: int = PARTITIONS
    seed: int = 1
    bootstrap: str | None = None
    nmt: bool = False  # the stage's JVM with Native Memory Tracking, sampled per category


class Soak:
    def __init__(self, plan: SoakPlan) -> None:
        self.plan = plan
        self.warmup_s = warmup_seconds(plan.minutes) if plan.warmup_s is None else plan.warmup_s
        self.bench = Bench(BenchSettings(out=plan.out, bootstrap_servers=plan.bootstrap))
        self.out = self.bench.out
        self.samples: list[dict] = []
        self.sampler = Sampler(self.out, plan.nmt)
        self.started = time.strftime("%Y-%m-%d %H:%M:%S")

    def run(self) -> dict:
        p, b = self.plan, self.bench
        topic, out_topic = b.name("soak-in"), b.name("soak-out")
        kafka_io.ensure_topic(kafka_io.admin(b.bootstrap), topic, p.partitions)
        records = list(synthetic_records("seed", FILLER_RECORDS, p.seed))
        filler = [r.value for r in records]
        port = _free_port()
        env = None
        if p.nmt:  # the JVM reads it at start (the launcher's short-lived JVM too, harmlessly)
            env = {"JAVA_TOOL_OPTIONS": f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} "
                                        f"-XX:NativeMemoryTracking=summary".strip()}
        stage = Child(b.stage_argv(topic, "soak", "--metrics-port", str(port),
                                   "--trigger-interval", str(p.trigger_s),
                                   "--min-batch-interval", str(p.min_batch_interval)), env=env,
                      log_path=str(b.logs / "soak_stage.log"), sample=False)
        producer = SoakProducer(b.bootstrap, topic, filler, p.rate, p.partitions)
        reader = None
        try:
            producer.start()
            # 180 s: the session starts in ~3-5 s, but the machine may be busy with others.
            stage.wait_for_line("batch 1 committed", 180)
            reader = CyclingProbeReader(b.bootstrap, out_topic, b.name("soak-rd"))
            reader.start()
            jvm = find_jvm(stage.proc.pid)
            if jvm is None:
                raise DependencyError("soak: no java process under the stage")
            log.info("soak: stage pid %d, JVM pid %d; warm-up %gs, then %g minutes, a sample "
                     "every %gs", stage.proc.pid, jvm, self.warmup_s, p.minutes, p.sample_s)
            self._alive_sleep(stage, self.warmup_s)
            self.sampler.histogram(jvm)  # before the first interval, so that it times none
            t0 = time.monotonic()
            base = self.sampler.sample(0.0, stage.proc.pid, jvm, port, {}, 0.0)
            prev, t_prev, probe0 = base["_metrics"], 0.0, len(producer.sent)
            boundaries = [probe0]
            n = max(1, round(p.minutes * 60 / p.sample_s))
            for i in range(1, n + 1):
                self._alive_sleep(stage, t0 + i * p.sample_s - time.monotonic())
                if not producer.is_alive():
                    raise DependencyError("soak: the producer stopped; its log lines say why")
                t = time.monotonic() - t0
                row = self.sampler.sample(t, stage.proc.pid, jvm, port, prev, t_prev)
                if (cur := row.pop("_metrics")) is not None:
                    prev, t_prev = cur, t
                boundaries.append(len(producer.sent))
                self.samples.append(row)
                log.info("soak %d/%d: %s", i, n, {k: v for k, v in row.items() if k != "t"})
            self.sampler.histogram(jvm)
            producer.stop.set()
            # 90 s: flushing is seconds; a producer thread still busy after that is a bug here.
            producer.join(90)
            drained = self._drain(stage, reader, producer, port)
        finally:
            producer.stop.set()
            if stage.proc.poll() is None:
                stage.signal(signal.SIGTERM)
            # 120 s: a stop finishes the batch in flight and closes Spark, seconds normally.
            rc = stage.wait(120)
            if reader is not None:
                reader.stop.set()
                reader.join(10)  # the reader's poll returns within 50 ms
        cycles, rest = divmod(producer.filler_sent, len(records))
        want = expected_totals(expected_from_records(records, ["ERROR"]),
                               expected_from_records(records[:rest], ["ERROR"]), cycles,
                               len(producer.sent))
        got = committed_totals(b.bootstrap, out_topic)
        wrong = diff_totals(got, want)
        return self.results(producer, reader, boundaries, wrong, want, drained, rc, base)

    def _alive_sleep(self, stage: Child, seconds: float) -> None:
        end = time.monotonic() + max(0.0, seconds)
        while time.monotonic() < end:
            if stage.proc.poll() is not None:
                raise DependencyError(f"soak: the stage exited {stage.proc.returncode}: "
                                      f"{stage.tail()}")
            time.sleep(min(0.5, max(0.0, end - time.monotonic())))

    def _drain(self, stage: Child, reader: CyclingProbeReader, producer: SoakProducer,
               port: int) -> bool:
        """Wait until the stage has read every line produced and the reader has seen every
        probe; False if that did not happen within DRAIN_S."""
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline:
            try:
                read = scrape(port).get("logcount_records_read_total", 0)
            except (OSError, ValueError):
                read = 0  # asked again in half a second
            if read >= producer.lines and len(reader.seen) >= len(producer.sent):
                return True
            self._alive_sleep(stage, 0.5)
        log.warning("soak: not drained after %ds", DRAIN_S)
        return False

    def results(self, producer: SoakProducer, reader: CyclingProbeReader | None,
                boundaries: list[int], wrong: list[str], want: dict[str, int], drained: bool,
                rc: int, base: dict) -> dict:
        p = self.plan
        seen = reader.seen if reader else {}
        jcmd_s, histograms = self.sampler.jcmd_s, self.sampler.histograms

        def lat(lo: int, hi: int) -> list[float]:
            return [(seen[k] - producer.sent[k]) * 1000 for k in range(lo, hi) if k in seen]

        for i, row in enumerate(self.samples):
            got = lat(boundaries[i], boundaries[i + 1])
            row["latency_p50_ms"] = round(percentile(got, 50), 1) if got else None
        k = len(self.samples) // 3
        first = lat(boundaries[0], boundaries[k]) if k else []
        last = lat(boundaries[-1 - k], boundaries[-1]) if k else []
        measured = lat(boundaries[0], boundaries[-1])
        ts = [row["t"] for row in self.samples]
        series = {name: summarize(ts, [row.get(name) for row in self.samples])
                  for name in SERIES}
        batches = sum(row["batches"] or 0 for row in self.samples)
        window = self.samples[-1]["t"] if self.samples else 0.0
        exact = not wrong and producer.failed == 0 and drained and rc == 0
        lat_thirds = (round(percentile(first, 50), 1) if first else None,
                      round(percentile(last, 50), 1) if last else None)
        verdict = ("exact" if exact else
                   f"**differ** ({len(wrong)} minutes; {producer.failed} lines not delivered; "
                   f"drained {drained}; stage exit {rc})")
        r = {"minutes": p.minutes, "rate_lines_per_s": p.rate, "sample_seconds": p.sample_s,
             "warmup_seconds": self.warmup_s, "trigger_interval_s": p.trigger_s,
             "min_batch_interval_s": p.min_batch_interval,
             "input_partitions": p.partitions, "cores": os.cpu_count() or 0,
             "started": self.started, "plan": asdict(p),
             "batches": batches, "batches_per_s": round(batches / window, 2) if window else None,
             "lines_produced": producer.lines,
             "achieved_rate": round(producer.lines / producer.seconds) if producer.seconds else 0,
             "probes": len(producer.sent),
             "latency_ms": {"p50": round(percentile(measured, 50), 1) if measured else None,
                            "p99": round(percentile(measured, 99), 1) if measured else None,
                            "probes_seen": len(seen), "first_third_p50": lat_thirds[0],
                            "last_third_p50": lat_thirds[1]},
             "jcmd_seconds_mean": round(sum(jcmd_s) / len(jcmd_s), 2) if jcmd_s else None,
             "baseline": {key: v for key, v in base.items() if not key.startswith("_")},
             "totals": {"exact": exact, "verdict": verdict, "minutes": len(want),
                        "differing": wrong[:10], "undelivered": producer.failed,
                        "drained": drained, "stage_exit": rc},
             "series": series,
             "heap_histogram_growth": histogram_growth(histograms[0], histograms[-1])
             if len(histograms) > 1 else [],
             "nmt": nmt_series(ts, self.samples) if p.nmt else {},
             "samples": self.samples}
        r["goals"] = goals(series, lat_thirds, batches, p.minutes, exact, p.min_batch_interval)
        return r


# 120 s: at 2,000 lines/s the stage is seconds behind at most; a stage that cannot catch up in
# two minutes has fallen behind, which the report must show rather than wait for.
DRAIN_S = 120


def run_soak(plan: SoakPlan, say: Callable[[str], None] = print) -> int:
    """Run the soak, write its files; 0 when the totals are exact (goals are reported), else 1."""
    if plan.bootstrap is None:
        stack.up(log=log.info)
    os.environ.setdefault("PYTHONPATH", str(home()))
    soak = Soak(plan)
    r = soak.run()
    soak_report.write(r, soak.out)
    say(markdown(r))
    say(f"soak: wrote {soak.out / 'soak.json'}, soak.md, soak.png")
    return 0 if r["totals"]["exact"] else 1


def plans_from_settings(s: BenchSettings) -> list[SoakPlan]:
    """`logcount bench --soak MINUTES ...` (logcount.core.settings.BenchSettings) -> a SoakPlan
    per --soak-modes cadence, in --out/MODE when there are several."""
    assert s.soak is not None  # only called for --soak
    many = len(s.soak_mode_list) > 1
    return [SoakPlan(minutes=s.soak, out=str(Path(s.out) / mode) if many else s.out,
                     rate=s.soak_rate, sample_s=s.sample_seconds, seed=s.seed,
                     bootstrap=s.bootstrap_servers, min_batch_interval=SOAK_MODES[mode])
            for mode in s.soak_mode_list]


def run_soaks(plans: Sequence[SoakPlan], say: Callable[[str], None] = print) -> int:
    """Each plan in turn, on one stack; 0 when every one was exact."""
    return max(run_soak(plan, say) for plan in plans)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, required=True, help="measured minutes")
    ap.add_argument("--rate", type=int, default=DEFAULT_RATE, help="input lines/s")
    ap.add_argument("--sample-seconds", type=float, default=DEFAULT_SAMPLE_S)
    ap.add_argument("--warmup-seconds", type=float, default=None,
                    help=f"seconds run before the first sample (default: "
                         f"{DEFAULT_WARMUP_S:g}, or a tenth of a shorter run)")
    ap.add_argument("--trigger", type=float, default=DEFAULT_TRIGGER_S,
                    help="the stage's --trigger-interval")
    ap.add_argument("--min-batch-interval", type=float, default=RunSettings.min_batch_interval,
                    help="the stage's --min-batch-interval (default: the stage's own, "
                         f"{RunSettings.min_batch_interval:g}; 0: the unpaced, low-latency mode)")
    ap.add_argument("--partitions", type=int, default=PARTITIONS, help="input partitions")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None, help="directory for soak.* (default: a temp dir)")
    ap.add_argument("--bootstrap-servers", default=None,
                    help="use this broker instead of the embedded stack")
    ap.add_argument("--nmt", action="store_true",
                    help="start the stage's JVM with Native Memory Tracking (a few %% slower) "
                         "and report each category's committed memory: where RSS grows")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: "
                        "%(message)s")
    plan = SoakPlan(minutes=a.minutes, out=a.out or tempfile.mkdtemp(prefix="logcount-soak-"),
                    rate=a.rate, sample_s=a.sample_seconds, warmup_s=a.warmup_seconds,
                    trigger_s=a.trigger, min_batch_interval=a.min_batch_interval,
                    partitions=a.partitions, seed=a.seed,
                    bootstrap=a.bootstrap_servers, nmt=a.nmt)
    return run_soak(plan)


if __name__ == "__main__":
    sys.exit(main())
