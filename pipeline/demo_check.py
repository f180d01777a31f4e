"""The demo's verdict: error_log against the expectation, printed the same way for both demos.

`logcount demo` calls `report` itself (`report_series` with --group-by, `report_finals` with
--emit-final). The docker demo runs this module in the compose network
(`scripts/docker-demo.sh`): `python -m logcount.pipeline.demo_check --expect PATH` waits until the
generator has written its expectation and error_log equals it, or until `--timeout`, then prints
the table and the verdict and exits 0 when they are equal; with `--final TABLE` the same for the
final minutes' table (TABLE and TABLE_closed, from the sink of the final topic).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pymysql

from logcount.connectors.sink_store import read_series, read_table
from logcount.core.backoff import Backoff
from logcount.core.retry import poll
from logcount.core.settings import MySQLUrl
from logcount.formats.rule import minute_label
from logcount.pipeline.hour_records import minute_index


def report(table: dict[str, int], expected: dict[str, int], source: str) -> bool:
    """Print the table's first minutes and the verdict; True when it equals the expectation."""
    print("\nerror_log (first 10 minutes):")
    print("  log_time             log_count")
    for minute, count in list(table.items())[:10]:
        print(f"  {minute}  {count:>9}")
    print(f"  ... {len(table)} minutes, {sum(table.values())} ERROR lines in all")
    ok = table == expected
    missing = {m for m in expected if table.get(m) != expected[m]}
    extra = set(table) - set(expected)
    print(f"\nexpected ({source}): {len(expected)} minutes, {sum(expected.values())} ERROR lines")
    print("RESULT: error_log EQUALS the expectation" if ok else
          f"RESULT: MISMATCH: {len(missing)} minutes differ, {len(extra)} unexpected")
    return ok


def finals_rows(table: dict[str, int], closed: set[str], expected: dict[str, int],
                quiet: str) -> tuple[bool, list[tuple[str, int | None, int, bool]]]:
    """Every minute from the first to `quiet` (the minute after the last line) as (minute, its
    final row or None, the generator's count, whether both agree and it is closed); True when
    all do and `quiet` is closed."""
    minutes = [m for m in sorted(set(table) | closed | set(expected)) if m <= quiet]
    rows = [(m, table.get(m), expected.get(m, 0),
             table.get(m) == expected.get(m, 0) and m in closed) for m in minutes]
    return bool(rows) and quiet in closed and all(r[3] for r in rows), rows


def quiet_after(expected: dict[str, int]) -> str:
    """The minute after the generator's last counted minute: the clock closes it."""
    return minute_label(minute_index(max(expected)[:16]) + 1)


def report_finals(name: str, table: dict[str, int], closed: set[str],
                  expected: dict[str, int], quiet: str, source: str) -> bool:
    """Print the final table beside the generator's counts, and the verdict."""
    ok, rows = finals_rows(table, closed, expected, quiet)
    print(f"\n{name}: one row per closed minute, inserted once")
    print("  log_time             final  generator")
    for m, got, want, good in rows:
        shown = "-" if got is None else str(got)
        print(f"  {m}  {shown:>6}  {want:>9}{'' if good else '   <- differs'}"
              f"{'   (closed by the clock)' if m >= quiet and want == 0 else ''}")
    print(f"\nexpected ({source}): {len(expected)} minutes, {sum(expected.values())} ERROR "
          f"lines; {json.dumps(quiet)} holds none and was closed by the clock")
    print(f"RESULT: {name} EQUALS the expectation" if ok else
          f"RESULT: MISMATCH between {name} and the expectation")
    return ok


def read_finals(url: MySQLUrl, name: str) -> tuple[dict[str, int], set[str]]:
    """The final table's rows and the minutes its _closed table says are closed."""
    table = {k[0]: n for k, n in read_series(url, name, ()).items()}
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           database=url.database)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT window_start FROM {name}_closed "
                        f"WHERE window_end = window_start + INTERVAL 1 MINUTE")
            return table, {t.strftime("%Y-%m-%d %H:%M:00") for (t,) in cur.fetchall()}
    finally:
        conn.close()


def _shown(value: str) -> str:
    return value if value.isprintable() and value.strip() == value and value else repr(value)


