"""The stage's state and its rules (pure): what it holds, how one batch changes it, and what a
start does with what it finds.

The state is the per-minute totals, the input offsets those totals include, the event-time
watermark, and the identity they belong to (input topic and its id, output topic and its id,
levels, and the other counting settings: line rule, time pattern, timezone, JSON fields). It lives
in a compacted topic beside the output topic (`<output>-state`) and is written in the SAME
transaction as the totals it describes, so the two can never disagree:
    key b"progress"              JSON: format, identity, offsets, watermark
    key b"totals/YYYY-MM-DD HH"  the hour's minutes and totals (pipeline.hour_records.encode_hour)
    key b"claim"                 JSON: the instance that last took the transactional id, written
                                 in a transaction of its own right after its init_transactions
                                 and the start check
    with --group-by, instead of the hour records: the series' names and per-hour records of
    chunks of series (pipeline/series.py)
The group's committed offsets (sent in that transaction too) are a mirror for lag monitors and
`kafka-consumer-groups`, never the source: `check_start` compares them and repairs or refuses.

Its parts, all re-exported here: the identity (state_identity.py), the records and their
encoding (state_records.py), what a start does with them (state_start.py), and the state in
memory with one batch's change (stage_state.py).
"""

from logcount.pipeline.stage_state import FUTURE_SLACK_MINUTES, Change, StageState, late_before
from logcount.pipeline.state_identity import (
    Identity,
    Wanted,
    counting_flags,
    counting_settings,
    grouping,
    schema_names,
)
from logcount.pipeline.state_records import (
    CLAIM_KEY,
    FORMAT,
    PROGRESS_KEY,
    STATE_SUFFIX,
    ProgressRecord,
    SeriesRecords,
    claim_value,
    claimant,
    decode_records,
    decode_series,
    state_topic_name,
)
from logcount.pipeline.state_start import Start, StartFacts, check_start

__all__ = [
    "FORMAT",
    "CLAIM_KEY",
    "FUTURE_SLACK_MINUTES",
    "PROGRESS_KEY",
    "STATE_SUFFIX",
    "Change",
    "Identity",
    "ProgressRecord",
    "SeriesRecords",
    "StageState",
    "Start",
    "StartFacts",
    "Wanted",
    "check_start",
    "claim_value",
    "claimant",
    "counting_flags",
    "counting_settings",
    "decode_records",
    "decode_series",
    "grouping",
    "late_before",
    "schema_names",
    "state_topic_name",
]
