"""`logcount bench`: every contender on the same data in one run, then results.json/.md/.png.

Each contender is its own process (logcount/bench/procs.py measures its CPU and memory). Throughput
is
records / processing seconds, where processing starts when the contender starts reading (the
stage's first plan, the streaming query's start, the consumer's creation, the JVM tool's own
start) and ends at its last commit; start-up (JVM, Spark session) is reported apart, as wall
throughput, because a streaming stage pays it once per deployment. Each contender's progress
lines also give its cold start (process start -> first result) and its steady state (after the
first result), apart (logcount/bench/phases.py). The latency runs also give each contender's
CPU-seconds
per million lines and peak RSS at the latency rate and at a tenth of it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from logcount.bench import data, phases, report
from logcount.bench.latency import ProbeReader, RateProducer, percentile
from logcount.bench.procs import Child
from logcount.connectors import kafka_io, stack
from logcount.core.batch_line import parse_batch_line, parse_closing_line
from logcount.core.errors import DependencyError
from logcount.core.paths import home, jars_dir
from logcount.core.progress import Progress
from logcount.core.records import decode_total
from logcount.core.settings import BenchSettings, RunSettings, add_arguments, from_namespace
from logcount.formats.catalogue import RUN_FLAGS
from logcount.formats.shapes import expected_from_records, synthetic_records

log = logging.getLogger("logcount.bench")

QUIX_VERSION = "3.28.1"  # its own venv: it pins confluent-kafka < 2.13, logcount needs >= 2.16
# The partitions axis: input topics shaped like production log topics. The 4-partition figures
# are the main run's (logcount_eos, latency at trigger 0.5 s).
PARTITION_AXIS = (4, 64, 256)
# Generous ceilings: a contender that hangs fails the bench with its last output, never stalls it.
RUN_TIMEOUT_S = 3600
# kafka_streams_eos (logcount/bench/streams/): one Java file, compiled at bench time against the
# jars scripts/setup.sh fetched (jvm/kafka-streams/pom.xml).
STREAMS_SOURCE = Path(__file__).with_name("streams") / "LogCountStreams.java"
# The latency runs' second rate: the main rate (--latency-rate, 20,000 by default) / this, the
# pace of a real service, where a contender's fixed costs show.
LOW_RATE_DIVISOR = 10
# The paced latency runs' --min-batch-interval: the stage's default cadence, so the report shows
# what the defaults cost and give beside the unpaced (0, low-latency) runs.
# Figures: docs/tuning.md#paced-interval
PACED_INTERVAL_S = RunSettings.min_batch_interval
# The paced runs' --trigger-interval: the stage's default too, so they are the stage at defaults.
DEFAULT_TRIGGER_S = RunSettings.trigger_interval
# Structured Streaming's processing-time trigger in the latency runs: the stage's cadence.
SSS_TRIGGER_S = PACED_INTERVAL_S


class Bench:
    def __init__(self, s: BenchSettings) -> None:
        self.s = s
        self.out = Path(s.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.logs = self.out / "logs"
        self.logs.mkdir(exist_ok=True)
        self.run_id = uuid.uuid4().hex[:6]
        self.bootstrap = s.bootstrap_servers or stack.BOOTSTRAP
        self.runs: dict[str, dict] = {}

    def name(self, what: str) -> str:
        return f"bench-{self.run_id}-{what}"

    def drop_topics(self) -> None:
        """Delete this run's topics (and Kafka Streams' internal ones, named after its
        application ids): a full run leaves ~60 topics and ~1,500 partitions, and a broker kept
        for many runs died of them (its log directory hit the open-file limit at ~16,000
        partitions). The results are written by then; nothing reads the topics again."""
        adm = kafka_io.admin(self.bootstrap)
        try:
            mine = [t for t in adm.list_topics(timeout=30).topics if self.name("") in t]
        except Exception as exc:  # noqa: BLE001 - called in a finally: never hide the run's error
            log.warning("bench: this run's topics were not deleted: %s", exc)
            return
        if mine:
            for f in adm.delete_topics(mine, operation_timeout=60).values():
                try:
                    f.result(90)
                except Exception as exc:  # noqa: BLE001 - a leftover topic is only disk space
                    log.warning("bench: a topic was not deleted: %s", exc)
            log.info("bench: deleted this run's %d topics", len(mine))

    def child(self, label: str, argv: list[str], env: dict[str, str] | None = None) -> Child:
        log.info("%s: %s", label, " ".join(argv))
        return Child(argv, env=env, log_path=str(self.logs / f"{label}.log"))

    def record(self, label: str, child: Child, records: int, seconds: float,
               checkpoints: list[phases.Checkpoint]) -> dict:
        """One contender's figures: processing and wall throughput, CPU, memory, and (from its
        checkpoints) cold start and steady state apart."""
        run = {"records": records, "seconds": round(seconds, 3),
               "wall_seconds": round(child.elapsed, 3),
               "cpu_seconds": round(child.stats.cpu_seconds, 2),
               "lines_per_s": round(records / seconds) if seconds else 0,
               "wall_lines_per_s": round(records / child.elapsed) if child.elapsed else 0,
               "lines_per_cpu_s": round(records / child.stats.cpu_seconds)
               if child.stats.cpu_seconds else 0,
               "driver_rss_mb": round(child.stats.root_peak_rss_mb, 1),
               "jvm_rss_mb": round(child.stats.peak_rss_mb("java"), 1),
               **phases.split(checkpoints)}
        self.runs[label] = run
        log.info("%s: %d records in %.2fs (%d lines/s; wall %.1fs; cpu %.1fs; cold start %ss, "
                 "steady %s lines/s)", label, records, seconds, run["lines_per_s"],
                 child.elapsed, child.stats.cpu_seconds, run["cold_start_s"],
                 run["steady_lines_per_s"])
        return run

    # -- contenders ---------------------------------------------------------------------------
    def raw_jvm(self, topic: str, n: int) -> dict:
        def perf(label: str, group: str, *extra: str) -> Child:
            c = self.child(label, consumer_performance_argv(self.bootstrap, topic, n,
                                                            self.name(group), *extra))
            self.check(c, c.wait(RUN_TIMEOUT_S))
            return c

        # Two runs: the tool prints either its total (its own timing, JVM start excluded: the
        # processing figure) or, with --show-detailed-stats, a row per 100 ms and no total (cold
        # start and steady state). Both read the same topic from the page cache.
        c = perf("raw_jvm_consumer", "jvm")
        row = next(s for _, s in reversed(c.lines) if re.match(r"\d{4}-\d\d-\d\d ", s))
        cols = [x.strip() for x in row.split(",")]
        seconds = phases.jvm_time(cols[1]) - phases.jvm_time(cols[0])
        d = perf("raw_jvm_consumer_detailed", "jvm-detailed", "--show-detailed-stats",
                 "--reporting-interval", "100")
        return self.record("raw_jvm_consumer", c, int(cols[4]), seconds,
                           phases.jvm_checkpoints(d.lines, d.started_epoch))

    def raw_python(self, topic: str, n: int) -> dict:
        c = self.child("raw_python_consumer", [
            sys.executable, "-m", "logcount.bench.raw_consumer",
            "--bootstrap-servers", self.bootstrap,
            "--topic", topic, "--records", str(n), "--group-id", self.name("py")])
        self.check(c, c.wait(RUN_TIMEOUT_S))
        got = _json_line(c)
        return self.record("raw_python_consumer", c, got["records"], got["seconds"],
                           phases.progress_checkpoints(c.timeline()))

    def sss(self, topic: str) -> dict:
        c = self.child("spark_structured_streaming", [
            sys.executable, "-m", "logcount.bench.sss_app", "--bootstrap-servers", self.bootstrap,
            "--topic", topic, "--output-topic", self.name("sss-out")])
        self.check(c, c.wait(RUN_TIMEOUT_S))
        got = _json_line(c)
        return self.record("spark_structured_streaming", c, got["records"], got["seconds"],
                           phases.progress_checkpoints(c.timeline()))

    def quix(self, topic: str, n: int) -> dict:
        python = quix_python()
        c = self.child("quixstreams_eos", [
            str(python), str(Path(__file__).with_name("quix_app.py")), "--bootstrap-servers",
            self.bootstrap, "--topic", topic, "--output-topic", self.name("quix-out"),
            "--group-id", self.name("quix"), "--records", str(n)])
        self.check(c, c.wait(RUN_TIMEOUT_S))
        got = _json_line(c)
        return self.record("quixstreams_eos", c, got["records"], got["seconds"],
                           phases.progress_checkpoints(c.timeline()))

    def streams_argv(self, topic: str, tag: str, *extra: str) -> list[str]:
        """kafka_streams_eos on `topic`, writing to a fresh compacted output topic of one
        partition, as the stage's (`name(f"{tag}-out")`; Kafka Streams does not create a sink)."""
        out = self.name(f"{tag}-out")
        kafka_io.ensure_topic(kafka_io.admin(self.bootstrap), out, 1,
                              {"cleanup.policy": "compact"})
        return streams_java_argv(self.bootstrap, topic, out, self.name(tag),
                                 "--state-dir", str(self.out / "kafka-streams-state"), *extra)

    def kafka_streams(self, topic: str, n: int, want: dict[str, int]) -> dict:
        label = "kafka_streams_eos"
        c = self.child(label, self.streams_argv(topic, "ks", "--records", str(n)))
        self.check(c, c.wait(RUN_TIMEOUT_S))
        got = _json_line(c)
        run = self.record(label, c, got["records"], got["seconds"],
                          phases.progress_checkpoints(c.timeline()))
        self.verify(label, self.name("ks-out"), want)
        return run

    def verify(self, label: str, topic: str, want: dict[str, int]) -> None:
        """The output topic's committed totals must be the expected ones, every minute."""
        got = committed_totals(self.bootstrap, topic)
        if got != want:
            wrong = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            raise DependencyError(f"{label}: {len(wrong)} minute totals differ from what was "
                                  f"generated, e.g. {wrong[0]}: {got.get(wrong[0])} against "
                                  f"{want.get(wrong[0])}")
        self.runs[label]["output_verified"] = True

    def stage_argv(self, topic: str, tag: str, *extra: str) -> list[str]:
        return [sys.executable, "-m", "logcount.cli", "run", "--bootstrap-servers",
                self.bootstrap, "--input-topic", topic, "--output-topic", self.name(f"{tag}-out"),
                "--dlq-topic", self.name(f"{tag}-dlq"), "--group-id", self.name(tag),
                "--transactional-id", self.name(tag), "--metrics-port", "0", *extra]

    def logcount(self, label: str, topic: str, *extra: str,
                 env: dict[str, str] | None = None) -> dict:
        """The stage on `topic` until it has read what was there (--once); `env`: e.g. another
        checkout's PYTHONPATH (bench --grouping's A/B)."""
        argv = self.stage_argv(topic, label, "--once", *extra)
        if env:  # -P: the checkout in env's PYTHONPATH, not the working directory, is imported
            argv.insert(1, "-P")
        c = self.child(label, argv, env)
        self.check(c, c.wait(RUN_TIMEOUT_S))
        closing = next((m for _, s in c.lines if (m := parse_closing_line(s))), None)
        if closing is None:
            raise DependencyError(f"{label}: no closing line; last output: {c.tail()}")
        run = self.record(label, c, closing.records, closing.seconds,
                          phases.stage_checkpoints(c.timeline()))
        commits = commit_seconds(c)
        run["slowest_commit_s"] = max(commits) if commits else None
        return run

    def log_shape(self, shape: str, n: int) -> str:
        """One log shape (logcount/formats/shapes.py) through the stage with its ready-made flags:
        its
        own topic of `n` lines, its totals checked against what the generator rendered. Returns
        its run's label."""
        records = list(synthetic_records(shape, n, self.s.seed))
        topic = self.name(f"fmt-{shape}-in")
        data.write_topic(self.bootstrap, topic, [r.value for r in records], 4)
        label = f"logcount_fmt_{shape}"
        flags = RUN_FLAGS[shape]
        run = self.logcount(label, topic, *flags)
        fmt = from_namespace(RunSettings, _run_parser().parse_args(list(flags)), {}).line_format
        run["format_kind"] = fmt.kind
        self.verify(label, self.name(f"{label}-out"), expected_from_records(records, fmt.levels))
        return label

    def check(self, c: Child, rc: int) -> None:
        if rc != 0:
            raise DependencyError(f"{c.argv[0]} {' '.join(c.argv[1:3])} exited {rc}: {c.tail()}")

    # -- latency and recovery -----------------------------------------------------------------
    def latency(self, trigger: float, filler: list[bytes], partitions: int = 4,
                rate: int | None = None, pacing: float = 0.0, repeat: int = 0,
                target_ms: int | None = None) -> dict:
        """The stage at `trigger` under `rate` lines/s (--latency-rate unless given), with
        --min-batch-interval `pacing` when it is not 0, or --target-latency `target_ms`; a
        `repeat` has topics of its own."""
        rate = rate or self.s.latency_rate
        suffix = ("" if rate == self.s.latency_rate else f"r{rate}") + (
            f"m{pacing:g}".replace(".", "_") if pacing else "") + (
            f"t{target_ms}" if target_ms else "") + (f"x{repeat}" if repeat else "")
        tag = (f"lat{trigger:g}".replace(".", "_") + ("" if partitions == 4 else f"p{partitions}")
               + suffix)
        topic = self.loaded_topic(tag, filler, partitions)
        label = (f"latency_trigger_{trigger:g}" + ("" if rate == self.s.latency_rate
                                                    else f"_{rate}")
                 + (f"_paced_{pacing:g}" if pacing else "")
                 + (f"_target_{target_ms}ms" if target_ms else ""))
        # Always explicit: 0 is the unpaced (low-latency) mode, whatever the stage's default.
        flags = ["--trigger-interval", str(trigger), "--min-batch-interval", str(pacing),
                 *(["--target-latency", f"{target_ms}ms"] if target_ms else [])]
        c = self.child(label, self.stage_argv(topic, tag, *flags))
        result = self.measure(c, "batch 1 committed", topic, tag, filler, rate, partitions)
        commits = commit_seconds(c)[1:]  # the first batch is the warm-up's backlog
        result = {"contender": "logcount_eos", "trigger_interval_s": trigger,
                  "min_batch_interval_s": pacing,
                  **({"target_latency_ms": target_ms} if target_ms else {}), **result,
                  "batches": len(commits),
                  "commit_p99_ms": round(percentile([x * 1000 for x in commits], 99), 1)
                  if commits else None}
        log.info("latency at trigger %gs, %d partitions, %d lines/s: %s", trigger, partitions,
                 rate, result)
        return result

    def latency_streams(self, filler: list[bytes], rate: int, repeat: int = 0) -> dict:
        """kafka_streams_eos under `rate` lines/s: the same producer, probes and reader; a
        `repeat` has topics (and an application id) of its own."""
        tag = f"latks-r{rate}" + (f"x{repeat}" if repeat else "")
        topic = self.loaded_topic(tag, filler, 4)
        c = self.child(f"latency_kafka_streams_{rate}", self.streams_argv(topic, tag))
        result = {"contender": "kafka_streams_eos", "trigger_interval_s": None,
                  **self.measure(c, "progress ", topic, tag, filler, rate, 4)}
        log.info("latency of kafka_streams_eos at %d lines/s: %s", rate, result)
        return result

    def latency_sss(self, filler: list[bytes], rate: int) -> dict:
        """spark_structured_streaming under `rate` lines/s at a processing-time trigger of the
        stage's cadence (SSS_TRIGGER_S): the same producer, probes and read_committed reader."""
        tag = f"latsss-r{rate}"
        topic = self.loaded_topic(tag, filler, 4)
        c = self.child(f"latency_sss_{rate}", [
            sys.executable, "-m", "logcount.bench.sss_app", "--bootstrap-servers", self.bootstrap,
            "--topic", topic, "--output-topic", self.name(f"{tag}-out"),
            "--trigger-seconds", str(SSS_TRIGGER_S)])
        result = {"contender": "spark_structured_streaming", "trigger_interval_s": SSS_TRIGGER_S,
                  **self.measure(c, "progress ", topic, tag, filler, rate, 4)}
        log.info("latency of spark_structured_streaming at %d lines/s: %s", rate, result)
        return result

    def loaded_topic(self, tag: str, filler: list[bytes], partitions: int) -> str:
        """A latency run's input topic, holding the 1,000 lines the contender warms up on."""
        topic = self.name(f"{tag}-in")
        kafka_io.ensure_topic(kafka_io.admin(self.bootstrap), topic, partitions)
        data.write_topic(self.bootstrap, topic, filler[:1000], partitions)
        return topic

    def measure(self, c: Child, warm_line: str, topic: str, tag: str, filler: list[bytes],
                rate: int, partitions: int, keys: list[bytes] | None = None) -> dict:
        """Once `c` shows `warm_line` (its first result committed): `rate` lines/s with probes,
        the warm-up apart, then latency, CPU-seconds per million lines and peak RSS over the
        measured window. Stops `c` with SIGTERM. `keys`: the filler's record keys, in turn."""
        try:
            # 180 s: a cold start is seconds (Spark's ~4 s); minutes mean it is stuck.
            c.wait_for_line(warm_line, 180)
            reader = ProbeReader(self.bootstrap, self.name(f"{tag}-out"), self.name(f"{tag}-rd"))
            reader.start()
            # Steady state: the first seconds of a fresh JVM are compilation, not the stage's
            # pace; they are produced at the same rate but reported apart (`warmup_*`).
            warm = self.s.latency_warmup_seconds
            producer = RateProducer(self.bootstrap, topic, filler, rate,
                                    warm + self.s.latency_seconds, partitions, keys=keys)
            t0 = time.monotonic()
            producer.start()
            time.sleep(max(0.0, t0 + warm - time.monotonic()))
            cpu0, lines0 = c.sample_now().cpu_seconds, producer.lines
            producer.join()
            stats = c.sample_now()
            cpu, lines = stats.cpu_seconds - cpu0, producer.lines - lines0
            rss, jvm_rss = stats.peak_rss_mb(), stats.peak_rss_mb("java")
            produced_for = time.monotonic() - t0
            # 30 s: a contender that keeps up shows every probe within a second or two.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and set(producer.sent) - set(reader.seen):
                time.sleep(0.1)
            reader.stop.set()
            reader.join(10)  # the reader's poll returns within 50 ms
        finally:
            c.signal(signal.SIGTERM)
            c.wait(120)  # 120 s: a stop finishes the batch in flight and closes, seconds

        def ms(keys):
            return [(reader.seen[k] - producer.sent[k]) * 1000 for k in keys if k in reader.seen]

        measured = [k for k, t in producer.sent.items() if t >= t0 + warm]
        warming = [k for k, t in producer.sent.items() if t < t0 + warm]
        lat, cold = ms(measured), ms(warming)
        return {"target_rate": rate, "probes": len(measured), "probes_seen": len(lat),
                "rate_lines_per_s": round(producer.achieved_rate(produced_for)),
                "p50": round(percentile(lat, 50), 1), "p99": round(percentile(lat, 99), 1),
                "max": round(max(lat), 1) if lat else None,
                "warmup_seconds": warm, "warmup_probes_seen": f"{len(cold)}/{len(warming)}",
                "warmup_p99": round(percentile(cold, 99), 1) if cold else None,
                "input_partitions": partitions,
                # The CPU of the contender's whole process tree over the measured window (the
                # broker's is not in it), per million lines produced in that window; the peak
                # RSS (VmHWM, each process's, summed) from its start to the window's end.
                "window_lines": lines, "window_cpu_seconds": round(cpu, 2),
                "cpu_s_per_m_lines": round(cpu / lines * 1e6, 1) if lines else None,
                "peak_rss_mb": round(rss, 1), "jvm_rss_mb": round(jvm_rss, 1)}

    def recovery(self, filler: list[bytes]) -> dict:
        topic = self.name("rec-in")
        kafka_io.ensure_topic(kafka_io.admin(self.bootstrap), topic, 4)
        argv = self.stage_argv(topic, "rec", "--trigger-interval", "0.5")
        producer = RateProducer(self.bootstrap, topic, filler, self.s.latency_rate, 3600, 4)
        producer.start()
        first = self.child("recovery_first", argv)
        try:
            first.wait_for_line("batch 3 committed", 180)
            killed = first.signal(signal.SIGKILL)
            first.wait(30)
            # Restarted at once, as a supervisor would: the new instance fences the old one,
            # aborts its open transaction, restores totals, starts Spark and commits.
            second = self.child("recovery_second", argv)
            try:
                t, _ = second.wait_for_line("batch 1 committed", 180)
            finally:
                second.signal(signal.SIGTERM)
                second.wait(120)
        finally:
            producer.stop.set()
            producer.join(30)
        result = {"recovery_s": round(t - killed, 2)}
        log.info("recovery: %s", result)
        return result


