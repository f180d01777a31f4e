import pytest

from pipeline.crash import CrashPoints

pytestmark = pytest.mark.unit


def test_crash_point_parses_point_and_batch():
    c = CrashPoints("after_produce:3", "exit")
    assert (c.point, c.at_batch) == ("after_produce", 3)
    c.batch = 2
    c("after_produce")  # not this batch: returns


def test_crash_point_default_batch_and_off():
    assert CrashPoints("after_commit", "exit").at_batch == 1
    assert CrashPoints("", "exit").point is None


def test_unknown_point_is_refused():
    with pytest.raises(ValueError):
        CrashPoints("before_lunch", "exit")
