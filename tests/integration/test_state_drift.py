"""State that cannot drift: each real-world event that once made totals silently wrong, through
the CLI against the real broker (and MariaDB for the sink). Each ends exact or refused, and a
refusal publishes nothing. Operators' actions use Kafka's own kafka-consumer-groups tool."""

from __future__ import annotations

import json
import re
import subprocess
import time

from confluent_kafka.admin import OffsetSpec

from logcount.connectors import kafka_io, state_topic
from logcount.core.errors import DependencyError
from logcount.core.paths import jars_dir
from logcount.pipeline.hour_records import hour_key, minute_index
from logcount.pipeline.state import state_topic_name
from logcount.pipeline.state_view import NO_TOPIC
from tests.support.exact import assert_exact
from tests.support.inputs import build_input, write_lines
from tests.support.readers import end_offsets, group_offsets, last_totals, read_all, read_table
from tests.support.run import LOGCOUNT, ROOT, cli, sink_args, stage_args, start_cli, wait_for


def group_tool(bootstrap: str, *args: str) -> str:
    """Kafka's kafka-consumer-groups (ConsumerGroupCommand from the broker jars)."""
    proc = subprocess.run(
        ["java", "-cp", f"{jars_dir() / 'kafka'}/*",
         "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
         "--bootstrap-server", bootstrap, *args],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def delete_topic(bootstrap: str, topic: str) -> None:
    adm = kafka_io.admin(bootstrap)
    adm.delete_topics([topic])[topic].result(30)
    wait_for(lambda: kafka_io.partitions_of(adm, topic) is None, 30, what=f"{topic} deleted")
    time.sleep(1)  # let every broker forget it before it is created again


def high_watermarks(bootstrap: str, *topics: str) -> dict:
    adm = kafka_io.admin(bootstrap)

    def ends(t: str) -> dict | None:
        parts = kafka_io.partitions_of(adm, t) or []
        try:
            return {"ends": kafka_io.list_offsets(adm, t, parts, OffsetSpec.latest(),
                                                  committed_only=False)}
        except DependencyError:  # a topic just created has no leaders yet (seen in CI)
            return None

    return {t: wait_for(lambda t=t: ends(t), 30, what=f"{t}'s leaders")["ends"] for t in topics}


def outputs(names) -> tuple[str, ...]:
    return names.topic("out"), names.topic("dlq"), state_topic_name(names.topic("out"))


def error_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("logcount: error: "), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    return lines[-1]


def shown(endpoints, names, *extra: str) -> dict:
    """`logcount state show --json` with the stage's flags (read-only: it publishes nothing,
    which every refusal below checks)."""
    args = stage_args(endpoints, names, "--once", *extra)
    return json.loads(cli("state", "show", *args[1:], "--json").stdout)


def predicted(endpoints, names, *extra: str) -> dict:
    """What `state show` says a start would do now."""
    return shown(endpoints, names, *extra)["start"]


def refused(endpoints, names, *extra: str) -> str:
    """Run the stage; assert exit 2 with one error line and nothing published, and that
    `state show` predicted exactly that line. The line."""
    before = high_watermarks(endpoints.bootstrap, *outputs(names))
    predict = predicted(endpoints, names, *extra)
    proc = cli(*stage_args(endpoints, names, "--once", *extra), check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert high_watermarks(endpoints.bootstrap, *outputs(names)) == before, "published on refusal"
    line = error_line(proc)
    assert predict == {"action": "refuse", "exit": 2, "lines": [line]}, predict
    assert line.endswith("`logcount state show` with this run's flags shows the state"), line
    return line


def started(endpoints, names, *extra: str):
    """Run the stage --once after `state show` predicted its start: a repair's warnings are the
    stage's, word for word; a resume or first start warns of nothing."""
    predict = predicted(endpoints, names, *extra)
    proc = cli(*stage_args(endpoints, names, "--once", *extra))
    said = [w.split(" WARNING logcount.stage: ", 1)[1] for w in warnings_in(proc)
            if " WARNING logcount.stage: " in w]
    if predict["action"] == "repair":
        # A topic the start creates gets its id then: the prediction can only say so.
        patterns = [re.escape(line).replace(re.escape(NO_TOPIC), r"\S+")
                    for line in predict["lines"]]
        assert len(said) >= len(patterns) and all(
            re.fullmatch(pat, line) for pat, line in zip(patterns, said, strict=False)), (
            predict, said)
    else:
        assert predict["action"] in ("fresh", "resume") and not said, (predict, said)
    return proc, predict["action"]


def more_input(endpoints, names, seed: int):
    return build_input(endpoints.bootstrap, names.topic("in"), f"{names.txn_id}-p{seed}",
                       n_plain=400, n_txn=120, seed=seed)


def warnings_in(proc) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if " WARNING " in ln]


def test_deleted_group_and_deleted_partition_offsets_are_repaired_exactly(endpoints, names):
    a = more_input(endpoints, names, 1)
    assert started(endpoints, names)[1] == "fresh"
    # The operator deletes the whole group (as expiry after offsets.retention.minutes would).
    group_tool(endpoints.bootstrap, "--delete", "--group", names.group)
    b = more_input(endpoints, names, 2)
    proc, action = started(endpoints, names)
    assert action == "repair"
    warned = [w for w in warnings_in(proc) if "no committed offsets" in w]
    assert len(warned) == 1 and "no committed offsets for p0, p1, p2, p3" in warned[0], warned
    assert_exact(endpoints.bootstrap, names, a.expected + b.expected)
    # Then one partition's offset only (kafka-consumer-groups --delete-offsets).
    group_tool(endpoints.bootstrap, "--delete-offsets", "--group", names.group,
               "--topic", f"{names.topic('in')}:1")
    c = more_input(endpoints, names, 3)
    proc, action = started(endpoints, names)
    assert action == "repair"
    warned = [w for w in warnings_in(proc) if "no committed offsets" in w]
    assert len(warned) == 1 and "no committed offsets for p1 " in warned[0], warned
    assert_exact(endpoints.bootstrap, names, a.expected + b.expected + c.expected)


def test_reset_group_offsets_are_refused_with_partition_and_both_offsets(endpoints, names):
    more_input(endpoints, names, 1)
    cli(*stage_args(endpoints, names, "--once"))
    state_offset = group_offsets(endpoints.bootstrap, names.group, names.topic("in"))[0]
    group_tool(endpoints.bootstrap, "--reset-offsets", "--group", names.group, "--topic",
               f"{names.topic('in')}:0", "--to-offset", "0", "--execute")
    more_input(endpoints, names, 2)
    line = refused(endpoints, names)
    assert f"p0 group 0 state {state_offset}" in line and "p1" not in line, line


def test_a_recreated_output_topic_is_recounted_and_the_sink_follows(endpoints, names, mysql_db):
    a = more_input(endpoints, names, 1)
    cli(*stage_args(endpoints, names, "--once"))
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert read_table(mysql_db) == dict(a.expected)
    delete_topic(endpoints.bootstrap, names.topic("out"))
    b = more_input(endpoints, names, 2)
    proc, action = started(endpoints, names)
    assert action == "repair"
    assert any("was recreated" in w for w in warnings_in(proc)), proc.stderr[-3000:]
    assert_exact(endpoints.bootstrap, names, a.expected + b.expected)
    sink = cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert any("recreated" in w for w in warnings_in(sink)), sink.stderr[-3000:]
    assert read_table(mysql_db) == dict(a.expected + b.expected), "MySQL after the recount"
    # The recount reset the state for good: the next start has nothing to say or do.
    again, action = started(endpoints, names)
    assert action == "resume"
    assert not warnings_in(again) and "batch 1 committed" not in again.stderr


def test_a_recreated_output_topic_without_the_input_beginning_is_refused(endpoints, names):
    more_input(endpoints, names, 1)
    cli(*stage_args(endpoints, names, "--once"))
    adm = kafka_io.admin(endpoints.bootstrap)
    from confluent_kafka import TopicPartition

    # Retention (here: an operator's delete-records) removed the input's first records.
    adm.delete_records([TopicPartition(names.topic("in"), 0, 5)])[
        TopicPartition(names.topic("in"), 0, 5)].result(30)
    delete_topic(endpoints.bootstrap, names.topic("out"))
    kafka_io.ensure_topic(adm, names.topic("out"), 4, {"cleanup.policy": "compact"})
    line = refused(endpoints, names)
    assert "p0 starts at 5" in line, line


def test_a_recreated_input_topic_is_refused(endpoints, names):
    more_input(endpoints, names, 1)
    cli(*stage_args(endpoints, names, "--once"))
    delete_topic(endpoints.bootstrap, names.topic("in"))
    more_input(endpoints, names, 2)
    line = refused(endpoints, names)
    assert f"input topic {names.topic('in')} was recreated" in line, line


def test_a_switched_level_is_refused(endpoints, names):
    more_input(endpoints, names, 1)
    cli(*stage_args(endpoints, names, "--once"))
    line = refused(endpoints, names, "--level", "WARN")
    assert "counts level ERROR, not WARN" in line, line


def test_every_counting_setting_is_identity_a_changed_one_is_refused(endpoints, names):
    """Each setting that decides what is counted: a restart with another is exit 2, nothing
    published, one line naming it; the same settings again (levels in another order and case)
    are accepted."""
    more_input(endpoints, names, 1)
    first = ("--level", "error,FATAL", "--timezone", "Europe/Paris")
    cli(*stage_args(endpoints, names, "--once", *first))
    for extra, named in [
        (("--level", "ERROR,FATAL"), "--timezone"),
        (("--level", "ERROR", "--timezone", "Europe/Paris"), "counts level ERROR,FATAL"),
        ((*first, "--line-regex", r"(?<time>\S+ \S+) (?<level>\w+)"), "--line-regex"),
        ((*first, "--line-regex", r"(?<time>\S+ \S+) (?<level>\w+)", "--time-pattern",
          "yyyy-MM-dd HH:mm:ss"), "--line-regex"),
        ((*first, "--json-line-field", "message"), "--json-line-field"),
        ((*first, "--json-time-field", "ts", "--json-level-field", "level"), "--json-level-field"),
    ]:
        line = refused(endpoints, names, *extra)
        assert named in line and "--output-topic" in line, line
    more_input(endpoints, names, 2)
    proc, action = started(endpoints, names, "--level", "fatal,Error", "--timezone",
                           "Europe/Paris")
    assert action == "resume" and "batch 1 committed" in proc.stderr


def test_an_output_topic_that_also_deletes_is_refused_before_anything(endpoints, names):
    more_input(endpoints, names, 1)
    kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), names.topic("out"), 4,
                          {"cleanup.policy": "compact,delete"})
    predict = predicted(endpoints, names)
    proc = cli(*stage_args(endpoints, names, "--once"), check=False)
    assert proc.returncode == 2
    line = error_line(proc)
    assert predict == {"action": "refuse", "exit": 2, "lines": [line]}, predict
    assert "cleanup.policy='compact,delete'" in line and "exactly 'compact'" in line, line
    adm = kafka_io.admin(endpoints.bootstrap)
    assert kafka_io.partitions_of(adm, state_topic_name(names.topic("out"))) is None
    assert group_offsets(endpoints.bootstrap, names.group, names.topic("in")) == {}


