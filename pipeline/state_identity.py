"""The state's identity (pure): what the totals were counted from and as, which a start compares
with what it is configured to do (pipeline/state_start.py). The counting settings are kept by
their schema names (LineFormat.identity), only those not at their defaults; a state written
before the schema names kept them by flag and reads the same (schema_names).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from logcount.core.errors import StateRefused
from logcount.formats.spec import IDENTITY_FLAGS, LineFormat, identity_name

__all__ = ["Identity", "Wanted", "counting_flags", "counting_settings", "grouping",
           "refuse_other_counting", "schema_names"]

_DEFAULTS = LineFormat().identity()


@dataclass(frozen=True)
class Identity:
    input_topic: str
    input_topic_id: str
    output_topic: str
    output_topic_id: str
    level: str  # the levels counted, 'ERROR' or 'CRITICAL,ERROR,FATAL' (LineFormat.level_label)
    # The other counting settings that differ from their defaults, (schema name, value) sorted:
    # the line rule or regex, time pattern, timezone and JSON fields (counting_settings). A state
    # written before they existed has none, which is what the defaults are.
    counting: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "counting", schema_names(self.counting))


def counting_settings(fmt: LineFormat) -> tuple[tuple[str, str], ...]:
    """A format's counting settings besides the levels, those not at their defaults (a default
    is not stored: a stage without counting flags writes the state it wrote before them)."""
    return tuple(sorted((k, v) for k, v in fmt.identity().items()
                        if k != "level" and v is not None and v != _DEFAULTS[k]))


def schema_names(counting: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Counting settings keyed by their schema names, sorted: a state written before them keyed
    them by flag (`--time-pattern`), read here as the same setting (`time_pattern`)."""
    return tuple(sorted((identity_name(k), v) for k, v in counting))


def counting_flags(counting: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Counting settings as an operator writes them: by flag (`state show`, refusals)."""
    return {IDENTITY_FLAGS.get(k, k): v for k, v in counting}




def grouping(counting: tuple[tuple[str, str], ...]) -> tuple[tuple[str, ...], int] | None:
    """(dimension names, --max-series) of an identity's counting settings; None: no --group-by."""
    c = dict(schema_names(counting))
    if not c.get("group_by"):
        return None
    names = tuple(item.partition("=")[0] for item in c["group_by"].split(","))
    return names, int(c["max_series"])


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
    final_topic: str | None = None  # --emit-final: where finals go (None: minutes not closed)
    grace_seconds: int | None = None
    emit_final: str | None = None  # the flag's text, for the operator's lines
    rollups: tuple[int, ...] = ()  # --rollup's windows in minutes

    def __post_init__(self) -> None:
        object.__setattr__(self, "counting", schema_names(self.counting))


def refuse_other_counting(old: Identity, want: Wanted) -> None:
    """A counting setting other than the state's: the totals would mix two rules."""
    was, now = dict(old.counting), dict(want.counting)
    for name in sorted(set(was) | set(now)):  # a setting at its default is not stored
        if was.get(name) != now.get(name):
            a, b = (x if x is not None else _DEFAULTS.get(name) for x in (was.get(name),
                                                                           now.get(name)))
            raise StateRefused(
                f"output topic {want.output_topic} was counted with "
                f"{IDENTITY_FLAGS.get(name, name)} "
                f"{'(not set)' if a is None else repr(a)}, this start has "
                f"{'(not set)' if b is None else repr(b)}: the totals would mix both; use a new "
                f"--output-topic (and group) for the new setting")
