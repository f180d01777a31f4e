"""The stage's state and its rules (pure): what it holds, how one batch changes it, and what a
start does with what it finds.

The state is the per-minute totals, the input offsets those totals include, the event-time
watermark, and the identity they belong to (input topic and its id, output topic and its id,
levels, and the other counting settings: line rule, time pattern, timezone, JSON fields). It lives
in a compacted topic beside the output topic (`<output>-state`) and is written in the SAME
transaction as the totals it describes, so the two can never disagree:
    key b"progress"              JSON: format, identity, offsets, watermark
    key b"totals/YYYY-MM-DD HH"  the hour's minutes and totals (pipeline.totals.encode_hour)
    key b"claim"                 JSON: the instance that last took the transactional id, written
                                 in a transaction of its own right after its init_transactions
                                 and the start check
    with --group-by, instead of the hour records: the series' names and per-hour records of
    chunks of series (pipeline/series.py)
The group's committed offsets (sent in that transaction too) are a mirror for lag monitors and
`kafka-consumer-groups`, never the source: `check_start` compares them and repairs or refuses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from logcount.core.errors import StateRefused
from logcount.formats.spec import LineFormat
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.series import (
    SeriesTotals,
    cell_key,
    chunk_key,
    encode_name,
    name_key,
    parse_cell_key,
    parse_chunk_key,
    parse_name_key,
)
from logcount.pipeline.totals import (
    Totals,
    encode_hour,
    hour_key,
    minute_index,
    minute_text,
    parse_hour_key,
)

__all__ = [
    "FORMAT",
    "CLAIM_KEY",
    "PROGRESS_KEY",
    "STATE_SUFFIX",
    "Change",
    "Identity",
    "ProgressRecord",
    "StageState",
    "StartFacts",
    "Wanted",
    "check_start",
    "claim_value",
    "claimant",
    "decode_records",
    "decode_series",
    "late_before",
    "state_topic_name",
]

FORMAT = 1
STATE_SUFFIX = "-state"
PROGRESS_KEY = b"progress"
CLAIM_KEY = b"claim"
# Timestamps carry no zone, so a line may honestly be up to a day ahead of the UTC wall clock. A
# minute beyond now + this never advances the watermark, nor does any minute move it past the wall
# clock: one bogus future timestamp (year 2099, or tomorrow) cannot make every other line late.
FUTURE_SLACK_MINUTES = 24 * 60


def state_topic_name(output_topic: str) -> str:
    """The state topic's name: the output topic plus a suffix, so one prefixed ACL covers both."""
    return output_topic + STATE_SUFFIX


@dataclass(frozen=True)
class Identity:
    input_topic: str
    input_topic_id: str
    output_topic: str
    output_topic_id: str
    level: str  # the levels counted, 'ERROR' or 'CRITICAL,ERROR,FATAL' (LineFormat.level_label)
    # The other counting settings that differ from their defaults, (flag, value) sorted: the
    # line rule or regex, time pattern, timezone and JSON fields (counting_settings). A state
    # written before they existed has none, which is what the defaults are.
    counting: tuple[tuple[str, str], ...] = ()


def counting_settings(fmt: LineFormat) -> tuple[tuple[str, str], ...]:
    """A format's counting settings besides the levels, those not at their defaults."""
    defaults = LineFormat().identity()
    return tuple(sorted((k, v) for k, v in fmt.identity().items()
                        if k != "--level" and v is not None and v != defaults[k]))


