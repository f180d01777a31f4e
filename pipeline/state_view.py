"""`logcount state show`: the stage's state as an operator sees it, and what a start would do.

Read-only and safe beside a running stage: it reads what `Stage.start_state` reads (the state
topic read_committed, the input's offsets, the group's committed offsets, the topic ids), with no
transactional producer, so it fences nobody, and it asks the same pure rule (`check_start`) what
a start with these settings would decide. Needs only read ACLs (docs/deploy.md).

    gather    the cluster's facts, as a start reads them (pipeline/start_facts.py)
    describe  facts + settings -> the report: identity, partitions, watermark, size, prediction
    render    the report as text (`--json` prints the report itself)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from confluent_kafka import Consumer

from logcount.connectors import kafka_io
from logcount.core.backoff import Backoff
from logcount.core.errors import StateRefused
from logcount.core.redact import mask
from logcount.core.retry import poll
from logcount.core.settings import RunSettings
from logcount.pipeline.closing import ClosingState, clock_second, grace_text, second_text, watermark
from logcount.pipeline.hour_records import decode_hour, minute_text
from logcount.pipeline.series import CHUNK_CELL_BYTES, CHUNK_MAGIC, decode_chunk
from logcount.pipeline.start_facts import NO_TOPIC, Facts, gather, read_table, wanted
from logcount.pipeline.state import (
    CLAIM_KEY,
    PROGRESS_KEY,
    SeriesRecords,
    Wanted,
    check_start,
    counting_flags,
    decode_records,
    decode_series,
    state_topic_name,
)
from logcount.pipeline.totals import Totals

# Why re-read before predicting anything but a resume: a transaction's markers reach the state
# topic and the group's offsets one after the other, so a rare read sees a batch in one only,
# which looks like a reset. A real drift reads the same again 0.5 s later; a torn read does not.
REREADS = 2
REREAD_PAUSE_S = 0.5


def predict(facts: Facts, want: Wanted) -> dict:
    """What a start would do now (pure): fresh, resume, repair or refuse, with its lines."""
    if facts.compaction is not None:
        refusal = StateRefused(facts.compaction)  # what KafkaCluster.ensure_topics raises
        return {"action": "refuse", "exit": 2, "lines": [f"logcount: error: {refusal}"]}
    try:
        progress, hours = decode_records(facts.table, state_topic_name(want.output_topic))
        start = check_start(progress, hours, facts.start, want, decode_series(facts.table))
    except StateRefused as exc:
        return {"action": "refuse", "exit": 2, "lines": [f"logcount: error: {exc}"]}
    if start.warnings:
        action = "repair"
    elif progress is None:
        action = "fresh"
    else:
        action = "resume"
    lines = list(start.warnings)
    if action != "repair":
        where = " ".join(f"p{p}:{o}" for p, o in sorted(start.state.offsets.items())) or "-"
        lines.append(("first start" if action == "fresh" else "resume") + f" from {where}")
    return {"action": action, "exit": 0, "lines": lines}


def describe(facts: Facts, s: RunSettings, now: datetime | None = None) -> dict:
    """The report (pure but for the clock, `now` when given): everything `state show` prints,
    as JSON-ready data."""
    want = wanted(s)
    table = facts.table
    progress_raw = table.get(PROGRESS_KEY)
    progress = None
    try:
        progress, hours = decode_records(table, state_topic_name(s.output_topic))
    except StateRefused:  # damaged or foreign: the prediction says so; show what can be shown
        hours = {}
    minutes: int | None
    try:
        minutes = len(Totals.from_hours(hours.items()))
    except ValueError:
        minutes = None
    series = decode_series(table)
    grouped = bool(series.names or series.cells or series.chunks)
    if grouped:  # with --group-by: (minute, series) cells, not minutes
        minutes = (sum(len(decode_hour(v)[0]) for v in series.cells.values() if _readable(v))
                   + sum(_chunk_cells(v) for v in series.chunks.values()))
    start = facts.start
    state_offsets = progress.offsets if progress else {}
    parts = sorted(set(facts.partitions) | set(state_offsets))
    ident = progress.identity if progress else None
    claim = None
    if CLAIM_KEY in table:
        try:
            claim = json.loads(table[CLAIM_KEY])
        except ValueError:
            claim = {"unreadable": True}
    report: dict[str, Any] = {
        "state_topic": state_topic_name(s.output_topic),
        "group_id": s.group_id,
        "identity": None if ident is None else {
            "input_topic": ident.input_topic, "input_topic_id": ident.input_topic_id,
            "output_topic": ident.output_topic, "output_topic_id": ident.output_topic_id,
            "level": ident.level, "counting": counting_flags(ident.counting)},
        "now": {"input_topic": s.input_topic, "input_topic_id": start.input_topic_id,
                "output_topic": s.output_topic, "output_topic_id": start.output_topic_id,
                "level": want.level, "counting": counting_flags(want.counting)},
        "partitions": [{
            "partition": p, "state": state_offsets.get(p), "group": start.group.get(p),
            "log_start": start.earliest.get(p), "end": start.latest.get(p),
            "lag": (None if p not in start.latest else
                    start.latest[p] - state_offsets.get(p, start.earliest.get(p, 0)))}
            for p in parts],
        "watermark": (None if not progress or progress.watermark is None
                      else minute_text(progress.watermark)),
        "closed_before": (None if not progress or progress.closed_before is None
                          else minute_text(progress.closed_before)),
        "minutes": minutes,
        "hours": len(hours) + len({h for _, h in [*series.cells, *series.chunks]}),
        "series": len(series.names) if grouped else None,
        "state_topic_size": {
            "records_in_log": facts.state_log[1] - facts.state_log[0],
            "keys": len(table), "bytes": sum(len(k) + len(v) for k, v in table.items()),
            "progress_record_bytes": len(progress_raw) if progress_raw else 0},
        "claim": claim,
        # --emit-final's (None without it): the closing facts, read at `now`
        "closing": (None if progress is None or progress.closing is None else
                    closing_report(progress.closing, hours, series,
                                   now or datetime.now(UTC))),
        "start": predict(facts, want),
    }
    if start.input_topic_id == NO_TOPIC:
        report["start"]["lines"].insert(0, f"input topic {s.input_topic} does not exist: a "
                                           f"start creates it ({s.input_partitions} partitions)")
    return report


def closing_report(c: ClosingState, hours: Mapping[int, bytes], series: SeriesRecords,
                   now: datetime) -> dict:
    """--emit-final's part of the report: the final topic and grace, each partition's newest
    event minute, since when it is caught up and whether it counts as idle now (no longer
    holding the closing watermark), the last closed minute and the held minutes not final."""
    at, grace, f = clock_second(now), c.grace_seconds, c.facts
    held = _held_minutes(hours, series)
    wm = watermark(f.partitions, at, grace)
    return {
        "final_topic": c.final_topic, "grace_seconds": grace, "grace": grace_text(grace),
        "now": second_text(at),
        "closed_before": None if f.closed_before is None else minute_text(f.closed_before),
        "last_closed": None if not f.closed_before else minute_text(f.closed_before - 1),
        # minutes with a total held and not final yet (None: a damaged record)
        "open_minutes": (None if held is None else int(len(held)) if f.closed_before is None
                         else int((held >= f.closed_before).sum())),
        "watermark": None if wm is None else minute_text(wm),
        "partitions": [{
            "partition": p,
            "newest": None if pf.newest_minute is None else minute_text(pf.newest_minute),
            "caught_up_since": (None if pf.caught_up_since is None
                                else second_text(pf.caught_up_since)),
            "idle": pf.idle(at, grace)} for p, pf in sorted(f.partitions.items())],
    }


def _held_minutes(hours: Mapping[int, bytes], series: SeriesRecords) -> np.ndarray | None:
    """The distinct minutes the state holds a total of (any series); None when a record does
    not read."""
    parts: list[np.ndarray] = []
    try:
        for hour, v in hours.items():
            parts.append(hour * 60 + decode_hour(v)[0].astype(np.int64))
        for (_, hour), v in series.cells.items():
            parts.append(hour * 60 + decode_hour(v)[0].astype(np.int64))
        for (chunk, hour), v in series.chunks.items():
            parts.append(hour * 60 + decode_chunk(v, chunk)[1])
    except ValueError:
        return None
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def _chunk_cells(v: bytes) -> int:
    """The cells of a series chunk record, as its length says (0: not one)."""
    body = len(v) - len(CHUNK_MAGIC)
    return body // CHUNK_CELL_BYTES if v.startswith(CHUNK_MAGIC) and body >= 0 else 0


def _readable(v: bytes) -> bool:
    try:
        decode_hour(v)
    except ValueError:
        return False
    return True


def _cell(v: object) -> str:
    return "-" if v is None else str(v)


def render(report: dict) -> str:
    """The report as text for an operator's terminal."""
    out = [f"state topic   {report['state_topic']} (group {report['group_id']})"]
    ident, now = report["identity"], report["now"]
    if ident is None:
        out.append("identity      none: no progress record (a first start, or the state is lost)")
    else:
        out.append(f"input topic   {ident['input_topic']} (id {ident['input_topic_id']}"
                   + ("" if ident["input_topic_id"] == now["input_topic_id"]
                      else f"; now {now['input_topic_id']}") + ")")
        out.append(f"output topic  {ident['output_topic']} (id {ident['output_topic_id']}"
                   + ("" if ident["output_topic_id"] == now["output_topic_id"]
                      else f"; now {now['output_topic_id']}") + ")")
        out.append(f"level         {ident['level']}")
        counting = ", ".join(f"{k} {v!r}" for k, v in sorted(ident["counting"].items()))
        out.append(f"counting      {counting or 'the default line rule'}")
    out.append(f"watermark     {_cell(report['watermark'])}   closed before "
               f"{_cell(report['closed_before'])}")
    size = report["state_topic_size"]
    held = "" if report.get("series") is None else f" of {report['series']} named series"
    out.append(f"held          {_cell(report['minutes'])} minutes{held} in "
               f"{report['hours']} hours; "
               f"state topic: {size['keys']} keys, {size['bytes']} bytes, "
               f"{size['records_in_log']} records in its log")
    claim = report["claim"]
    if claim and not claim.get("unreadable"):
        out.append(f"claimed by    instance {claim.get('instance')} on {claim.get('host')} "
                   f"(pid {claim.get('pid')}) at {claim.get('at')}")
    rows = [("partition", "state", "group", "log start", "end", "lag")]
    rows += [(f"p{r['partition']}", _cell(r["state"]), _cell(r["group"]), _cell(r["log_start"]),
              _cell(r["end"]), _cell(r["lag"])) for r in report["partitions"]]
    out.append("")
    out += _table(rows)
    if report.get("closing") is not None:
        out += _render_closing(report["closing"])
    start = report["start"]
    out.append("")
    out.append(f"a start now would: {start['action']} (exit {start['exit']})")
    out += [f"  {line}" for line in start["lines"]]
    return "\n".join(out)


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]


