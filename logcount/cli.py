"""`logcount <subcommand>`: the command line (docs/contract.md), the top floor of the house.

Every error we raise on purpose ends here as one line on stderr and the exit code of its class
(2 for usage/config, 1 for runtime). Unexpected exceptions keep their traceback: they are bugs.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Sequence

from logcount.core import settings as st
from logcount.core.errors import ConfigError, LogcountError
from logcount.core.paths import log_file
from logcount.core.redact import MaskSecrets, mask


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one clear line and exit 2 (not usage + error)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{self.prog}: {message}")


def _stack(args: argparse.Namespace) -> int:
    from logcount.connectors import stack

    if args.action == "up":
        s = st.from_namespace(st.StackSettings, args)
        stack.up(spark_cluster=s.spark_cluster)
        print("stack: up: Kafka on 127.0.0.1:9092, MariaDB on 127.0.0.1:3306 (root, database "
              "logcount)" + (", Spark master spark://127.0.0.1:7077" if s.spark_cluster else ""))
    elif args.action == "down":
        stack.down()
    else:
        lines = stack.status()
        print("\n".join(lines))
        return 0 if all("ready" in line for line in lines[:2]) else 1
    return 0


def _run(args: argparse.Namespace) -> int:
    settings = st.from_namespace(st.RunSettings, args)
    # The Spark session (~2 s) begins before the stage's own modules are imported (0.1 s):
    # pipeline.spark imports nothing heavy. See Stage.start.
    from logcount.pipeline.spark import SessionStart

    spark = SessionStart(settings.master, paced=settings.paced)
    from logcount.pipeline.wiring import run_stage

    return run_stage(settings, spark)


def _state(args: argparse.Namespace) -> int:
    from logcount.pipeline.state_view import show

    s = st.from_namespace(st.StateShowSettings, args)
    return show(s, s.json)


def _sink(args: argparse.Namespace) -> int:
    from logcount.connectors.mysql_sink import run_sink

    return run_sink(st.from_namespace(st.SinkSettings, args))


def _produce(args: argparse.Namespace) -> int:
    from logcount.connectors.produce import run_produce

    return run_produce(st.from_namespace(st.ProduceSettings, args))


def _demo(args: argparse.Namespace) -> int:
    from logcount.pipeline.demo import run_demo

    return run_demo(st.from_namespace(st.DemoSettings, args))


# What `logcount bench` needs beyond the stage (pyproject's `bench` extra): its plots.
BENCH_EXTRA = ("matplotlib",)
NO_BENCH_EXTRA = "logcount bench needs the bench extra: pip install 'logcount[bench]'"


def _bench(args: argparse.Namespace) -> int:
    # Checked before anything starts: a missing plotting library after an hour's run loses it.
    if any(importlib.util.find_spec(name) is None for name in BENCH_EXTRA):
        raise ConfigError(NO_BENCH_EXTRA)
    settings = st.from_namespace(st.BenchSettings, args)
    if settings.soak is not None:
        from logcount.bench.soak import plans_from_settings, run_soaks

        return run_soaks(plans_from_settings(settings))
    if settings.final:
        from logcount.bench.emit_final import run_final

        return run_final(settings)
    if settings.target:
        from logcount.bench.target import run_target

        return run_target(settings)
    if settings.grouping:
        from logcount.bench.grouping import run_grouping

        return run_grouping(settings)
    from logcount.bench.runner import run_bench

    return run_bench(settings)


EXAMPLES = {
    "logcount": """examples:
  logcount stack up                      # Kafka on 127.0.0.1:9092, MariaDB on :3306
  logcount produce --synthetic 100000 --expect expected.json
  logcount run --once                    # count what is in topic 'logs' into 'error-counts'
  logcount sink --once                   # carry the totals into MySQL error_log
  logcount demo                          # all of it, then the table and the verdict""",
    "stack": "example:\n  logcount stack up --spark-cluster && logcount stack status",
    "run": """examples:
  logcount run --once --input-topic logs --output-topic error-counts --group-id logcount
  logcount run --master spark://127.0.0.1:7077 --lateness-horizon 7d
  LOGCOUNT_BOOTSTRAP_SERVERS=kafka:9092 logcount run --trigger-interval 0.5""",
    "state": """examples:
  logcount state show --input-topic logs --output-topic error-counts --group-id logcount
  logcount state show --client-config client.properties --json | jq .start""",
    "sink": """examples:
  logcount sink --once --mysql-url mysql://root@127.0.0.1:3306/logcount
  logcount sink --mysql-url 'mysql://app:p%40ss@db:3306/logs' --topic error-counts""",
    "produce": """examples:
  logcount produce --file app.log --topic logs
  zcat app.log.gz | logcount produce --file - --topic logs
  logcount produce --synthetic 1000000 --seed 3 --expect expected.json""",
    "demo": "example:\n  logcount demo --lines 1000000",
    "bench": """examples:
  logcount bench --lines 5000000 --out bench-results
  logcount bench --soak 60 --out soak-results   # endurance: an hour each cadence, 2,000 lines/s
  logcount bench --grouping --ab-base ../logcount-before --lines 1000000   # --group-by's cost
  logcount bench --final --out final-results   # --emit-final 1m's CPU and closing delay
  logcount bench --target --out target-results   # --target-latency beside Kafka Streams""",
}


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="logcount", description=__doc__.splitlines()[0],
                     epilog=EXAMPLES["logcount"], formatter_class=fmt)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    common = _Parser(add_help=False)
    common.add_argument("--verbose", action="store_true", default=None,
                        help="also show the Spark JVM's and librdkafka's own output (env "
                             "LOGCOUNT_VERBOSE; by default it goes to LOGCOUNT_LOG_DIR)")

    p = sub.add_parser("stack", help="the embedded stack: Kafka, MariaDB, optional Spark cluster",
                       parents=[common], epilog=EXAMPLES["stack"], formatter_class=fmt)
    p.add_argument("action", choices=["up", "down", "status"])
    st.add_arguments(p, st.StackSettings)
    p.set_defaults(handler=_stack)

    p = sub.add_parser("state", help="the stage's state: `state show` prints it, and what a "
                       "start would do", description=st.StateShowSettings.__doc__,
                       parents=[common], epilog=EXAMPLES["state"], formatter_class=fmt)
    p.add_argument("action", choices=["show"])
    st.add_arguments(p, st.StateShowSettings)
    p.set_defaults(handler=_state)

    commands: list[tuple[str, str, type, Callable]] = [
        ("run", "the Spark stage", st.RunSettings, _run),
        ("sink", "the MySQL sink service", st.SinkSettings, _sink),
        ("produce", "load log lines into a topic", st.ProduceSettings, _produce),
        ("demo", "everything on the embedded stack, then the table", st.DemoSettings, _demo),
        ("bench", "the side-by-side benchmark", st.BenchSettings, _bench),
    ]
    for name, help_text, cls, handler in commands:
        p = sub.add_parser(name, help=help_text, description=cls.__doc__, parents=[common],
                           epilog=EXAMPLES[name], formatter_class=fmt)
        st.add_arguments(p, cls)
        p.set_defaults(handler=handler)
    return parser


