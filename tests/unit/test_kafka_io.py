"""connectors/kafka_io's pure edges, with a stand-in for the admin client's futures."""

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka.admin import OffsetSpec

from logcount.connectors import kafka_io
from logcount.core.errors import DependencyError


class _Admin:
    def __init__(self, offsets: dict[int, int]) -> None:
        self.offsets = offsets

    def list_offsets(self, req, **kwargs):
        out = {}
        for tp in req:
            f: Future = Future()
            f.set_result(SimpleNamespace(offset=self.offsets[tp.partition]))
            out[tp] = f
        return out


def test_list_offsets_returns_each_partitions_offset():
    got = kafka_io.list_offsets(_Admin({0: 5, 1: 0}), "t", [0, 1], OffsetSpec.latest())
    assert got == {0: 5, 1: 0}


def test_a_partition_whose_leader_is_away_is_an_error_to_retry_not_an_offset():
    # Seen on the 3-broker cluster with a broker killed: -1001 and no error. As an offset it
    # made the running stage stop with "input fell behind the state".
    with pytest.raises(DependencyError, match=r"no offset for partition\(s\) 0, 3 "):
        kafka_io.list_offsets(_Admin({0: -1001, 1: 7, 2: 0, 3: -1}), "t", [0, 1, 2, 3],
                              OffsetSpec.latest())
