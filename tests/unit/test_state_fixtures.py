"""States written by main before the identity's schema names (tests/unit/fixtures/, captured from
real `logcount run --once` stages) restore under today's code as they are: no recount, no
refusal, no repair, their totals whole; and a stage without counting flags writes the progress
record it wrote then, byte for byte."""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path

import pytest

from logcount.core.errors import StateRefused
from logcount.core.settings import RunSettings, add_arguments, from_namespace
from logcount.pipeline.start_facts import wanted
from logcount.pipeline.state import (
    PROGRESS_KEY,
    Identity,
    ProgressRecord,
    StartFacts,
    check_start,
    counting_flags,
    counting_settings,
    decode_records,
    decode_series,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture(name: str) -> tuple[list[str], dict[bytes, bytes]]:
    doc = json.loads((FIXTURES / f"state_main_{name}.json").read_text())
    table = {base64.b64decode(k): base64.b64decode(v)
             for k, v in doc["records_base64"].items()}
    return doc["flags"], table


def _settings(flags: list[str]) -> RunSettings:
    parser = argparse.ArgumentParser()
    add_arguments(parser, RunSettings)
    return from_namespace(RunSettings, parser.parse_args(flags), {})


def _resume(table: dict[bytes, bytes], s: RunSettings):
    progress, hours = decode_records(table, "x-state")
    assert progress is not None
    i, offsets = progress.identity, progress.offsets
    # The cluster as the stage left it: the same topics, the group's offsets the state's.
    facts = StartFacts(i.input_topic_id, i.output_topic_id, {p: 0 for p in offsets},
                       dict(offsets), dict(offsets))
    return progress, check_start(progress, hours, facts, wanted(s), decode_series(table))


@pytest.mark.parametrize("name", ["plain", "grouped"])
def test_a_state_of_main_restores_without_a_recount(name):
    flags, table = _fixture(name)
    s = _settings(flags)
    progress, start = _resume(table, s)
    assert start.warnings == [] and not start.must_commit and start.tombstones == []
    assert start.state.offsets == progress.offsets, "resumed, not recounted"
    assert start.state.cells() > 0, "the totals came back"
    # the identity read back is the one today's settings make, by schema names
    assert progress.identity.counting == counting_settings(s.line_format)
    assert start.state.identity.counting == progress.identity.counting


def test_the_grouped_state_kept_its_flags_and_reads_them_as_schema_names():
    flags, table = _fixture("grouped")
    raw = json.loads(table[PROGRESS_KEY])
    assert raw["counting"] == {"--group-by": "host=host.name,level=level",
                               "--json-line-field": "message", "--max-series": "500",
                               "--timezone": "Europe/Paris"}
    ident = ProgressRecord.decode(table[PROGRESS_KEY]).identity
    assert dict(ident.counting) == {"group_by": "host=host.name,level=level",
                                    "json_line_field": "message", "max_series": "500",
                                    "timezone": "Europe/Paris"}
    # an Identity made with the old flag keys (a tool, an old caller) is the same identity
    assert Identity(ident.input_topic, ident.input_topic_id, ident.output_topic,
                    ident.output_topic_id, ident.level, tuple(raw["counting"].items())) == ident
    assert counting_flags(ident.counting) == raw["counting"]  # what `state show` prints
    # the next progress record this start writes keeps them by schema name
    _, start = _resume(table, _settings(flags))
    again = json.loads(ProgressRecord(start.state.identity, start.state.offsets).encode())
    assert again["counting"] == dict(ident.counting)


def test_another_counting_setting_than_the_old_states_is_still_refused_by_its_flag():
    flags, table = _fixture("grouped")
    other = _settings([f if f != "Europe/Paris" else "UTC" for f in flags])
    with pytest.raises(StateRefused, match="was counted with --timezone 'Europe/Paris', this "
                                        "start has 'UTC'"):
        _resume(table, other)


def test_without_counting_flags_the_progress_record_is_byte_for_byte_mains():
    flags, table = _fixture("plain")
    assert b'"counting":{}' in table[PROGRESS_KEY]
    progress, start = _resume(table, _settings(flags))
    rewritten = ProgressRecord(start.state.identity, start.state.offsets,
                               progress.watermark, progress.closed_before).encode()
    assert rewritten == table[PROGRESS_KEY]