def run_steps(b: Bench, name: str, result: dict, steps: Iterable[Callable[[dict], object]],
              markdown: Callable[[dict], str]) -> int:
    """A bench mode's runs: each step adds its figures to `result`, kept in NAME.json as soon as
    they are known (a later failure keeps them); the topics dropped at the end whatever happened;
    then NAME.md, printed too."""
    t0 = time.monotonic()
    try:
        for step in steps:
            step(result)
            result["seconds"] = round(time.monotonic() - t0)
            (b.out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    finally:
        b.drop_topics()
    md = markdown(result)
    (b.out / f"{name}.md").write_text(md)
    print(md)
    print(f"bench: wrote {b.out / f'{name}.json'} and {name}.md")
    return 0


# The shapes the bench runs beside the seed format: the widened default rule, a regex, a JSON
# envelope and structured JSON (the four kinds of log line the formats cover); all of them are in
# logcount/formats/shapes.py.
BENCH_SHAPES = ("kafka", "log4j2", "filebeat", "logstash")


def _run_parser():
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser, RunSettings)
    return parser


def commit_seconds(c: Child) -> list[float]:
    """Each committed batch's transaction time, from the stage's own batch lines."""
    return [b.commit_s for _, s in c.lines if (b := parse_batch_line(s))]