def report_series(table: dict[tuple[str, ...], int], expected: dict[tuple[str, ...], int],
                  name: str, dims: Sequence[str], source: str, top: int = 10) -> bool:
    """`logcount demo --group-by`'s verdict: the busiest series of table `name` (keys: minute,
    then one value per dimension), then whether it equals the expectation, row for row."""
    series: Counter[tuple[str, ...]] = Counter()
    for key, count in table.items():
        series[key[1:]] += count
    busiest = series.most_common(top)
    widths = [min(40, max([len(d), *(len(_shown(v[i])) for v, _ in busiest)]))
              for i, d in enumerate(dims)]
    print(f"\n{name}: the busiest {len(busiest)} of {len(series)} series, all minutes together")
    print("  " + "  ".join(d.ljust(w) for d, w in zip(dims, widths, strict=True)) + "      lines")
    for values, count in busiest:
        cells = (_shown(v).ljust(w) for v, w in zip(values, widths, strict=True))
        print(f"  {'  '.join(cells)}  {count:>9}")
    minutes = {key[0] for key in table}
    print(f"  ... {len(series)} series, {len(minutes)} minutes, {len(table)} rows, "
          f"{sum(table.values())} lines in all")
    ok = table == expected
    differ = sum(1 for k in expected if table.get(k) != expected[k])
    extra = len(set(table) - set(expected))
    print(f"\nexpected ({source}): {len({k[1:] for k in expected})} series, {len(expected)} "
          f"rows, {sum(expected.values())} lines")
    print(f"RESULT: {name} EQUALS the expectation" if ok else
          f"RESULT: MISMATCH: {differ} rows differ, {extra} unexpected")
    return ok


def _expected(path: Path) -> dict[str, int] | None:
    try:
        return {str(k): int(v) for k, v in json.loads(path.read_text()).items()}
    except FileNotFoundError:
        return None


def _table(url: MySQLUrl) -> dict[str, int]:
    try:
        return read_table(url)
    except pymysql.err.MySQLError:  # not up yet, or the sink has not created error_log yet
        return {}


def wait_for_finals(url: MySQLUrl, expect: Path, name: str, timeout_s: float,
                    every_s: float = 30.0, poll_s: float = 2.0) -> bool:
    """Poll until the final table `name` holds every minute of the expectation, each closed,
    and the minute after the last closed with zero, or `timeout_s` passes; then report."""
    polls = Backoff(poll_s, give_up_s=timeout_s).begin()
    next_note = time.monotonic() + every_s
    expected: dict[str, int] | None = None
    table: dict[str, int] = {}
    closed: set[str] = set()

    def equal() -> bool | None:
        nonlocal expected, table, closed
        expected = _expected(expect)
        try:
            table, closed = read_finals(url, name)
        except pymysql.err.MySQLError:  # not up yet, or the sink has not created the tables
            table, closed = {}, set()
        if not expected:
            return None
        return True if finals_rows(table, closed, expected, quiet_after(expected))[0] else None

    def note(_: float) -> None:
        nonlocal next_note
        now = time.monotonic()
        if now >= next_note:
            print(f"demo: waiting ({polls.elapsed():.0f} s): {len(closed)} minutes closed, "
                  f"{sum(table.values())} ERROR lines in {name}", flush=True)
            next_note = now + every_s

    if poll(equal, polls, on_retry=note) is None and timeout_s > 0:
        print(f"demo: gave up after {timeout_s:.0f} s", flush=True)
    if not expected:
        print(f"demo: the generator never wrote {expect}")
        return False
    return report_finals(name, table, closed, expected, quiet_after(expected),
                         "the generator's, from the lines it produced")


def wait_for_verdict(url: MySQLUrl, expect: Path, timeout_s: float, every_s: float = 30.0,
                     poll_s: float = 2.0) -> bool:
    """Poll until error_log equals the expectation or `timeout_s` passes; then report."""
    polls = Backoff(poll_s, give_up_s=timeout_s).begin()
    next_note = time.monotonic() + every_s
    expected: dict[str, int] | None = None
    table: dict[str, int] = {}

    def equal() -> bool | None:
        nonlocal expected, table
        expected, table = _expected(expect), _table(url)
        return True if expected is not None and table == expected else None

    def note(_: float) -> None:
        nonlocal next_note
        now = time.monotonic()
        if now >= next_note:
            have = "no expectation yet" if expected is None else (
                f"{sum(1 for m, c in expected.items() if table.get(m) == c)} of "
                f"{len(expected)} minutes exact")
            print(f"demo: waiting ({polls.elapsed():.0f} s): {have}, "
                  f"{sum(table.values())} ERROR lines in error_log", flush=True)
            next_note = now + every_s

    if poll(equal, polls, on_retry=note) is None and timeout_s > 0:
        print(f"demo: gave up after {timeout_s:.0f} s", flush=True)
    if expected is None:
        print(f"demo: the generator never wrote {expect}")
        return False
    return report(table, expected, "the generator's, from the lines it produced")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m logcount.pipeline.demo_check", description=__doc__)
    ap.add_argument("--expect", type=Path, required=True, help="the generator's expectation")
    ap.add_argument("--mysql-url", default=os.environ.get("LOGCOUNT_MYSQL_URL"),
                    help="default: $LOGCOUNT_MYSQL_URL")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait (default 900)")
    ap.add_argument("--final", metavar="TABLE",
                    help="check the final minutes' table TABLE (and TABLE_closed) instead")
    args = ap.parse_args(argv)
    if not args.mysql_url:
        ap.error("--mysql-url or LOGCOUNT_MYSQL_URL is required")
    url = MySQLUrl.parse(args.mysql_url)
    ok = (wait_for_finals(url, args.expect, args.final, args.timeout) if args.final else
          wait_for_verdict(url, args.expect, args.timeout))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
