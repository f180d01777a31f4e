"""pipeline/state_view.py's pure part: the report and the prediction of `logcount state show`."""

from __future__ import annotations

import json

from logcount.core.errors import SHOW_HINT
from logcount.core.settings import RunSettings
from logcount.pipeline.hour_records import encode_hour, hour_key, minute_index
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