def test_two_stages_with_default_transactional_ids_run_side_by_side(endpoints, names, tmp_path):
    inp = more_input(endpoints, names, 1)
    procs = []
    for who in ("a", "b"):
        args = ["run", "--once", "--bootstrap-servers", endpoints.bootstrap,
                "--input-topic", names.topic("in"), "--output-topic", names.topic(f"out-{who}"),
                "--dlq-topic", names.topic(f"dlq-{who}"), "--group-id", f"{names.group}-{who}",
                "--master", "local[1]", "--max-records-per-batch", "300", "--metrics-port", "0"]
        log = open(tmp_path / f"{who}.log", "w")  # noqa: SIM115 - closed by the process's end
        procs.append(subprocess.Popen([*LOGCOUNT, *args], stdout=log, stderr=subprocess.STDOUT,
                                      cwd=ROOT))
    assert [p.wait(600) for p in procs] == [0, 0], [
        (tmp_path / f"{w}.log").read_text()[-2000:] for w in "ab"]
    for who in ("a", "b"):
        log = (tmp_path / f"{who}.log").read_text()
        assert "fenced" not in log.lower() and "batch 2 committed" in log
        out = read_all(endpoints.bootstrap, names.topic(f"out-{who}"))
        assert last_totals(out) == dict(inp.expected), f"stage {who}"


