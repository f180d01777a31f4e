"""`logcount bench --final`: what `--emit-final 1m` costs and how soon a live minute's final
record is out, on the embedded stack.

For each rate (--final-rates), the stage runs twice at its defaults on a fresh 4-partition topic,
the same producer and durations each time: without --emit-final and with --emit-final 1m (the
order alternates between rates, so a slow stretch of the machine does not always fall on the
same side). The producer writes `rate` lines/s in 50 ms ticks, the latency bench's filler (the
seed generator's mix of levels and its ~1 % malformed lines) with every well-formed line stamped
with the current UTC time, to every partition each tick.

  CPU     the stage's whole process tree (Python driver and JVM, logcount/bench/procs.py) over
          --final-seconds after --latency-warmup-seconds of warm-up, per million lines produced
          in that window; the goal is the with / without ratio
  delay   in the emit-final run, a read_committed reader of the final topic notes when each
          minute's closed record arrives (the wall clock); delay = arrival - (the minute's end +
          GRACE). The run goes on until --final-minutes minutes whose end + GRACE fell after the
          warm-up have closed; each closed record's count is checked against the ERROR lines the
          producer stamped in that minute.

Writes final.json and final.md in --out; the goals are docs/benchmarks.md's (Final minutes).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer

from logcount.bench.latency import TICK_S, ProbeReader, percentile
from logcount.bench.runner import PACED_INTERVAL_S, Bench, run_steps
from logcount.connectors import kafka_io, stack
from logcount.core.paths import home
from logcount.core.records import decode_final
from logcount.core.settings import BenchSettings
from logcount.formats.shapes import synthetic_records

log = logging.getLogger("logcount.bench")

GRACE = "1m"
GRACE_S = 60
CPU_GOAL = 1.05  # CPU per line with --emit-final / without, at most
DELAY_GOAL_MS = 1500.0  # a live minute's closed record, after its end + GRACE, p99 at most
PARTITIONS = 4
FILLER_LINES = 100_000
_STAMP_LEN = len("2017-07-30 14:09:08")
# A closed record not seen this long after its minute's end + GRACE is reported missing.
MISSING_AFTER_S = 60.0


# -- pure parts ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Filler:
    """A line of the filler: its text after the timestamp (well-formed lines) or its whole text
    (malformed ones, sent as they are), and whether it is an ERROR line."""

    rest: bytes
    stamped: bool
    error: bool


def filler(n: int, seed: int) -> list[Filler]:
    """The seed generator's lines (the latency bench's filler), their timestamps cut off."""
    out = []
    for r in synthetic_records("seed", n, seed):
        if r.minute is None:
            out.append(Filler(r.value, False, False))
        else:
            out.append(Filler(r.value[_STAMP_LEN:], True, r.level == "ERROR"))
    return out


def stamp(t: datetime) -> bytes:
    """A UTC instant as a seed line's timestamp: b'YYYY-MM-DD HH:MM:SS'."""
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S").encode()


def line(f: Filler, now: bytes) -> bytes:
    """The line sent for `f` at the instant stamped `now` (a malformed line as it is)."""
    return now + f.rest if f.stamped else f.rest


def minute_of(now: bytes) -> str:
    """The minute ('YYYY-MM-DD HH:MM:00') of a stamp."""
    return now[:16].decode() + ":00"