@dataclass(frozen=True)
class ProgressRecord:
    identity: Identity
    offsets: dict[int, int]  # input partition -> position the totals include (exclusive)
    watermark: int | None = None  # minute index, see FUTURE_SLACK_MINUTES
    # Minutes before this were evicted (--lateness-horizon): closed for good, whatever a later
    # start's horizon says, since their totals are no longer known.
    closed_before: int | None = None

    def encode(self) -> bytes:
        i = self.identity
        return json.dumps({
            "format": FORMAT, "input_topic": i.input_topic, "input_topic_id": i.input_topic_id,
            "output_topic": i.output_topic, "output_topic_id": i.output_topic_id,
            "level": i.level, "counting": dict(i.counting),
            "offsets": {str(p): o for p, o in sorted(self.offsets.items())},
            "watermark": None if self.watermark is None else minute_text(self.watermark),
            "closed_before": (None if self.closed_before is None
                              else minute_text(self.closed_before)),
        }, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> ProgressRecord:
        try:
            v = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"progress record is not JSON: {exc}") from None
        if not isinstance(v, dict) or v.get("format") != FORMAT:
            got = v.get("format") if isinstance(v, dict) else None
            raise ValueError(f"progress record has format {got!r}; this logcount reads {FORMAT}")
        counting = v.get("counting") or {}
        if not isinstance(counting, dict):
            raise ValueError("progress record's counting settings are not an object")
        ident = Identity(v["input_topic"], v["input_topic_id"], v["output_topic"],
                         v["output_topic_id"], v["level"],
                         tuple(sorted((str(k), str(x)) for k, x in counting.items())))
        wm, closed = v.get("watermark"), v.get("closed_before")
        return cls(ident, {int(p): int(o) for p, o in v["offsets"].items()},
                   None if wm is None else minute_index(wm),
                   None if closed is None else minute_index(closed))


def claim_value(instance: str, host: str, pid: int, at: str) -> bytes:
    """The claim record's value: who took the transactional id, and when (for an operator)."""
    return json.dumps({"instance": instance, "host": host, "pid": pid, "at": at}).encode()


def claimant(records: Mapping[bytes, bytes]) -> str | None:
    """The instance whose claim is the state topic's last (None: no claim, or unreadable).

    The rule of a stage whose Kafka call hung (pipeline/driver.py): it may replace its clients,
    and so fence whoever holds the transactional id, only while this is still itself."""
    raw = records.get(CLAIM_KEY)
    if raw is None:
        return None
    try:
        got = json.loads(raw).get("instance")
    except (ValueError, AttributeError):
        return None
    return got if isinstance(got, str) else None


def decode_records(records: Mapping[bytes, bytes], topic: str
                   ) -> tuple[ProgressRecord | None, dict[int, bytes]]:
    """The state topic's last value per key -> (progress or None, {hour: encoded totals})."""
    progress = None
    hours: dict[int, bytes] = {}
    for key, value in records.items():
        if key == PROGRESS_KEY:
            try:
                progress = ProgressRecord.decode(value)
            except (ValueError, KeyError, TypeError) as exc:
                raise StateRefused(f"state topic {topic}: {exc}; it was written by another "
                                   f"program or version - use another output topic") from None
            continue
        if key == CLAIM_KEY:  # who holds the transactional id: not part of the counts
            continue
        if (parse_cell_key(key) is not None or parse_chunk_key(key) is not None
                or parse_name_key(key) is not None):
            continue  # a series' (decode_series)
        hour = parse_hour_key(key)
        if hour is None:
            raise StateRefused(f"state topic {topic} holds a record with key {key[:40]!r} that "
                               f"logcount did not write - use another output topic")
        hours[hour] = value
    return progress, hours


@dataclass(frozen=True)
class SeriesRecords:
    """The state topic's --group-by records: names {id: tuple JSON}, chunks {(chunk, hour):
    bytes}, and the first layout's cells {(id, hour): bytes}."""

    names: dict[int, bytes] = field(default_factory=dict)
    cells: dict[tuple[int, int], bytes] = field(default_factory=dict)
    chunks: dict[tuple[int, int], bytes] = field(default_factory=dict)

    def keys(self) -> list[bytes]:
        return ([name_key(i) for i in sorted(self.names)]
                + [cell_key(i, h) for i, h in sorted(self.cells)]
                + [chunk_key(c, h) for c, h in sorted(self.chunks)])


def decode_series(records: Mapping[bytes, bytes]) -> SeriesRecords:
    """The state topic's last value per key -> its series records."""
    out = SeriesRecords()
    for key, value in records.items():
        cell = parse_cell_key(key)
        if cell is not None:
            out.cells[cell] = value
            continue
        chunk = parse_chunk_key(key)
        if chunk is not None:
            out.chunks[chunk] = value
            continue
        sid = parse_name_key(key)
        if sid is not None:
            out.names[sid] = value
    return out