def test_lateness_horizon_sends_late_lines_to_the_dlq_and_evicts_old_hours(endpoints, names):
    topic, horizon = names.topic("in"), ("--lateness-horizon", "30m", "--input-partitions", "1")
    stt = state_topic_name(names.topic("out"))
    write_lines(endpoints.bootstrap, topic, ["2017-07-30 10:05:00 ERROR early",
                                             "2017-07-30 12:10:00 ERROR sets the watermark"], 1)
    cli(*stage_args(endpoints, names, "--once", *horizon))
    # The watermark is 12:10, so 11:40 is the first minute that is not late. A bogus future
    # line is counted but must not move it; hour 10 (all before 11:40) has left the state.
    write_lines(endpoints.bootstrap, topic, ["2017-07-30 11:30:00 ERROR late",
                                             "2017-07-30 11:50:00 ERROR in time",
                                             "2099-01-01 00:00:00 ERROR bogus future"], 1)
    cli(*stage_args(endpoints, names, "--once", *horizon))
    report = shown(endpoints, names, *horizon)
    assert (report["watermark"], report["closed_before"]) == ("2017-07-30 12:10:00",
                                                               "2017-07-30 11:00:00"), report
    assert report["minutes"] == 3 and report["hours"] == 3, report  # 11:50, 12:10 and 2099
    write_lines(endpoints.bootstrap, topic, ["2017-07-30 11:45:00 ERROR still in time"], 1)
    proc = cli(*stage_args(endpoints, names, "--once", *horizon))
    assert "late 0" in proc.stderr
    totals = last_totals(read_all(endpoints.bootstrap, names.topic("out")))
    assert totals == {"2017-07-30 10:05:00": 1, "2017-07-30 12:10:00": 1,
                      "2017-07-30 11:50:00": 1, "2099-01-01 00:00:00": 1,
                      "2017-07-30 11:45:00": 1}
    dlq = [json.loads(m.value()) for m in read_all(endpoints.bootstrap, names.topic("dlq"))]
    assert [(d["offset"], d["reason"]) for d in dlq] == [(2, "late")]
    adm = kafka_io.admin(endpoints.bootstrap)
    table = state_topic.read_table(adm, endpoints.bootstrap, stt, {}, names.group + "-t")
    assert hour_key(minute_index("2017-07-30 10:05") // 60) not in table
    assert hour_key(minute_index("2017-07-30 12:10") // 60) in table


def test_an_input_recreated_under_a_running_stage_stops_it(endpoints, names, tmp_path):
    more_input(endpoints, names, 1)
    log = tmp_path / "stage.log"
    stage = start_cli(*stage_args(endpoints, names, "--trigger-interval", "0.2"), log_path=log)
    try:
        wait_for(lambda: "batch 1 committed" in log.read_text(), 180, what="a first batch")
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group, names.topic("in"))
                 == end_offsets(endpoints.bootstrap, names.topic("in")), 120, what="drained")
        delete_topic(endpoints.bootstrap, names.topic("in"))
        before = high_watermarks(endpoints.bootstrap, *outputs(names))
        more_input(endpoints, names, 2)  # fewer records than the first log held
        assert stage.wait(120) == 2, log.read_text()[-3000:]
    finally:
        if stage.poll() is None:
            stage.kill()
    last = log.read_text().strip().splitlines()[-1]
    assert last.startswith("logcount: error: ") and ("fell behind the state" in last
                                                     or "recreated while the stage ran" in last)
    assert high_watermarks(endpoints.bootstrap, *outputs(names)) == before, "published after"