def deadline(window_end: str, grace_s: int) -> float:
    """A minute's end + GRACE, in seconds since the epoch (the window's text is UTC)."""
    end = datetime.strptime(window_end, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return (end + timedelta(seconds=grace_s)).timestamp()


def delay_summary(delays_ms: Sequence[float]) -> dict:
    """p50, p99 (nearest rank: with fewer than 100 minutes, the max) and max of the delays."""
    if not delays_ms:
        return {"minutes": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    return {"minutes": len(delays_ms), "p50_ms": round(percentile(delays_ms, 50), 1),
            "p99_ms": round(percentile(delays_ms, 99), 1), "max_ms": round(max(delays_ms), 1)}


def ratio(with_final: float | None, without: float | None) -> float | None:
    return round(with_final / without, 3) if with_final is not None and without else None


def judge(cpu_ratio: float | None, p99_ms: float | None, missing: int, exact: bool) -> dict:
    """Each goal met or not: CPU ratio <= CPU_GOAL; p99 <= DELAY_GOAL_MS with no minute missing
    and every closed count exact."""
    return {"cpu": cpu_ratio is not None and cpu_ratio <= CPU_GOAL,
            "delay": p99_ms is not None and p99_ms <= DELAY_GOAL_MS and missing == 0 and exact}


# -- the instruments ----------------------------------------------------------------------------
class StampedProducer(threading.Thread):
    """`rate` lines/s of the filler, stamped with the current UTC time, in TICK_S ticks, each
    tick's lines spread over every partition; counts the ERROR lines of each minute it stamped."""

    def __init__(self, bootstrap: str, topic: str, lines: Sequence[Filler], rate: int,
                 partitions: int) -> None:
        super().__init__(daemon=True)
        self.topic, self.filler, self.rate, self.partitions = topic, lines, rate, partitions
        self.lines = 0
        self.errors: dict[str, int] = {}
        self.stop = threading.Event()
        self.p = Producer(kafka_io.client_config(bootstrap, None, **{
            "linger.ms": 5, "enable.idempotence": True, "compression.type": "lz4"}))

    def run(self) -> None:
        per_tick = max(1, int(self.rate * TICK_S))
        start = time.monotonic()
        i = tick = 0
        while not self.stop.is_set():
            now = stamp(datetime.now(UTC))
            minute = minute_of(now)
            for _ in range(per_tick):
                f = self.filler[i % len(self.filler)]
                self.p.produce(self.topic, line(f, now), partition=i % self.partitions)
                if f.error:
                    self.errors[minute] = self.errors.get(minute, 0) + 1
                i += 1
            self.lines += per_tick
            self.p.poll(0)
            tick += 1
            delay = start + tick * TICK_S - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.p.flush(30)


class ClosedReader(ProbeReader):
    """The final topic, read_committed: when (the wall clock) each minute's closed record first
    arrived, and its count."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(bootstrap, topic, group)
        self.closed: dict[str, tuple[float, str, int]] = {}  # start -> (arrival, end, lines)

    def record(self, m, now: float) -> None:
        arrived = time.time()
        r = decode_final(m.value() or b"")
        if r.closed and r.window_start not in self.closed:
            self.closed[r.window_start] = (arrived, r.window_end, r.count)


# -- the runs -----------------------------------------------------------------------------------
def one_run(b: Bench, s: BenchSettings, lines: list[Filler], rate: int, emit: bool) -> dict:
    """The stage at its defaults under `rate` stamped lines/s, with --emit-final GRACE or not."""
    tag = f"fin-r{rate}-{'on' if emit else 'off'}"
    topic = b.name(f"{tag}-in")
    kafka_io.ensure_topic(kafka_io.admin(b.bootstrap), topic, PARTITIONS)
    extra = ["--emit-final", GRACE] if emit else []
    label = f"final_{rate}_{'with' if emit else 'without'}"
    c = b.child(label, b.stage_argv(topic, tag, *extra))
    producer = StampedProducer(b.bootstrap, topic, lines, rate, PARTITIONS)
    producer.start()
    reader: ClosedReader | None = None
    try:
        # 180 s: a cold start is seconds (Spark's ~4 s); minutes mean it is stuck.
        c.wait_for_line("batch 1 committed", 180)
        if emit:
            reader = ClosedReader(b.bootstrap, b.name(f"{tag}-out") + "-final",
                                  b.name(f"{tag}-rd"))
            reader.start()
        time.sleep(s.latency_warmup_seconds)
        measured_from = time.time()
        cpu0, lines0, t0 = c.sample_now().cpu_seconds, producer.lines, time.monotonic()
        time.sleep(s.final_seconds)
        cpu1, lines1, t1 = c.sample_now().cpu_seconds, producer.lines, time.monotonic()
        if reader is not None:
            # on until --final-minutes minutes whose end + GRACE fell after the warm-up closed,
            # or the last of them is MISSING_AFTER_S late
            first = (int(measured_from // 60) + 1) * 60  # the first deadline in the window
            last = first + (s.final_minutes - 1) * 60
            while time.time() < last + MISSING_AFTER_S and not any(
                    deadline(end, GRACE_S) >= last for _, end, _ in reader.closed.values()):
                time.sleep(0.2)
        stats = c.sample_now()
        cpu_all, lines_all, t_all = stats.cpu_seconds - cpu0, producer.lines - lines0, (
            time.monotonic() - t0)
        stopped_at = time.time()
    finally:
        producer.stop.set()
        producer.join(30)
        if reader is not None:
            reader.stop.set()
            reader.join(10)  # the reader's poll returns within 50 ms
        c.signal(signal.SIGTERM)
        c.wait(120)  # 120 s: a stop finishes the batch in flight and closes, seconds
    cpu, n = cpu1 - cpu0, lines1 - lines0
    out = {"rate": rate, "emit_final": GRACE if emit else None,
           "min_batch_interval_s": PACED_INTERVAL_S, "warmup_seconds": s.latency_warmup_seconds,
           "window_seconds": round(t1 - t0, 1), "window_lines": n,
           "rate_lines_per_s": round(n / (t1 - t0)) if t1 > t0 else 0,
           "window_cpu_seconds": round(cpu, 2),
           "cpu_s_per_m_lines": round(cpu / n * 1e6, 2) if n else None,
           "peak_rss_mb": round(stats.peak_rss_mb(), 1)}
    if reader is not None:
        out.update(closed_minutes(reader, producer, measured_from, stopped_at))
        out["whole_run_seconds"] = round(t_all, 1)
        out["whole_run_cpu_s_per_m_lines"] = (round(cpu_all / lines_all * 1e6, 2)
                                              if lines_all else None)
    log.info("%s: %s", label, out)
    return out


def closed_minutes(reader: ClosedReader, producer: StampedProducer, measured_from: float,
                   stopped_at: float) -> dict:
    """The minutes whose end + GRACE fell in the measured part of a live run: each one's delay
    (or missing), and its closed count against the ERROR lines stamped in it."""
    minutes: list[dict] = []
    seen = {deadline(end, GRACE_S): (start, arrived, count)
            for start, (arrived, end, count) in reader.closed.items()}
    first = int(measured_from // 60 + 1) * 60  # the first deadline after the warm-up
    # every deadline in the run, and any closed record seen beyond it (one that came before its
    # minute's end + GRACE would be a closing bug: shown, with its negative delay)
    due = sorted({*range(first, int(stopped_at) + 1, 60), *(d for d in seen if d >= first)})
    delays: list[float] = []
    for d in due:
        if d not in seen:
            if d + MISSING_AFTER_S <= stopped_at:
                minutes.append({"minute": datetime.fromtimestamp(d - GRACE_S - 60, UTC).strftime(
                    "%Y-%m-%d %H:%M:00"), "delay_ms": None, "missing": True})
            continue
        start, arrived, count = seen[d]
        delays.append(round((arrived - d) * 1000, 1))
        stamped = producer.errors.get(start, 0)
        minutes.append({"minute": start, "delay_ms": delays[-1], "closed_lines": count,
                        "stamped_errors": stamped, "exact": count == stamped})
    return {"minutes": minutes, **{f"delay_{k}": v for k, v in delay_summary(delays).items()},
            "missing": sum(1 for m in minutes if m.get("missing")),
            "exact": all(m.get("exact", False) for m in minutes if not m.get("missing"))}


def run_rate(b: Bench, s: BenchSettings, lines: list[Filler], rate: int, first_on: bool) -> dict:
    runs = {}
    for emit in ((True, False) if first_on else (False, True)):
        runs["with" if emit else "without"] = one_run(b, s, lines, rate, emit)
    w, wo = runs["with"], runs["without"]
    r = ratio(w["cpu_s_per_m_lines"], wo["cpu_s_per_m_lines"])
    met = judge(r, w["delay_p99_ms"], w["missing"], w["exact"])
    return {"rate": rate, "order": ["with", "without"] if first_on else ["without", "with"],
            "without": wo, "with": w, "cpu_ratio": r, "met": met}


def markdown(r: dict) -> str:
    lines = [f"# logcount bench --final (--emit-final {r['grace']}, the stage's defaults: "
             f"--min-batch-interval {r['min_batch_interval_s']:g})", "",
             f"CPU over {r['final_seconds']:g} s after {r['warmup_seconds']:g} s of warm-up; "
             f"delay = the closed record's arrival (read_committed) - (minute end + "
             f"{r['grace']}). With fewer than 100 minutes the p99 is the max.", "",
             "| rate lines/s | CPU-s/M lines without | with | ratio | goal | met | minutes | "
             "delay p50 ms | p99 (= max) ms | goal | exact | met |",
             "|---:|---:|---:|---:|---|---|---:|---:|---:|---|---|---|"]
    for x in r["rates"]:
        w = x["with"]
        missing = f" ({w['missing']} missing)" if w["missing"] else ""
        lines.append(f"| {x['rate']:,} | {x['without']['cpu_s_per_m_lines']} | "
                     f"{w['cpu_s_per_m_lines']} | {x['cpu_ratio']} x | <= {r['cpu_goal']} x | "
                     f"{_yes(x['met']['cpu'])} | {w['delay_minutes']}{missing} | "
                     f"{w['delay_p50_ms']} | {w['delay_p99_ms']} | <= {r['delay_goal_ms']:g} | "
                     f"{_yes(w['exact'])} | {_yes(x['met']['delay'])} |")
    for x in r["rates"]:
        lines += ["", f"{x['rate']:,} lines/s, run order {' then '.join(x['order'])}; "
                  "each closed minute:", "",
                  "| minute | delay ms | closed lines | ERROR lines stamped |",
                  "|---|---:|---:|---:|"]
        for m in x["with"]["minutes"]:
            delay = "missing" if m.get("missing") else m["delay_ms"]
            lines.append(f"| {m['minute']} | {delay} | {m.get('closed_lines', '')} | "
                         f"{m.get('stamped_errors', '')} |")
        lines.append("")
        for side in ("without", "with"):
            y = x[side]
            lines.append(f"- {side}: {y['window_lines']:,} lines in {y['window_seconds']} s "
                         f"({y['rate_lines_per_s']:,} lines/s), {y['window_cpu_seconds']} CPU-s, "
                         f"peak RSS {y['peak_rss_mb']} MB"
                         + (f"; the whole run after the warm-up ({y['whole_run_seconds']} s): "
                            f"{y['whole_run_cpu_s_per_m_lines']} CPU-s/M lines"
                            if side == "with" else ""))
    return "\n".join([*lines, ""])


def _yes(b: bool) -> str:
    return "yes" if b else "no"


def run_final(s: BenchSettings) -> int:
    if s.bootstrap_servers is None:
        stack.up(log=log.info)
    os.environ.setdefault("PYTHONPATH", str(home()))
    b = Bench(s)
    lines = filler(FILLER_LINES, s.seed)
    result: dict = {"grace": GRACE, "min_batch_interval_s": PACED_INTERVAL_S,
                    "warmup_seconds": s.latency_warmup_seconds, "final_seconds": s.final_seconds,
                    "final_minutes": s.final_minutes, "cpu_goal": CPU_GOAL,
                    "delay_goal_ms": DELAY_GOAL_MS, "started": datetime.now(UTC).isoformat(
                        timespec="seconds"), "rates": []}
    # the order alternates between rates (see the module's doc)
    steps = [lambda r, i=i, rate=rate: r["rates"].append(
        run_rate(b, s, lines, rate, first_on=i % 2 == 1))
        for i, rate in enumerate(s.final_rate_list)]
    return run_steps(b, "final", result, steps, markdown)
