import pytest

from pipeline.state import merge_counts

pytestmark = pytest.mark.unit


def test_merge_returns_new_absolute_totals_of_touched_minutes_only():
    totals = {"a": 3, "b": 5}
    out = merge_counts(totals, {"b": 2, "c": 1})
    assert out == {"b": 7, "c": 1}
    assert totals == {"a": 3, "b": 5}, "the caller's totals must not change before a commit"


def test_merge_ignores_zero_counts():
    assert merge_counts({"a": 1}, {"a": 0}) == {}
