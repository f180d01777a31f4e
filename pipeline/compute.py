"""The stage's Compute over Spark: the session (begun by the caller, or here) and the batch job,
with Spark's and py4j's errors turned into the project's own (a failed job: ComputeError; the
executors refused by the cluster: AuthorizationError), so the batch loop knows no vendor type."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Mapping

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException

from logcount.core.errors import AuthorizationError, ComputeError, ConfigError
from logcount.core.settings import RunSettings
from logcount.formats.rule import REASON_LATE
from logcount.formats.spark import check_regex
from logcount.formats.spec import FormatError
from logcount.pipeline.job import BatchResult, compute_batch
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.spark import SessionStart, under_spark_submit

log = logging.getLogger("logcount.stage")

# How long a failing start-up waits, with --verbose, for the Spark session it began beside it
# (so that the JVM's start-up chatter comes before our one error line). A session starts in
# 2-10 s; past this the error is printed anyway.
SPARK_START_WAIT_S = 60.0
# What a failed Spark job raises: its own errors (a failed or cancelled job, a socket to the JVM
# that cannot be opened) and py4j's (a Java exception, a JVM that is gone). Nothing else.
SPARK_ERRORS = (PySparkException, Py4JError)


class SparkCompute:
    """The stage's Compute: the Spark session (begun by the caller, or here) and the job."""

    def __init__(self, s: RunSettings, spark: SessionStart | None) -> None:
        self.s = s
        self.started = spark or SessionStart(s.master, paced=s.paced)
        self.options = executor_kafka_options(s.spark_kafka_options, s.group_id)
        self.session = None
        self.late_seen = False  # the last batch had late lines (compute_batch's late_first)

    def check_format(self) -> None:
        if self.s.line_format.line_regex is not None:
            try:
                check_regex(self.started.result(), self.s.line_format)
            except FormatError as exc:
                raise ConfigError(str(exc)) from None

    def settle(self) -> None:
        if _jvm_writes_where_we_do():
            # --verbose: let the JVM finish writing to our stderr, so the error that stops us
            # is the last line an operator sees. Otherwise its output goes to the log file and
            # we exit at once, and a JVM still starting is stopped.
            with contextlib.suppress(Exception):
                self.started.result(timeout=SPARK_START_WAIT_S)
            return
        self.started.abandon()

    def ready(self) -> None:
        self.session = spark = self.started.result()
        log.info("Spark %s session on %s ready %.1fs after it began%s", spark.version,
                 spark.sparkContext.master, self.started.took or 0.0,
                 " (from spark-submit)" if under_spark_submit() else "")

    def cancel(self) -> None:
        if self.session is not None:
            self.session.sparkContext.cancelAllJobs()

    def batch(self, ranges: list[OffsetRange], late_before: int | None) -> BatchResult:
        """Only Spark's and py4j's errors are a failed job (ComputeError: re-planned); anything
        else, from our own pure code too, is a bug and propagates with its traceback."""
        s = self.s
        try:
            result = compute_batch(self.session, s.bootstrap_servers, s.input_topic, ranges,
                                   s.line_format, self.options, s.max_malformed_per_batch,
                                   late_before, newest=s.grace_seconds is not None,
                                   late_first=self.late_seen)
        except SPARK_ERRORS as exc:
            raise job_error(exc) from exc
        # Late lines come in runs (a replay, a host's clock behind): while they do, a batch
        # runs with the bound at once rather than twice.
        self.late_seen = any(m.reason == REASON_LATE for m in result.malformed)
        return result


def job_error(exc: Exception) -> ComputeError | AuthorizationError:
    """The project's error for a failed Spark job: the executors refused by the cluster (no
    retry makes that pass), or a failure the batch is planned again after."""
    denial = spark_denial(str(exc))
    if denial:
        return AuthorizationError(f"the Spark job's Kafka reads: not authorized: {denial}; "
                                  f"grant the ACLs in docs/deploy.md")
    return ComputeError(str(exc))


def spark_denial(text: str) -> str | None:
    """The Java client's authorization exception in a Spark error, as one line, if any."""
    for line in text.splitlines():
        for name in ("TopicAuthorizationException", "GroupAuthorizationException",
                     "SaslAuthenticationException", "ClusterAuthorizationException"):
            if name in line:
                return line.strip()[line.strip().find(name):][:300]
    return None


def executor_kafka_options(client: Mapping[str, str], group_id: str) -> dict[str, str]:
    """The Java client properties of Spark's executors (pure): the --client-config file verbatim
    (over pipeline/job.py's read defaults), and one fixed group id under the stage's group (one
    prefixed group ACL covers it). Fixed, not Spark's default of a fresh random id per batch:
    the executors' consumer pool is keyed by group id and partition, so only a stable id lets
    batch N+1 reuse batch N's connected consumers. The executors assign partitions and never
    commit, so the id joins no group and cannot disturb the stage's own group offsets."""
    return {**client, "group.id": f"{group_id}-spark"}


def _jvm_writes_where_we_do() -> bool:
    """Whether the Spark JVM's output (it inherits fd 2) reaches the stream our error line goes
    to (sys.stderr). Unless --verbose, the CLI points fd 2 at a log file and keeps sys.stderr
    on a copy of the terminal's descriptor."""
    try:
        return sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # replaced by something without a descriptor
        return True
