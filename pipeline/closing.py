"""Which minutes close after a batch (`--emit-final GRACE`; pure; the batch wires it in
pipeline/finals.py, docs/architecture.md#closing-minutes says how).

The closing watermark is the oldest of the input partitions' newest event minutes; a partition
caught up (nothing unread) for at least GRACE stops holding it back, and when every partition is,
the wall clock closes minutes too. A minute [s, e) closes once the watermark, or with every
partition idle the clock, is at or past e + GRACE. Closes only move forward, and `decide` reads
nothing but the committed facts (`ClosingFacts`, stored with the state) and the batch's own view
(`BatchSeen`), so a replay of the same state and batch closes the same minutes.

Times: a minute is a minute index (pipeline/hour_records.py); a clock second is on the same scale,
minute * 60 + second (`clock_second`), so the two compare without any zone or epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from logcount.core.settings.values import ROLLUP_WINDOWS as ROLLUPS
from logcount.pipeline.hour_records import minute_index, minute_text
from logcount.pipeline.watermark import honest_newest

__all__ = ["FACTS_VERSION", "ROLLUPS", "BatchSeen", "Closing", "ClosingFacts", "ClosingState",
           "PartitionFacts", "clock_second", "decide", "grace_text", "second_text", "watermark"]

# Versioned like the state's other records: a later layout is refused by this one, not misread.
FACTS_VERSION = 1


def clock_second(now: datetime) -> int:
    """An aware wall-clock time -> whole UTC seconds on the minute index's scale (floored: a
    partial second has not passed yet, so a close is never early)."""
    if now.tzinfo is None:
        raise ValueError("clock_second takes an aware datetime (a naive one has no zone)")
    t = now.astimezone(UTC)
    return minute_index(t.strftime("%Y-%m-%d %H:%M")) * 60 + t.second


def grace_text(seconds: int) -> str:
    """Seconds as GRACE is written: the largest whole unit ('90s', '2m', '1h')."""
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % n == 0:
            return f"{seconds // n}{unit}"
    return f"{seconds}s"


def second_text(second: int) -> str:
    """A clock second -> 'YYYY-MM-DD HH:MM:SS' (UTC)."""
    return f"{minute_text(second // 60)[:17]}{second % 60:02d}"


def _second_index(text: object) -> int:
    if not isinstance(text, str) or len(text) != 19 or text[16] != ":" or not text.isascii() \
            or not text[17:].isdigit() or int(text[17:]) > 59:
        raise ValueError(f"not a second 'YYYY-MM-DD HH:MM:SS': {text!r}")
    return minute_index(text[:16]) * 60 + int(text[17:])


@dataclass(frozen=True)
class PartitionFacts:
    """What the state will keep per input partition for closing."""

    # Newest event minute read from it (a line with a valid time, of any level), never past the
    # wall clock nor moved by a line beyond now + FUTURE_SLACK_MINUTES (stage_state's rule).
    newest_minute: int | None = None
    # The clock second of the first batch whose plan found nothing unread in it since it last
    # had input; None while it has input (or was never planned empty).
    caught_up_since: int | None = None

    def idle(self, now: int, grace: int) -> bool:
        """Caught up for at least `grace` seconds at `now`: it no longer holds the watermark."""
        return self.caught_up_since is not None and now - self.caught_up_since >= grace


@dataclass(frozen=True)
class ClosingFacts:
    """The closing state: per-partition facts and the first minute not yet closed (every minute
    before `closed_before` is final). Committed with the state; `partitions` is never mutated."""

    partitions: Mapping[int, PartitionFacts]
    closed_before: int | None = None

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict, versioned, readable by an operator (minutes and seconds as text)."""
        def opt(v: int | None, text: Callable[[int], str]) -> str | None:
            return None if v is None else text(v)
        return {
            "version": FACTS_VERSION,
            "closed_before": opt(self.closed_before, minute_text),
            "partitions": {str(p): {"newest": opt(f.newest_minute, minute_text),
                                    "caught_up_since": opt(f.caught_up_since, second_text)}
                           for p, f in sorted(self.partitions.items())},
        }

    @classmethod
    def from_json(cls, v: object) -> ClosingFacts:
        """Inverse of to_json; ValueError on anything it did not write."""
        if not isinstance(v, dict) or v.get("version") != FACTS_VERSION:
            got = v.get("version") if isinstance(v, dict) else None
            raise ValueError(f"closing facts have version {got!r}; this logcount reads "
                             f"{FACTS_VERSION}")
        parts = v.get("partitions")
        if not isinstance(parts, dict):
            raise ValueError("closing facts' partitions are not an object")
        out: dict[int, PartitionFacts] = {}
        for key, f in parts.items():
            if not (isinstance(key, str) and key.isascii() and key.isdigit()) \
                    or not isinstance(f, dict):
                raise ValueError(f"closing facts hold a bad partition entry {key!r}")
            newest, since = f.get("newest"), f.get("caught_up_since")
            out[int(key)] = PartitionFacts(None if newest is None else _minute(newest),
                                           None if since is None else _second_index(since))
        closed = v.get("closed_before")
        return cls(out, None if closed is None else _minute(closed))