def grouping(counting: tuple[tuple[str, str], ...]) -> tuple[tuple[str, ...], int] | None:
    """(dimension names, --max-series) of an identity's counting settings; None: no --group-by."""
    c = dict(counting)
    if not c.get("--group-by"):
        return None
    names = tuple(item.partition("=")[0] for item in c["--group-by"].split(","))
    return names, int(c["--max-series"])


@dataclass(frozen=True)
class Wanted:
    """What this start is configured to do."""

    input_topic: str
    output_topic: str
    level: str
    exactly_once: bool = True
    starting_offsets: str = "earliest"
    horizon_minutes: int | None = None
    counting: tuple[tuple[str, str], ...] = ()  # Identity.counting


@dataclass(frozen=True)
class StartFacts:
    """What the cluster says at start, read after init_transactions fenced any predecessor."""

    input_topic_id: str
    output_topic_id: str
    earliest: dict[int, int]  # input log start per partition
    latest: dict[int, int]  # input last stable offset per partition
    group: dict[int, int]  # the group's committed offsets (partitions without one left out)


@dataclass
class Start:
    """What `check_start` decided: the state to run from and what to tell the operator."""

    state: StageState
    warnings: list[str] = field(default_factory=list)
    # Commit progress and offsets before the first batch even with nothing to read: a repair,
    # a fresh start's starting points, a recount's reset.
    must_commit: bool = False
    tombstones: list[bytes] = field(default_factory=list)  # stale state keys to delete
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)  # a state rewrite


def _partitions(d: Mapping[int, int]) -> str:
    return ", ".join(f"p{p}" for p in sorted(d))


def _refuse_other_counting(old: Identity, want: Wanted) -> None:
    """A counting setting other than the state's: the totals would mix two rules."""
    was, now = dict(old.counting), dict(want.counting)
    defaults = LineFormat().identity()  # a setting at its default is not stored
    for flag in sorted(set(was) | set(now)):
        if was.get(flag) != now.get(flag):
            a, b = (x if x is not None else defaults.get(flag) for x in (was.get(flag),
                                                                          now.get(flag)))
            raise StateRefused(
                f"output topic {want.output_topic} was counted with {flag} "
                f"{'(not set)' if a is None else repr(a)}, this start has "
                f"{'(not set)' if b is None else repr(b)}: the totals would mix both; use a new "
                f"--output-topic (and group) for the new setting")