def _render_closing(c: dict) -> list[str]:
    """--emit-final's lines: the final topic, what is final, and each partition's facts."""
    held = [p for p in c["partitions"] if not p["idle"]]
    unknown = [f"p{p['partition']}" for p in held if p["newest"] is None]
    if not c["partitions"]:
        holds = "no partition planned yet: nothing closes"
    elif not held:
        holds = "every partition idle: the clock closes"
    elif unknown:
        holds = f"no watermark: {', '.join(unknown)} not idle and without an event time yet"
    else:
        holds = (f"watermark {_cell(c['watermark'])} (held by "
                 + ", ".join(f"p{p['partition']}" for p in held) + ")")
    last = ("none yet" if c["last_closed"] is None else
            f"{c['last_closed']} (every minute before {c['closed_before']} is final)")
    out = ["", f"final topic   {c['final_topic']} (--emit-final {c['grace']})",
           f"last closed   {last}; {_cell(c['open_minutes'])} held minutes open",
           f"closing now   {c['now']} UTC: {holds}"]
    rows = [("partition", "newest minute", "caught up since", "idle")]
    rows += [(f"p{p['partition']}", _cell(p["newest"]), _cell(p["caught_up_since"]),
              "yes" if p["idle"] else "no") for p in c["partitions"]]
    if len(rows) > 1:
        out.append("")
        out += _table(rows)
    return out


def show(s: RunSettings, as_json: bool) -> int:
    """Read the facts, describe them, print. Re-read when the prediction is not a plain resume
    (see REREADS)."""
    extra = s.kafka_client_config
    adm = kafka_io.wait_for_broker(s.bootstrap_servers, extra, s.startup_timeout)
    consumer = Consumer(kafka_io.client_config(s.bootstrap_servers, extra, **{
        "group.id": s.group_id, "isolation.level": "read_committed",
        "enable.auto.commit": False}))
    last: list[dict] = []  # the latest report: shown as it is when the rereads run out

    def settled() -> dict | None:
        last[:] = [describe(gather(adm, s, consumer, lambda: read_table(adm, s),
                                   created=False), s)]
        return last[0] if last[0]["start"]["action"] in ("resume", "fresh") else None

    try:
        report = poll(settled, Backoff(REREAD_PAUSE_S, retries=REREADS)) or last[0]
    finally:
        consumer.close()
    text = json.dumps(report, indent=2) if as_json else render(report)
    print(mask(text), flush=True)
    return 0
