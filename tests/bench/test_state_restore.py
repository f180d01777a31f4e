"""tools/state_restore.py: a state written as the stage writes it comes back whole,
measured."""

from __future__ import annotations

import json

from tools import state_restore


def test_restore_measures_a_state_that_comes_back_whole(endpoints, capsys):
    state_restore.main(["--minutes", "1440,7230", "--bootstrap-servers", endpoints.bootstrap])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["minutes"] for r in rows] == [1440, 7230], "every minute written is restored"
    assert [r["hours"] for r in rows] == [24, 121]
    for r in rows:
        assert 0 < r["restore_s"] < 60 and r["peak_rss_mb"] >= r["baseline_rss_mb"] > 0