def check_start(progress: ProgressRecord | None, hours: Mapping[int, bytes], facts: StartFacts,
                want: Wanted, series: SeriesRecords | None = None) -> Start:
    """Compare the stored state with the cluster; repair what can be made exact, refuse the rest.

    Refused (StateRefused, exit 2): another level or input topic than the state's, an input
    topic recreated (new id, or state offsets beyond its end), group offsets that differ from
    the state's (a reset: silently following either would count twice or skip), and no state
    where the group has offsets and the input no longer holds its beginning. Repaired with a
    warning: group offsets missing (expired, deleted), a recreated output topic or lost state
    when the input still holds everything (recount from offset 0), offsets below the log start
    (retention deleted records before they were read: they are gone).
    """
    ident = Identity(want.input_topic, facts.input_topic_id, want.output_topic,
                     facts.output_topic_id, want.level, want.counting)
    series = series or SeriesRecords()
    warnings: list[str] = []
    tombstones: list[bytes] = []
    read_before = bool(facts.group)  # the input was read by this stage before
    if progress is not None:
        old = progress.identity
        if old.input_topic != want.input_topic:
            raise StateRefused(
                f"output topic {want.output_topic} holds totals of input topic {old.input_topic}, "
                f"not {want.input_topic}; use another --output-topic")
        if old.level != want.level:
            raise StateRefused(
                f"output topic {want.output_topic} counts level {old.level}, not {want.level}: "
                f"the totals would mix both; use another --output-topic for {want.level}")
        _refuse_other_counting(old, want)
        if old.output_topic_id != facts.output_topic_id:
            warnings.append(
                f"output topic {want.output_topic} was recreated (id {old.output_topic_id} in "
                f"the state, {facts.output_topic_id} now): its totals are gone with it")
            tombstones = [hour_key(h) for h in sorted(hours)] + series.keys()
            progress, hours, read_before = None, {}, True
            series = SeriesRecords()
        elif old.input_topic_id != facts.input_topic_id:
            raise StateRefused(
                f"input topic {want.input_topic} was recreated (id {old.input_topic_id} in the "
                f"state, {facts.input_topic_id} now): the state's offsets point into a log that "
                f"is gone; use a new --output-topic (and group) to count the new topic")
        else:
            beyond = {p: o for p, o in progress.offsets.items()
                      if o > facts.latest.get(p, -1)}
            if beyond:
                detail = ", ".join(f"p{p} state {o} > end {facts.latest.get(p, 'none')}"
                                   for p, o in sorted(beyond.items()))
                raise StateRefused(
                    f"input topic {want.input_topic} is behind the state ({detail}): it was "
                    f"recreated or truncated; use a new --output-topic (and group) to count it")
    if progress is None:
        # Hour records without a progress record (it was deleted): stale, never to be loaded.
        tombstones = sorted(set(tombstones) | {hour_key(h) for h in hours} | set(series.keys()))
        return _fresh_or_recount(ident, facts, want, warnings, tombstones, read_before)

    offsets = dict(progress.offsets)
    must_commit = False
    lost = {p: facts.earliest[p] - o for p, o in offsets.items()
            if facts.earliest.get(p, 0) > o}
    if lost:
        warnings.append(
            "retention deleted input records before they were counted ("
            + ", ".join(f"p{p}: {n} offsets" for p, n in sorted(lost.items()))
            + "); continuing from the log start")
        offsets.update({p: facts.earliest[p] for p in lost})
        must_commit = True
    new = {p: facts.earliest[p] for p in facts.latest if p not in offsets}
    if new:
        offsets.update(new)  # partitions added to the input: all their records are new
        must_commit = True
    if want.exactly_once:
        differ = {p: g for p, g in facts.group.items() if p in offsets
                  and p not in lost and g != progress.offsets.get(p, g)}
        if differ:
            detail = ", ".join(f"p{p} group {g} state {progress.offsets[p]}"
                               for p, g in sorted(differ.items()))
            raise StateRefused(
                f"the group's offsets differ from the stage's state ({detail}): they were reset "
                f"behind the stage's back; the state (with its totals) is what counts, so reset "
                f"the group back to the state's offsets (kafka-consumer-groups --reset-offsets "
                f"--to-offset) or delete them (--delete-offsets: the stage then re-commits its "
                f"own), or use a new --output-topic to recount")
        missing = {p: o for p, o in offsets.items() if p not in facts.group and p not in new}
        if missing:
            warnings.append(
                f"the group has no committed offsets for {_partitions(missing)} (expired after "
                f"offsets.retention.minutes, deleted, or the group was deleted); the state has "
                f"them and the next transaction commits them again")
            must_commit = True
    else:
        # at-least-once replays from the group's offsets: the weaker mode's documented cost.
        offsets.update({p: g for p, g in facts.group.items() if p in offsets})
    group = grouping(want.counting)
    try:
        totals = Totals.from_hours(hours.items())
        by_series = None if group is None else SeriesTotals.restore(
            *group, series.names, series.cells.items(), series.chunks.items())
    except ValueError as exc:
        raise StateRefused(f"state topic of {want.output_topic} holds a damaged totals record "
                           f"({exc}); restore the state topic, or recount into a new "
                           f"--output-topic") from None
    state = StageState(ident, offsets, totals, progress.watermark, want.horizon_minutes,
                       progress.closed_before, by_series)
    records: list[tuple[bytes, bytes | None]] = []
    if by_series is not None and series.cells:  # the first layout: rewritten as chunks at once
        records = by_series.all_chunk_records()
        tombstones = sorted(set(tombstones) | {cell_key(*c) for c in series.cells})
        must_commit = True
    return Start(state, warnings, must_commit, tombstones, records)