def committed_totals(bootstrap: str, topic: str) -> dict[str, int]:
    """The output topic's last total per minute, read read_committed to its end."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(kafka_io.client_config(bootstrap, None, **{
        "group.id": f"bench-check-{uuid.uuid4().hex[:6]}", "isolation.level": "read_committed",
        "enable.auto.commit": False, "enable.partition.eof": True}))
    try:
        parts = kafka_io.partitions_of(kafka_io.admin(bootstrap), topic) or []
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        left, out = set(parts), {}
        deadline = time.monotonic() + 120
        while left and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                left.discard(m.partition())  # end of partition (or an error: counts differ)
                continue
            v = decode_total(m.value() or b"")
            out[v.minute] = v.count
        return out
    finally:
        c.close()


def consumer_performance_argv(bootstrap: str, topic: str, n: int, group: str,
                              *extra: str) -> list[str]:
    """Kafka's own ConsumerPerformance from the broker jars: the raw-JVM anchor of every run."""
    return ["java", "-Xmx1g", "-cp", str(jars_dir() / "kafka" / "*"),
            "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap,
            "--topic", topic, "--num-records", str(n), "--group", group, "--timeout", "60000",
            *extra]


def streams_java_argv(bootstrap: str, topic: str, out: str, app_id: str,
                      *extra: str) -> list[str]:
    """logcount/bench/streams/LogCountStreams.java with JVM defaults (no heap or GC flags: the
    JVM's own
    sizing, as a Kafka Streams service is commonly started), slf4j at WARN."""
    return ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", streams_classpath(),
            "LogCountStreams", "--bootstrap-servers", bootstrap, "--topic", topic,
            "--output-topic", out, "--application-id", app_id, *extra]


