"""The exactness check every end-to-end test ends with: nothing lost, nothing counted twice."""

from __future__ import annotations

import json

from tests.support.readers import (
    Bootstrap,
    end_offsets,
    group_offsets,
    read_all,
    read_table,
    sink_offsets,
    totals_history,
)


def assert_exact(bootstrap: Bootstrap, names, expected, *, url=None, malformed=None,
                 drained: bool = True, sink_at_end: bool = False,
                 timeout_s: float = 60.0) -> None:
    """The output topic's totals never go down and end at `expected` (minute -> count); with
    `url`, MySQL's error_log holds `expected` (and with `sink_at_end` the sink's positions are
    the output's end); with `malformed` ((partition, offset) of input records), the DLQ holds
    each exactly once; with `drained`, the group's offsets are the input's end."""
    expected = dict(expected)
    history = totals_history(read_all(bootstrap, names.topic("out"), True, timeout_s))
    for minute, totals in history.items():
        assert totals == sorted(totals), f"total of {minute} went down: {totals}"
    assert {k: v[-1] for k, v in history.items()} == expected, "output topic (last per minute)"
    if url is not None:
        assert read_table(url) == expected, "MySQL error_log"
    if sink_at_end:
        out_ends = end_offsets(bootstrap, names.topic("out"))
        assert sink_offsets(url, names) == {p: o for p, o in out_ends.items() if o > 0}, \
            "the sink's stored positions must reach the output's end (past the commit markers)"
    if malformed is not None:
        dlq = [json.loads(m.value())
               for m in read_all(bootstrap, names.topic("dlq"), True, timeout_s)]
        refs = [(d["partition"], d["offset"]) for d in dlq]
        assert len(refs) == len(set(refs)), "a malformed line is in the DLQ more than once"
        assert set(refs) == set(malformed), "the DLQ holds exactly the committed malformed lines"
        assert all(d["topic"] == names.topic("in") and d["reason"] for d in dlq)
    if drained:
        ends = end_offsets(bootstrap, names.topic("in"))
        assert group_offsets(bootstrap, names.group, names.topic("in")) == ends, \
            "the group's offsets must be the input's end"