def _fresh_or_recount(ident: Identity, facts: StartFacts, want: Wanted, warnings: list[str],
                      tombstones: list[bytes], read_before: bool) -> Start:
    """No state: a first start, or a recount when the input was read before (the group has
    offsets, or the state belonged to a recreated output topic)."""
    if read_before:
        held = {p: e for p, e in facts.earliest.items() if e > 0}
        if held:
            raise StateRefused(
                f"the stage has no state for output topic {want.output_topic} but its input was "
                f"read before (the group has offsets, or the state belonged to an older output "
                f"topic), and the input no longer holds its beginning ("
                + ", ".join(f"p{p} starts at {e}" for p, e in sorted(held.items()))
                + "): a recount would not be exact. Restore the state topic, or count anew "
                "with a new --output-topic and --group-id (from --starting-offsets)")
        warnings.append(
            f"no state for output topic {want.output_topic} although the input was read before: "
            f"recounting from the input's beginning (it still holds every record); the output "
            f"topic's totals are republished from zero")
        offsets = {p: 0 for p in facts.latest}
    elif want.starting_offsets == "earliest":
        offsets = dict(facts.earliest)
    else:
        offsets = dict(facts.latest)
    group = grouping(want.counting)
    state = StageState(ident, offsets, Totals(), None, want.horizon_minutes, None,
                       None if group is None else SeriesTotals(*group))
    return Start(state, warnings, True, tombstones)


def late_before(watermark: int | None, horizon_minutes: int | None) -> int | None:
    """The first minute that is not late, or None when nothing is (no horizon, no watermark)."""
    if horizon_minutes is None or watermark is None:
        return None
    return watermark - horizon_minutes


@dataclass(frozen=True)
class Change:
    """What one batch does to the state, computed before its transaction, applied after."""

    updates: dict[int, int]  # minute -> new absolute total (published to the output topic)
    offsets: dict[int, int]
    watermark: int | None
    evict_before: int | None  # hours wholly before this minute leave memory and the state topic
    state_records: list[tuple[bytes, bytes | None]]  # (key, value or None for a tombstone)
    closed_before: int | None = None
    # With --group-by (then `updates` is empty): (series id, minute) -> new absolute total, the
    # tuples this batch names, and its lines counted under the overflow series.
    series_updates: dict[tuple[int, int], int] = field(default_factory=dict)
    new_names: dict[int, tuple[str, ...]] = field(default_factory=dict)
    overflow_lines: int = 0
    widest: str | None = None  # the dimension with the most distinct values, on overflow
    series_lines: dict[int, int] = field(default_factory=dict)  # series id -> lines this batch

    def outputs(self, tuples: Mapping[int, tuple[str, ...]]
                ) -> list[tuple[int, tuple[str, ...], int]]:
        """(minute, dimension values, total) of every output record, in order; `tuples`:
        the names already held (this change's new ones are added)."""
        if not self.series_updates:
            return [(m, (), n) for m, n in sorted(self.updates.items())]
        names = {**tuples, **self.new_names}
        return sorted((m, names[sid], n) for (sid, m), n in self.series_updates.items())


