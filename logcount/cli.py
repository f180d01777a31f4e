"""`logcount <subcommand>`: the command line (docs/contract.md), the top floor of the house.

Every error we raise on purpose ends here as one line on stderr and the exit code of its class
(2 for usage/config, 1 for runtime). Unexpected exceptions keep their traceback: they are bugs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from core import settings as st
from core.errors import ConfigError, LogcountError


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one clear line and exit 2 (not usage + error)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{self.prog}: {message}")


def _stack(args: argparse.Namespace) -> int:
    from connectors import stack

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
    from pipeline.driver import run_stage

    return run_stage(st.from_namespace(st.RunSettings, args))


def _sink(args: argparse.Namespace) -> int:
    from connectors.mysql_sink import run_sink

    return run_sink(st.from_namespace(st.SinkSettings, args))


def _produce(args: argparse.Namespace) -> int:
    from connectors.produce import run_produce

    return run_produce(st.from_namespace(st.ProduceSettings, args))


def _demo(args: argparse.Namespace) -> int:
    from pipeline.demo import run_demo

    return run_demo(st.from_namespace(st.DemoSettings, args))


def _bench(args: argparse.Namespace) -> int:
    from bench.runner import run_bench

    return run_bench(st.from_namespace(st.BenchSettings, args))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="logcount", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("stack", help="the embedded stack: Kafka, MariaDB, optional Spark cluster")
    p.add_argument("action", choices=["up", "down", "status"])
    st.add_arguments(p, st.StackSettings)
    p.set_defaults(handler=_stack)

    commands: list[tuple[str, str, type, Callable]] = [
        ("run", "the Spark stage", st.RunSettings, _run),
        ("sink", "the MySQL sink service", st.SinkSettings, _sink),
        ("produce", "load log lines into a topic", st.ProduceSettings, _produce),
        ("demo", "everything on the embedded stack, then the table", st.DemoSettings, _demo),
        ("bench", "the side-by-side benchmark", st.BenchSettings, _bench),
    ]
    for name, help_text, cls, handler in commands:
        p = sub.add_parser(name, help=help_text, description=cls.__doc__)
        st.add_arguments(p, cls)
        p.set_defaults(handler=handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except LogcountError as exc:
        print(f"logcount: error: {exc}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        # Exit now: interpreter teardown would destroy Kafka clients and the Spark gateway,
        # whose own shutdown chatter would bury the one line that says what went wrong.
        os._exit(exc.exit_code)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
