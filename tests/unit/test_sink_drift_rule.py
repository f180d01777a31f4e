"""The sink's drift rule: do MySQL's offsets belong to the output topic as it is now?"""

from logcount.core.sink_drift import topic_drift

ENDS = {0: 10, 1: 4}


def test_same_topic_within_its_end_is_no_drift():
    assert topic_drift("A", {0: 10, 1: 3}, "A", ENDS) is None


def test_nothing_stored_is_no_drift():
    assert topic_drift(None, {}, "A", ENDS) is None


def test_a_partition_added_since_is_no_drift():
    assert topic_drift("A", {0: 10}, "A", {0: 10, 1: 0, 2: 5}) is None


def test_another_id_is_a_recreation_even_within_the_end():
    # The dangerous case: the new topic is longer, MySQL's offsets sit inside it.
    reason = topic_drift("A", {0: 2, 1: 1}, "B", ENDS)
    assert reason == "was recreated (id A in MySQL, B now)"


def test_another_id_with_nothing_stored_is_still_reported():
    assert topic_drift("A", {}, "B", ENDS) == "was recreated (id A in MySQL, B now)"


def test_no_stored_id_and_an_offset_beyond_the_end_is_a_recreation():
    reason = topic_drift(None, {0: 10, 1: 9}, "B", ENDS)
    assert reason is not None and reason.startswith("was recreated (no topic id in MySQL")
    assert "partition 1 at 9 in MySQL, its end is 4" in reason
    assert "partition 0" not in reason


def test_no_stored_id_and_a_partition_that_is_gone_is_a_recreation():
    reason = topic_drift(None, {0: 3, 5: 1}, "B", ENDS)
    assert reason is not None and reason.startswith("was recreated")
    assert "partition 5 at 1 in MySQL, no such partition now" in reason


def test_no_stored_id_within_the_end_is_no_drift():
    # Offsets written before topic ids were kept: nothing to say they are of another topic.
    assert topic_drift(None, {0: 10, 1: 4}, "B", ENDS) is None


def test_no_id_from_the_broker_falls_back_on_the_ends():
    assert topic_drift("A", {0: 3}, None, ENDS) is None
    drift = topic_drift(None, {0: 11}, None, ENDS)
    assert drift is not None and drift.startswith("was recreated")


def test_same_id_beyond_the_end_is_a_truncated_log():
    reason = topic_drift("A", {0: 12}, "A", ENDS)
    assert reason is not None and reason.startswith("lost records (same topic id")
    assert "partition 0 at 12 in MySQL, its end is 10" in reason