def streams_classpath() -> str:
    """The compiled Kafka Streams contender and its jars: compiled with javac into
    .cache/classes/kafka-streams-<hash> the first time its source (or the jars) is seen."""
    jars = jars_dir() / "kafka-streams"
    if not (jars / ".stamp").exists():
        raise DependencyError(f"{jars} is missing: run ./scripts/setup.sh (it fetches the Kafka "
                              "Streams jars with mvn)")
    digest = hashlib.sha256(STREAMS_SOURCE.read_bytes())
    digest.update((jars / ".stamp").read_bytes())
    classes = home() / ".cache" / "classes" / f"kafka-streams-{digest.hexdigest()[:16]}"
    cp = f"{jars}/*"
    if not classes.exists():
        tmp = classes.with_name(classes.name + f".tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        log.info("compiling %s with javac (once)", STREAMS_SOURCE)
        # 300 s: javac compiles one file in seconds; far past that it is stuck.
        r = subprocess.run(["javac", "-d", str(tmp), "-cp", cp, str(STREAMS_SOURCE)],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise DependencyError(f"javac {STREAMS_SOURCE.name}: {r.stderr.strip()[-1000:]}")
        tmp.rename(classes)
    return f"{classes}:{cp}"


def _json_line(c: Child) -> dict:
    for _, s in reversed(c.lines):
        if s.startswith("{"):
            return json.loads(s)
    raise DependencyError(f"{c.argv[0]}: no result line; last output: {c.tail()}")


def quix_python() -> Path:
    """The Quix Streams venv's python, created on first use under .cache/venvs/quix."""
    venv = home() / ".cache" / "venvs" / f"quix-{QUIX_VERSION}"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if not stamp.exists():
        import venv as venv_mod

        log.info("installing quixstreams==%s into %s (once)", QUIX_VERSION, venv)
        venv_mod.create(venv, with_pip=True, clear=True)
        r = subprocess.run([str(python), "-m", "pip", "install", "-q",
                            f"quixstreams=={QUIX_VERSION}"], capture_output=True, text=True)
        if r.returncode != 0:
            raise DependencyError(f"installing quixstreams: {r.stderr.strip()[-500:]}")
        stamp.write_text(QUIX_VERSION)
    return python


def run_bench(s: BenchSettings) -> int:
    if s.bootstrap_servers is None:
        stack.up(log=log.info)
    b = Bench(s)
    n = s.lines
    quix_n = min(s.quix_lines or n, n)
    large = n * s.large_factor
    low = max(20, s.latency_rate // LOW_RATE_DIVISOR)
    # records each step reads, for the progress bar: 2x produce, the contenders (the JVM tool
    # twice), scaling, RSS
    wide = [p for p in PARTITION_AXIS if p != 4]
    steps = [n * 4, n * 2, n, n, quix_n, n, n, n, n, n, n, large, n * len(BENCH_SHAPES),
             n * 2 * len(wide), large]
    progress = Progress(sum(steps), "bench")
    os.environ.setdefault("PYTHONPATH", str(home()))
    t_start = time.monotonic()
    streams_classpath()  # compiled (or its jars found missing) before anything is measured
    try:
        log.info("generating %d synthetic lines (seed %d)", n, s.seed)
        lines, want = data.generate_with_totals(n, s.seed)
        topics = {p: b.name(f"in-p{p}") for p in (1, 4, 8)}
        for p, topic in topics.items():
            data.write_topic(b.bootstrap, topic, lines, p)
        progress.advance(n * 3)
        big = b.name("in-large")
        data.write_topic(b.bootstrap, big, lines, 4, repeat=s.large_factor,
                         on_progress=lambda k: progress.advance(k // s.large_factor))
        main = topics[4]
        b.raw_jvm(main, n)
        progress.advance(n * 2)
        b.raw_python(main, n)
        progress.advance(n)
        b.sss(main)
        progress.advance(n)
        b.quix(main, quix_n)
        progress.advance(quix_n)
        b.kafka_streams(main, n, want)
        progress.advance(n)
        b.logcount("logcount_eos", main)
        b.verify("logcount_eos", b.name("logcount_eos-out"), want)
        progress.advance(n)
        b.logcount("logcount_alos", main, "--delivery", "at-least-once")
        progress.advance(n)
        b.logcount("logcount_eos_1core", main, "--master", "local[1]")
        progress.advance(n)
        b.logcount("logcount_eos_p1", topics[1])
        progress.advance(n)
        b.logcount("logcount_eos_p8", topics[8])
        progress.advance(n)
        b.logcount("logcount_eos_large", big)
        progress.advance(large)
        shapes = {shape: b.log_shape(shape, n) for shape in BENCH_SHAPES}
        progress.advance(n * len(BENCH_SHAPES))
        for p in wide:  # the partitions axis: the same lines, throughput then latency
            data.write_topic(b.bootstrap, b.name(f"in-p{p}"), lines, p)
            b.logcount(f"logcount_eos_p{p}", b.name(f"in-p{p}"))
            progress.advance(n * 2)
        # The stage at trigger 0.5 s and Kafka Streams at the latency rate (the runs the goals
        # against Kafka Streams judge), --latency-repeats times each, interleaved so that a slow
        # minute of the machine falls on both; each row is their median (report.combine_runs).
        pairs = [(b.latency(0.5, lines, repeat=i),
                  b.latency_streams(lines, s.latency_rate, repeat=i))
                 for i in range(s.latency_repeats)]
        half, streams = (report.combine_runs([pair[i] for pair in pairs]) for i in (0, 1))
        lat = {"0.5": half, "1.0": b.latency(1.0, lines)}
        # CPU and memory beside Kafka Streams and Structured Streaming (at the stage's cadence),
        # at the latency rate and at a tenth; the paced runs are the stage at its defaults.
        lat_runs = [*lat.values(), b.latency(DEFAULT_TRIGGER_S, lines, pacing=PACED_INTERVAL_S),
                    streams, b.latency_sss(lines, s.latency_rate),
                    b.latency(0.5, lines, rate=low),
                    b.latency(DEFAULT_TRIGGER_S, lines, rate=low, pacing=PACED_INTERVAL_S),
                    b.latency_streams(lines, low), b.latency_sss(lines, low)]
        lat_axis = {"4": lat["0.5"], **{str(p): b.latency(0.5, lines, p) for p in wide}}
        rec = b.recovery(lines)
        progress.advance(large)
    finally:
        progress.close()
        b.drop_topics()
    results = report.assemble(b.runs, lat, rec, n, large, quix_n, os.cpu_count() or 0,
                              round(time.monotonic() - t_start), shapes, lat_axis, lat_runs)
    results["topic_prefix"] = b.name("")  # every topic of the run had it; all are deleted
    (b.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (b.out / "results.md").write_text(report.markdown(results))
    report.plot(results, b.out / "results.png")
    print(report.markdown(results))
    print(f"bench: wrote {b.out / 'results.json'}, results.md, results.png")
    return 0
