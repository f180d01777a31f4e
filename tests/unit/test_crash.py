import pytest

from logcount.pipeline.crash import CrashPoints


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


def test_hang_mode_blocks_only_the_thread_at_the_point():
    import threading

    c = CrashPoints("in_send_offsets:1", "hang")
    c.batch = 1
    c("after_produce")  # another point: returns
    t = threading.Thread(target=c, args=("in_send_offsets",), daemon=True)
    t.start()
    t.join(0.3)
    assert t.is_alive()


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError):
        CrashPoints("after_commit", "nap")


def test_several_points_each_at_its_batch():
    c = CrashPoints("in_send_offsets:2, after_send_offsets:4", "exit")
    assert c.points == {("in_send_offsets", 2), ("after_send_offsets", 4)}
    assert (c.point, c.at_batch) == ("in_send_offsets", 2)
    c.batch = 4
    c("in_send_offsets")  # that point is for batch 2: returns
    c.batch = 2
    c("after_send_offsets")  # and this one for batch 4