class StageState:
    """The state in memory. `change()` is pure; `advance()` applies a committed change."""

    def __init__(self, identity: Identity, offsets: Mapping[int, int], totals: Totals,
                 watermark: int | None = None, horizon_minutes: int | None = None,
                 closed_before: int | None = None, series: SeriesTotals | None = None) -> None:
        self.identity = identity
        self.series = series  # with --group-by: the per-series totals (then totals stays empty)
        self.offsets = dict(offsets)
        self.totals = totals
        self.watermark = watermark
        self.horizon_minutes = horizon_minutes
        self.closed_before = closed_before

    def late_before(self) -> int | None:
        """The first minute a line may count for: the horizon's, and never before the minutes
        an earlier eviction closed (a wider or removed horizon cannot reopen them)."""
        bounds = [b for b in (late_before(self.watermark, self.horizon_minutes),
                              self.closed_before) if b is not None]
        return max(bounds) if bounds else None

    def change(self, ranges: Sequence[OffsetRange], counts: Mapping[int, int],
               now_minute: int, starts: Mapping[int, int] | None = None,
               extra_records: Sequence[tuple[bytes, bytes | None]] = (),
               series: Mapping[tuple[str, ...], Mapping[int, int]] | None = None) -> Change:
        """The batch's effect: new totals of the minutes it touched, offsets at the ranges' ends
        (`starts`, where given, for partitions the batch did not read: moved or new ones),
        the watermark moved by the minutes it counted (never past the wall clock, and not at all
        by a minute beyond now + FUTURE_SLACK_MINUTES),
        hours that fell behind the horizon evicted, and the state records that say all this.
        With --group-by, `series` holds the counts per tuple (`counts` their sums)."""
        by_minute = {m: n for m, n in counts.items() if n}
        if self.series is not None:
            return self._series_change(ranges, by_minute, now_minute, starts, extra_records,
                                       series or {})
        updates = self.totals.merged(by_minute)
        offsets = {**self.offsets, **(starts or {}), **{r.partition: r.end for r in ranges}}
        honest = [m for m in by_minute if m <= now_minute + FUTURE_SLACK_MINUTES]
        watermark = self.watermark
        if honest:  # never past the wall clock: a line a few hours ahead cannot close the present
            newest = min(max(honest), now_minute)
            watermark = newest if watermark is None else max(watermark, newest)
        evict = late_before(watermark, self.horizon_minutes)
        gone: set[int] = set()
        if evict is not None:  # whole hours behind the horizon, held or touched by this batch
            gone = set(self.totals.hours_before(evict))
            gone |= {m // 60 for m in updates if m // 60 * 60 + 60 <= evict}
        contents = self.totals.hours_after(updates)  # {hour: its minutes once applied}
        records: list[tuple[bytes, bytes | None]] = list(extra_records)
        records += [(hour_key(h), encode_hour(contents[h]))
                    for h in sorted(contents) if h not in gone]
        records += [(hour_key(h), None) for h in sorted(gone)]
        closed = self.closed_before
        if gone:
            closed = max(closed or 0, max(gone) * 60 + 60)
        progress = ProgressRecord(self.identity, offsets, watermark, closed)
        records.append((PROGRESS_KEY, progress.encode()))
        return Change(updates, offsets, watermark, evict if gone else None, records, closed)

    def _moved(self, ranges, by_minute, now_minute, starts):
        """Offsets and watermark after a batch, and the minute before which hours leave."""
        offsets = {**self.offsets, **(starts or {}), **{r.partition: r.end for r in ranges}}
        honest = [m for m in by_minute if m <= now_minute + FUTURE_SLACK_MINUTES]
        watermark = self.watermark
        if honest:
            newest = min(max(honest), now_minute)
            watermark = newest if watermark is None else max(watermark, newest)
        return offsets, watermark, late_before(watermark, self.horizon_minutes)

    def _series_change(self, ranges, by_minute, now_minute, starts, extra_records,
                       counts) -> Change:
        """change() with --group-by: per-series cells, and the names of new tuples."""
        assert self.series is not None
        st = self.series
        offsets, watermark, evict = self._moved(ranges, by_minute, now_minute, starts)
        got = st.assign(counts)
        updates = st.merged(got.counts)
        cells, last_gone = st.chunk_records(updates, evict)
        records: list[tuple[bytes, bytes | None]] = list(extra_records)
        records += [(name_key(sid), encode_name(t)) for sid, t in sorted(got.new_names.items())]
        records += cells
        closed = self.closed_before
        gone = last_gone is not None
        if last_gone is not None:
            closed = max(closed or 0, last_gone * 60 + 60)
        progress = ProgressRecord(self.identity, offsets, watermark, closed)
        records.append((PROGRESS_KEY, progress.encode()))
        return Change({}, offsets, watermark, evict if gone else None, records, closed,
                      updates, got.new_names, got.overflow_lines, got.widest,
                      {sid: sum(by_min.values()) for sid, by_min in got.counts.items()})

    def cells(self) -> int:
        """The (minute, series) totals held: minutes without --group-by."""
        return len(self.totals) if self.series is None else len(self.series)

    def advance(self, change: Change) -> None:
        """Apply a change whose transaction committed: only now do totals and offsets move."""
        if self.series is not None:
            self.series.apply(change.series_updates, change.new_names)
            if change.evict_before is not None:
                self.series.evict_hours_before(change.evict_before)
        self.totals.apply(change.updates)
        self.offsets = dict(change.offsets)
        self.watermark = change.watermark
        self.closed_before = change.closed_before
        if change.evict_before is not None:
            self.totals.evict_hours_before(change.evict_before)