@dataclass(frozen=True)
class ClosingState:
    """What a stage with --emit-final keeps in its progress record: where its finals go, the
    grace it last closed with (a later start may change it: closes stay closed) and the facts."""

    final_topic: str
    grace_seconds: int
    facts: ClosingFacts
    # --rollup: the window lengths in minutes (60, 1440) whose totals are published once every
    # minute of the window is final; () without. Part of the identity: a change is refused.
    rollups: tuple[int, ...] = ()
    # The final topic's id when closing began: a topic recreated under the state (its finals
    # gone) is refused at start and stops a running stage, as a recreated output topic does.
    final_topic_id: str | None = None

    def to_json(self) -> dict[str, object]:
        more: dict[str, object] = {"rollups": list(self.rollups)} if self.rollups else {}
        if self.final_topic_id is not None:
            more["final_topic_id"] = self.final_topic_id
        return {"final_topic": self.final_topic, "grace_seconds": self.grace_seconds,
                "facts": self.facts.to_json(), **more}

    def kept_from(self) -> int:
        """The first minute that must stay in memory: every minute not yet final, and those of
        a rollup window not yet closed (the largest window's start)."""
        closed = self.facts.closed_before or 0
        return closed - closed % max(self.rollups) if self.rollups else closed

    @classmethod
    def from_json(cls, v: object) -> ClosingState:
        """Inverse of to_json; ValueError on anything it did not write."""
        if not isinstance(v, dict) or not isinstance(v.get("final_topic"), str) \
                or type(v.get("grace_seconds")) is not int or v["grace_seconds"] <= 0:
            raise ValueError("the closing state lacks its final topic or grace")
        rollups = v.get("rollups", [])
        if not isinstance(rollups, list) or any(r not in ROLLUPS.values() for r in rollups):
            raise ValueError(f"the closing state has rollups {rollups!r}")
        topic_id = v.get("final_topic_id")
        if topic_id is not None and not isinstance(topic_id, str):
            raise ValueError("the closing state's final topic id is not text")
        return cls(v["final_topic"], v["grace_seconds"], ClosingFacts.from_json(v.get("facts")),
                   tuple(rollups), topic_id)


def _minute(text: object) -> int:
    if not isinstance(text, str):
        raise ValueError(f"not a minute text: {text!r}")
    return minute_index(text)


@dataclass(frozen=True)
class BatchSeen:
    """One batch's own view, as its plan and its Spark job see it."""

    now: int  # the clock second the batch was planned at
    # Every input partition the plan covered -> whether its range held offsets (unread input).
    # A range of only a transaction marker counts as input: it holds back a little longer, safely.
    had_input: Mapping[int, bool]
    newest: Mapping[int, int]  # partition -> newest event minute this batch read (unbounded)


@dataclass(frozen=True)
class Closing:
    """A batch's decision: the facts to commit, and the minutes it closed, [old, new) (empty when
    old == new; old None: every minute before new, the first close)."""

    facts: ClosingFacts
    old: int | None
    new: int | None

    @property
    def closed_any(self) -> bool:
        return self.new is not None and self.new > (0 if self.old is None else self.old)


def _observe(prev: Mapping[int, PartitionFacts], seen: BatchSeen) -> dict[int, PartitionFacts]:
    """Each partition's facts after the batch; a partition the plan did not cover keeps its own."""
    out = dict(prev)
    now_minute = seen.now // 60
    for p, had_input in seen.had_input.items():
        old = prev.get(p, PartitionFacts())
        read = honest_newest([seen.newest[p]] if p in seen.newest else [], now_minute)
        newest = old.newest_minute
        if read is not None:
            newest = read if newest is None else max(newest, read)
        # Input in this batch means it was behind at the plan: it holds the watermark again.
        since = None if had_input else (old.caught_up_since if old.caught_up_since is not None
                                        else seen.now)
        out[p] = PartitionFacts(newest, since)
    return out


def watermark(partitions: Mapping[int, PartitionFacts], now: int, grace: int) -> int | None:
    """The closing watermark (a minute): the oldest newest minute of the partitions that are not
    idle. None when one of them has no event time yet, or when none holds it (all idle)."""
    holders = [f.newest_minute for f in partitions.values() if not f.idle(now, grace)]
    if not holders or any(m is None for m in holders):
        return None
    return min(m for m in holders if m is not None)


def decide(prev: ClosingFacts, seen: BatchSeen, grace: int) -> Closing:
    """Which minutes close after this batch; `grace` in seconds (> 0)."""
    if grace <= 0:
        raise ValueError(f"grace must be at least one second, got {grace}")
    parts = _observe(prev.partitions, seen)
    bounds = [] if prev.closed_before is None else [prev.closed_before]
    wm = watermark(parts, seen.now, grace)
    # The watermark minute's lines are at or after its start: minute m is done once that start
    # is at or past m's end + grace (Kafka Streams' rule, stream time >= end + grace).
    if wm is not None:
        bounds.append((wm * 60 - grace) // 60)
    # The clock closes by the same rule (at or past end + grace) so "closed" has one meaning;
    # with no partition known, nothing says the input is quiet, and the clock closes nothing.
    if parts and all(f.idle(seen.now, grace) for f in parts.values()):
        bounds.append((seen.now - grace) // 60)
    new = max(max(bounds), 0) if bounds else None  # minute indexes start at 0
    return Closing(ClosingFacts(parts, new), prev.closed_before, new)
