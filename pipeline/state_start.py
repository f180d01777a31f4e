"""What a start does with the state it finds (pure): compare it with the cluster and with what
this start is configured to do, repair what can be made exact, refuse the rest (check_start)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from logcount.core.errors import StateRefused
from logcount.pipeline.closing import ClosingFacts, ClosingState, grace_text
from logcount.pipeline.hour_records import hour_key
from logcount.pipeline.series import SeriesTotals, cell_key
from logcount.pipeline.stage_state import StageState
from logcount.pipeline.state_identity import Identity, Wanted, grouping, refuse_other_counting
from logcount.pipeline.state_records import ProgressRecord, SeriesRecords
from logcount.pipeline.totals import Totals

__all__ = ["Start", "StartFacts", "check_start"]


@dataclass(frozen=True)
class StartFacts:
    """What the cluster says at start, read after init_transactions fenced any predecessor."""

    input_topic_id: str
    output_topic_id: str
    earliest: dict[int, int]  # input log start per partition
    latest: dict[int, int]  # input last stable offset per partition
    group: dict[int, int]  # the group's committed offsets (partitions without one left out)
    final_records: int = 0  # --emit-final: offsets in the final topic (0: empty or missing)
    final_topic_id: str | None = None  # --emit-final: the final topic's id (None: missing)


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
        refuse_other_counting(old, want)
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
        start = _fresh_or_recount(ident, facts, want, warnings, tombstones, read_before)
        start.state.closing = closing_at_start(None, facts, want, warnings)
        return start
    closing = closing_at_start(progress.closing, facts, want, warnings)

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
                       progress.closed_before, by_series, closing)
    # A closing state new to this start is committed before any batch closes a minute
    # (pipeline/finals.py): a final topic's records are then always those of a closing state.
    must_commit = must_commit or (closing is not None and progress.closing is None)
    records: list[tuple[bytes, bytes | None]] = []
    if by_series is not None and series.cells:  # the first layout: rewritten as chunks at once
        records = by_series.all_chunk_records()
        tombstones = sorted(set(tombstones) | {cell_key(*c) for c in series.cells})
        must_commit = True
    return Start(state, warnings, must_commit, tombstones, records)


def closing_at_start(old: ClosingState | None, facts: StartFacts, want: Wanted,
                     warnings: list[str]) -> ClosingState | None:
    """--emit-final against the state's closing state (the identity rule of final records).

    Allowed: turning it on (a state without closing, a final topic with nothing in it), and
    another GRACE (closed minutes stay closed, later ones close with the new one). Refused:
    turning it off (late lines would change minutes published as final), another final topic
    (its minutes would be missing there, or repeated), another --rollup (a window begun before
    would be missing, or sum minutes already gone from memory), and a final topic that already
    holds records the state knows nothing of (a recount, another stage's: finals twice)."""
    if want.final_topic is None or want.grace_seconds is None:
        if old is not None:
            raise StateRefused(
                f"output topic {want.output_topic} closes minutes into final topic "
                f"{old.final_topic} (--emit-final {grace_text(old.grace_seconds)}), this start has "
                f"no --emit-final: lines of closed minutes would change totals already "
                f"published as final; pass --emit-final, or use a new --output-topic")
        return None
    if old is None:
        if facts.final_records:
            raise StateRefused(
                f"final topic {want.final_topic} already holds {facts.final_records} offsets, "
                f"but the state of output topic {want.output_topic} has closed nothing into it "
                f"(a recount, or another stage's topic): its final records would be published "
                f"twice; use a new --final-topic")
        return ClosingState(want.final_topic, want.grace_seconds, ClosingFacts({}),
                            want.rollups, facts.final_topic_id)
    if old.final_topic != want.final_topic:
        raise StateRefused(
            f"output topic {want.output_topic} closes minutes into final topic "
            f"{old.final_topic}, this start has --final-topic {want.final_topic}: the minutes "
            f"closed so far would be missing there; keep {old.final_topic}, or use a new "
            f"--output-topic (and group) to close into {want.final_topic}")
    if old.final_topic_id is not None and old.final_topic_id != facts.final_topic_id:
        raise StateRefused(
            f"final topic {old.final_topic} was recreated (id {old.final_topic_id} in the state, "
            f"{facts.final_topic_id or 'none'} now): the minutes closed before are gone from it "
            f"and would not be published again; restore it, or count anew with a new "
            f"--output-topic and --final-topic")
    if old.rollups != want.rollups:
        raise StateRefused(
            f"output topic {want.output_topic} closes minutes with --rollup "
            f"{_rollups(old.rollups)}, this start has --rollup {_rollups(want.rollups)}: a "
            f"window begun before would be missing or miss minutes already gone from memory; "
            f"keep {_rollups(old.rollups)}, or use a new --final-topic and --output-topic")
    if old.grace_seconds != want.grace_seconds:
        warnings.append(
            f"--emit-final changed from {grace_text(old.grace_seconds)} to "
            f"{want.emit_final or grace_text(want.grace_seconds)}: the minutes closed so far stay "
            f"closed, the next close with the new grace")
    return ClosingState(old.final_topic, want.grace_seconds, old.facts, old.rollups,
                        old.final_topic_id or facts.final_topic_id)


def _rollups(windows: tuple[int, ...]) -> str:
    return ",".join(grace_text(w * 60) for w in windows) or "(none)"


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
