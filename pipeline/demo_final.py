"""`logcount demo --emit-final GRACE`: the demo's lines in time order over the last minutes, the
stage running (not --once) so that the clock closes the minutes after the last line, the sink
loading the final topic into MySQL (error_log_final, insert-only), and that final table compared
with what the generator wrote, minute by minute."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from logcount.connectors import kafka_io, stack
from logcount.connectors.mysql_sink import run_sink
from logcount.connectors.produce import produce_lines, recent_records, synthetic_values
from logcount.connectors.state_topic import read_records
from logcount.core.records import FinalRecord, decode_final
from logcount.core.settings import DemoSettings, MySQLUrl, RunSettings, SinkSettings
from logcount.formats.rule import minute_label
from logcount.pipeline.demo_check import read_finals, report_finals
from logcount.pipeline.hour_records import minute_index
from logcount.pipeline.wiring import wire

# The demo's lines span the minutes before it starts; in time order, so that with a short GRACE
# none of them is late (a random order over a day, the plain demo's, would make most late).
SPAN_MINUTES = 5
# How long the demo waits for the clock to close the minute after the last line: GRACE past
# its end, plus the time a loaded machine's stage takes to start; then it says what it saw.
START_ALLOWANCE_S = 180.0


FINAL_TABLE = "error_log_final"


def run_final_demo(s: DemoSettings, topics: dict[str, str], run_id: str, url: MySQLUrl) -> int:
    assert s.emit_final is not None
    records = recent_records("seed", s.lines, s.seed, SPAN_MINUTES)
    now = datetime.now(UTC).replace(tzinfo=None, second=0, microsecond=0)
    expected: dict[str, int] = {}
    print(f"demo: producing {s.lines} synthetic lines of the last {SPAN_MINUTES} minutes, in "
          f"time order (seed {s.seed}), to {topics['logs']}")
    n = produce_lines(stack.BOOTSTRAP, topics["logs"],
                      synthetic_values(records, ("ERROR",), expected))
    final_topic = topics["counts"] + "-final"
    rs = RunSettings(input_topic=topics["logs"], output_topic=topics["counts"],
                     dlq_topic=topics["dlq"], group_id=f"demo-{run_id}",
                     transactional_id=f"demo-{run_id}", master=s.master, metrics_port=0,
                     emit_final=s.emit_final, final_topic=final_topic)
    assert rs.grace_seconds is not None
    quiet = minute_label(minute_index(now.strftime("%Y-%m-%d %H:%M")))  # after the last line
    print(f"demo: running the stage with --emit-final {s.emit_final} until the clock closes "
          f"{quiet}, the minute after the last line: {topics['logs']} -> {final_topic}")
    stage = wire(rs)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            stage.run()
        except BaseException as exc:  # noqa: BLE001 - reported on the main thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="demo-stage", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_ALLOWANCE_S + 60 + rs.grace_seconds
    finals: list[FinalRecord] = []
    try:
        while time.monotonic() < deadline and thread.is_alive():
            finals = _finals(final_topic)
            if any(r.closed and r.window_start == quiet for r in finals):
                break
            time.sleep(2)
    finally:
        stage.stop.event.set()
        thread.join(120)
    if failed:
        raise failed[0]
    print(f"demo: running the sink once: {final_topic} -> MySQL {url!r} {FINAL_TABLE} "
          f"(insert-only)")
    run_sink(SinkSettings(once=True, topic=final_topic, group_id=f"demo-final-sink-{run_id}",
                          mysql_url=repr(url), table=FINAL_TABLE))
    table, closed = read_finals(url, FINAL_TABLE)
    return 0 if report_finals(FINAL_TABLE, table, closed, expected, quiet,
                              f"known from how the {n} lines were generated") else 1


def _finals(topic: str) -> list[FinalRecord]:
    adm = kafka_io.admin(stack.BOOTSTRAP)
    if not kafka_io.partitions_of(adm, topic):
        return []
    return [decode_final(v) for _, v in read_records(adm, stack.BOOTSTRAP, topic, {},
                                                       "demo-final-reader") if v is not None]
