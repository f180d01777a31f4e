"""pipeline/state_view.py's pure part: the report and the prediction of `logcount state show`."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np

from logcount.core.errors import SHOW_HINT
from logcount.core.settings import RunSettings
from logcount.pipeline.closing import ClosingFacts, ClosingState, PartitionFacts
from logcount.pipeline.hour_records import encode_hour, hour_key, minute_index
from logcount.pipeline.series import chunk_key, encode_chunk, encode_name, name_key
from logcount.pipeline.state import (
    CLAIM_KEY,
    PROGRESS_KEY,
    Identity,
    ProgressRecord,
    StartFacts,
    claim_value,
)
from logcount.pipeline.state_view import NO_TOPIC, Facts, describe, predict, render, wanted

S = RunSettings(input_topic="in", output_topic="out", group_id="g")
M0 = minute_index("2017-07-30 14:09")


def table(offsets=None, level="ERROR", claim=True) -> dict[bytes, bytes]:
    ident = Identity("in", "IN-ID", "out", "OUT-ID", level)
    t = {PROGRESS_KEY: ProgressRecord(ident, offsets or {0: 40, 1: 10}, M0).encode(),
         hour_key(M0 // 60): encode_hour({M0 % 60: 7, M0 % 60 + 1: 2})}
    if claim:
        t[CLAIM_KEY] = claim_value("abc", "host", 42, "2026-11-25T00:00:00+00:00")
    return t


def facts(tbl=None, **kw) -> Facts:
    base = dict(input_topic_id="IN-ID", output_topic_id="OUT-ID", earliest={0: 0, 1: 0},
                latest={0: 100, 1: 50}, group={0: 40, 1: 10})
    return Facts(table(**({} if tbl is None else tbl)), [0, 1],
                 StartFacts(**{**base, **kw}), (3, 60))


def test_a_matching_state_resumes_and_the_report_holds_every_figure():
    report = describe(facts(), S)
    assert report["start"] == {"action": "resume", "exit": 0,
                               "lines": ["resume from p0:40 p1:10"]}
    assert report["partitions"] == [
        {"partition": 0, "state": 40, "group": 40, "log_start": 0, "end": 100, "lag": 60},
        {"partition": 1, "state": 10, "group": 10, "log_start": 0, "end": 50, "lag": 40}]
    assert (report["minutes"], report["hours"]) == (2, 1)
    assert report["watermark"] == "2017-07-30 14:09:00" and report["closed_before"] is None
    assert report["state_topic_size"]["records_in_log"] == 57
    assert report["claim"]["instance"] == "abc"
    assert report["identity"]["input_topic_id"] == "IN-ID"
    json.dumps(report)  # --json prints it as it is
    text = render(report)
    assert "a start now would: resume (exit 0)" in text and "claimed by    instance abc" in text


def test_a_reset_group_is_predicted_as_the_refusal_line_the_stage_prints():
    got = predict(facts(group={0: 0, 1: 10}), wanted(S))
    assert got["action"] == "refuse" and got["exit"] == 2
    [line] = got["lines"]
    assert line.startswith("logcount: error: the group's offsets differ") and "p0 group 0 state 40"\
        in line and line.endswith(SHOW_HINT)


def test_a_missing_group_is_a_repair_with_the_warning_the_stage_logs():
    got = predict(facts(group={}), wanted(S))
    assert got["action"] == "repair" and got["exit"] == 0
    assert len(got["lines"]) == 1 and "no committed offsets for p0, p1" in got["lines"][0]


def test_a_topic_a_start_would_create_reads_as_a_new_id():
    got = predict(facts(output_topic_id=NO_TOPIC), wanted(S))
    assert got["action"] == "repair" and "was recreated" in got["lines"][0]
    assert describe(facts(tbl={"claim": False}, input_topic_id=NO_TOPIC), S)["start"][
        "action"] == "refuse"


def test_no_state_is_a_first_start_from_the_starting_offsets():
    f = Facts({}, [0, 1], StartFacts(NO_TOPIC, NO_TOPIC, {0: 5, 1: 0}, {0: 9, 1: 3}, {}), (0, 0))
    report = describe(f, S)
    assert report["identity"] is None and report["minutes"] == 0
    assert report["start"]["lines"][-1] == "first start from p0:5 p1:0"
    assert [r["lag"] for r in report["partitions"]] == [4, 3]
    assert "identity      none" in render(report)


def test_another_level_and_a_damaged_state_are_refusals_but_still_a_report():
    assert predict(facts(), wanted(RunSettings(input_topic="in", output_topic="out",
                                               level="WARN")))["action"] == "refuse"
    broken = Facts({PROGRESS_KEY: b"not json"}, [0], StartFacts("I", "O", {0: 0}, {0: 1}, {}),
                   (0, 1))
    report = describe(broken, S)
    assert report["start"]["action"] == "refuse" and "not JSON" in report["start"]["lines"][0]
    assert report["identity"] is None


def test_a_topic_that_deletes_is_the_refusal_of_the_start_topic_check():
    f = Facts(table(), [0, 1], facts().start, (0, 0), compaction="output topic out has ...")
    assert predict(f, wanted(S)) == {
        "action": "refuse", "exit": 2,
        "lines": ["logcount: error: output topic out has ..." + SHOW_HINT]}


# -- --emit-final: the closing facts ------------------------------------------------------------

NOW = datetime(2017, 7, 30, 14, 12, 0, tzinfo=UTC)  # three minutes after M0


def closing_table(closing: ClosingState) -> dict[bytes, bytes]:
    t = table()
    t[PROGRESS_KEY] = ProgressRecord(Identity("in", "IN-ID", "out", "OUT-ID", "ERROR"),
                                     {0: 40, 1: 10}, M0, None, closing).encode()
    return t


def closing_facts(closing: ClosingState) -> Facts:
    f = facts()
    return Facts(closing_table(closing), f.partitions, f.start, f.state_log)


def test_without_emit_final_there_is_no_closing_part():
    report = describe(facts(), S, NOW)
    assert report["closing"] is None
    assert "final topic" not in render(report)


def test_closing_shows_each_partition_which_are_idle_the_last_closed_minute_and_the_open_ones():
    # p0 read up to 14:10 and is not caught up; p1 caught up since 14:09:05, idle at 14:12
    parts = {0: PartitionFacts(M0 + 1, None), 1: PartitionFacts(M0 - 3, M0 * 60 + 5)}
    report = describe(closing_facts(ClosingState("out-final", 60, ClosingFacts(parts, M0 + 1))),
                      S, NOW)
    assert report["closing"] == {
        "final_topic": "out-final", "grace_seconds": 60, "grace": "1m",
        "now": "2017-07-30 14:12:00", "closed_before": "2017-07-30 14:10:00",
        "last_closed": "2017-07-30 14:09:00",
        "open_minutes": 1,  # 14:09 and 14:10 are held; 14:09 is final
        "watermark": "2017-07-30 14:10:00",
        "partitions": [
            {"partition": 0, "newest": "2017-07-30 14:10:00", "caught_up_since": None,
             "idle": False},
            {"partition": 1, "newest": "2017-07-30 14:06:00",
             "caught_up_since": "2017-07-30 14:09:05", "idle": True}]}
    json.dumps(report)
    text = render(report)
    assert "final topic   out-final (--emit-final 1m)" in text
    assert ("last closed   2017-07-30 14:09:00 (every minute before 2017-07-30 14:10:00 is "
            "final); 1 held minutes open") in text
    assert "closing now   2017-07-30 14:12:00 UTC: watermark 2017-07-30 14:10:00 (held by p0)" \
        in text
    lines = text.splitlines()
    i = lines.index(next(ln for ln in lines if ln.split()[:3] == ["partition", "newest", "minute"]))
    assert lines[i + 1].split() == ["p0", "2017-07-30", "14:10:00", "-", "no"]
    assert lines[i + 2].split() == ["p1", "2017-07-30", "14:06:00", "2017-07-30", "14:09:05",
                                    "yes"]
    # a minute earlier p1 was caught up for 55 s only: it still held the watermark
    earlier = describe(closing_facts(ClosingState("out-final", 60, ClosingFacts(parts, M0 + 1))),
                       S, datetime(2017, 7, 30, 14, 10, 0, tzinfo=UTC))["closing"]
    assert [p["idle"] for p in earlier["partitions"]] == [False, False]
    assert earlier["watermark"] == "2017-07-30 14:06:00"


def test_closing_before_the_first_close_and_before_any_partition_was_planned():
    report = describe(closing_facts(ClosingState("out-final", 120, ClosingFacts({}))), S, NOW)
    c = report["closing"]
    assert (c["last_closed"], c["closed_before"], c["open_minutes"], c["partitions"]) == (
        None, None, 2, [])
    text = render(report)
    assert "last closed   none yet; 2 held minutes open" in text
    assert "no partition planned yet: nothing closes" in text
    quiet = {0: PartitionFacts(M0, M0 * 60), 1: PartitionFacts(None, M0 * 60)}
    text = render(describe(closing_facts(ClosingState("out-final", 60, ClosingFacts(quiet))),
                           S, NOW))
    assert "every partition idle: the clock closes" in text
    garbage = {0: PartitionFacts(M0, None), 1: PartitionFacts(None, None)}
    text = render(describe(closing_facts(ClosingState("out-final", 60, ClosingFacts(garbage))),
                           S, NOW))
    assert "no watermark: p1 not idle and without an event time yet" in text


def test_open_minutes_of_a_grouped_state_count_minutes_not_series():
    hour = M0 // 60
    t = {PROGRESS_KEY: ProgressRecord(
        Identity("in", "IN-ID", "out", "OUT-ID", "ERROR"), {0: 40, 1: 10}, M0, None,
        ClosingState("out-final", 60, ClosingFacts({}, M0))).encode(),
         # series 0 and 1 in 14:09 and 14:10, series 1 in 14:08 (final): two open minutes
         chunk_key(0, hour): encode_chunk(0, np.array([0, 0, 1, 1, 1]),
                                          np.array([9, 10, 8, 9, 10]),
                                          np.array([1, 2, 3, 4, 5])),
         name_key(0): encode_name(("api",)), name_key(1): encode_name(("web",))}
    f = facts()
    report = describe(Facts(t, f.partitions, f.start, f.state_log), S, NOW)
    assert report["minutes"] == 5 and report["series"] == 2
    assert report["closing"]["open_minutes"] == 2