def _py4j_root_info(record: logging.LogRecord) -> bool:
    """False for py4j's INFO lines on the root logger: it logs "Exception while sending command"
    with a traceback there (logging.info, not its own logger) whenever the JVM has gone first,
    as when a container's stop signals the JVM and the stage together. The stage's own line
    about the stop, or the failed batch, says what an operator needs."""
    return not (record.name == "root" and record.levelno < logging.WARNING
                and f"{os.sep}py4j{os.sep}" in record.pathname)


def _output(command: str, verbose: bool) -> None:
    """Our log lines (secrets masked) to the terminal. Unless --verbose, everything else that
    writes to stderr (the Spark JVM, which inherits fd 2, and librdkafka's log lines) goes to a
    log file instead, so an operator's terminal shows what logcount says and nothing else."""
    term = os.fdopen(os.dup(2), "w", buffering=1, errors="backslashreplace")
    handler = logging.StreamHandler(term)
    handler.addFilter(MaskSecrets())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    chatter = logging.getLogger("librdkafka")
    # py4j (the Python-JVM bridge) says INFO on every connection it closes.
    logging.getLogger("py4j").setLevel(logging.DEBUG if verbose else logging.WARNING)
    if verbose:
        chatter.setLevel(logging.DEBUG)
        return
    handler.addFilter(_py4j_root_info)
    path = log_file(command)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as exc:  # a read-only install: the chatter stays on the terminal
        logging.getLogger("logcount").warning(
            "cannot write %s (%s); the Spark JVM's and librdkafka's output stays on stderr "
            "(set LOGCOUNT_LOG_DIR to a writable folder)", path, exc.strerror)
        chatter.setLevel(logging.WARNING)
        return
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = term  # Python's own stderr (tracebacks, the progress bar) stays on the terminal
    to_file = logging.StreamHandler(os.fdopen(os.dup(2), "w", buffering=1,
                                              errors="backslashreplace"))
    to_file.addFilter(MaskSecrets())
    to_file.setFormatter(handler.formatter)
    chatter.addHandler(to_file)
    chatter.propagate = False
    chatter.setLevel(logging.DEBUG)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        verbose = bool(args.verbose) or os.environ.get("LOGCOUNT_VERBOSE", "") not in ("", "0")
        _output(args.command, verbose)
        return args.handler(args)
    except LogcountError as exc:
        print(f"logcount: error: {mask(str(exc))}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        # Exit now: interpreter teardown would destroy Kafka clients and the Spark gateway,
        # whose own shutdown chatter would bury the one line that says what went wrong.
        os._exit(exc.exit_code)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
