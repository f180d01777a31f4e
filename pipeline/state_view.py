"""`logcount state show`: the stage's state as an operator sees it, and what a start would do.

Read-only and safe beside a running stage: it reads what `Stage.start_state` reads (the state
topic read_committed, the input's offsets, the group's committed offsets, the topic ids), with no
transactional producer, so it fences nobody, and it asks the same pure rule (`check_start`) what
a start with these settings would decide. Needs only read ACLs (docs/deploy.md).

    gather    the cluster's facts, as a start reads them (I/O; the stage uses it too)
    describe  facts + settings -> the report: identity, partitions, watermark, size, prediction
    render    the report as text (`--json` prints the report itself)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, OffsetSpec

from connectors import kafka_io, state_topic
from core.errors import ConfigError
from core.redact import mask
from core.settings import RunSettings
from pipeline.state import (
    CLAIM_KEY,
    PROGRESS_KEY,
    StartFacts,
    StateRefused,
    Wanted,
    check_start,
    counting_settings,
    decode_records,
    state_topic_name,
)
from pipeline.totals import Totals, minute_text

# A topic that does not exist yet has no id; a start would create it with a new one, which is
# what this stands for when the rule compares it with the state's.
NO_TOPIC = "(none: a start creates it)"
# Why re-read before predicting anything but a resume: beside a running stage, a transaction's
# markers reach the state topic and the group's offsets one after the other, so one read in
# thousands can see a batch in one and not yet in the other, which looks like a reset. A real
# drift reads the same every time; a torn read does not survive a second look 0.5 s later.
REREADS = 2
REREAD_PAUSE_S = 0.5


@dataclass(frozen=True)
class Facts:
    """What a start reads from the cluster (after its init_transactions, or, here, without)."""

    table: dict[bytes, bytes]  # the state topic's last value per key
    partitions: list[int]  # the input's
    start: StartFacts
    state_log: tuple[int, int]  # the state topic's log start and end offsets
    compaction: str | None = None  # the line a start's topic check refuses with, if any


def wanted(s: RunSettings) -> Wanted:
    """What a start with these settings is configured to do."""
    fmt = s.line_format
    return Wanted(s.input_topic, s.output_topic, fmt.level_label, s.delivery == "exactly-once",
                  s.starting_offsets, s.horizon_minutes, counting_settings(fmt))


def read_table(adm: AdminClient, s: RunSettings) -> dict[bytes, bytes]:
    """The state topic's table (the reader's group sits under the stage's, for one ACL)."""
    return state_topic.read_table(adm, s.bootstrap_servers, state_topic_name(s.output_topic),
                                  s.kafka_client_config, f"{s.group_id}-state-reader")


def gather(adm: AdminClient, s: RunSettings, consumer: Consumer,
           table: Callable[[], dict[bytes, bytes]], *, created: bool) -> Facts:
    """The facts a start decides on. `created`: the stage has just created its topics, so a
    missing id is a broker that does not know it yet (asked again), never "no topic"."""
    got = table()  # the state first: the input's ends read after it are never behind it
    parts = kafka_io.partitions_of(adm, s.input_topic) or []
    names = [s.input_topic, s.output_topic]
    if created:
        ids: Mapping[str, str | None] = kafka_io.existing_topic_ids(adm, names)
    else:
        ids = kafka_io.topic_ids(adm, names)
    facts = StartFacts(
        input_topic_id=ids[s.input_topic] or NO_TOPIC,
        output_topic_id=ids[s.output_topic] or NO_TOPIC,
        earliest=kafka_io.list_offsets(adm, s.input_topic, parts, OffsetSpec.earliest()),
        latest=kafka_io.list_offsets(adm, s.input_topic, parts, OffsetSpec.latest()),
        group=kafka_io.committed_offsets(consumer, s.input_topic, parts))
    log = (0, 0)
    compaction = None
    if not created:
        state = state_topic_name(s.output_topic)
        if kafka_io.partitions_of(adm, state):
            log = (kafka_io.list_offsets(adm, state, [0], OffsetSpec.earliest())[0],
                   kafka_io.list_offsets(adm, state, [0], OffsetSpec.latest())[0])
        # The start's own topic check (Stage.ensure_topics), for topics that exist already.
        for topic, role in ((s.output_topic, "output"), (state, "state")):
            if compaction is None and kafka_io.partitions_of(adm, topic):
                try:
                    kafka_io.require_compacted(adm, topic, role)
                except ConfigError as exc:
                    compaction = str(exc)
    return Facts(got, parts, facts, log, compaction)


def predict(facts: Facts, want: Wanted) -> dict:
    """What a start would do now (pure): fresh, resume, repair or refuse, with its lines."""
    if facts.compaction is not None:
        refusal = StateRefused(facts.compaction)  # what Stage.ensure_topics raises
        return {"action": "refuse", "exit": 2, "lines": [f"logcount: error: {refusal}"]}
    try:
        progress, hours = decode_records(facts.table, state_topic_name(want.output_topic))
        start = check_start(progress, hours, facts.start, want)
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


def describe(facts: Facts, s: RunSettings) -> dict:
    """The report (pure): everything `state show` prints, as JSON-ready data."""
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
    report = {
        "state_topic": state_topic_name(s.output_topic),
        "group_id": s.group_id,
        "identity": None if ident is None else {
            "input_topic": ident.input_topic, "input_topic_id": ident.input_topic_id,
            "output_topic": ident.output_topic, "output_topic_id": ident.output_topic_id,
            "level": ident.level, "counting": dict(ident.counting)},
        "now": {"input_topic": s.input_topic, "input_topic_id": start.input_topic_id,
                "output_topic": s.output_topic, "output_topic_id": start.output_topic_id,
                "level": want.level, "counting": dict(want.counting)},
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
        "hours": len(hours),
        "state_topic_size": {
            "records_in_log": facts.state_log[1] - facts.state_log[0],
            "keys": len(table), "bytes": sum(len(k) + len(v) for k, v in table.items()),
            "progress_record_bytes": len(progress_raw) if progress_raw else 0},
        "claim": claim,
        "start": predict(facts, want),
    }
    if start.input_topic_id == NO_TOPIC:
        report["start"]["lines"].insert(0, f"input topic {s.input_topic} does not exist: a "
                                           f"start creates it ({s.input_partitions} partitions)")
    return report


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
    out.append(f"held          {_cell(report['minutes'])} minutes in {report['hours']} hours; "
               f"state topic: {size['keys']} keys, {size['bytes']} bytes, "
               f"{size['records_in_log']} records in its log")
    claim = report["claim"]
    if claim and not claim.get("unreadable"):
        out.append(f"claimed by    instance {claim.get('instance')} on {claim.get('host')} "
                   f"(pid {claim.get('pid')}) at {claim.get('at')}")
    rows = [("partition", "state", "group", "log start", "end", "lag")]
    rows += [(f"p{r['partition']}", _cell(r["state"]), _cell(r["group"]), _cell(r["log_start"]),
              _cell(r["end"]), _cell(r["lag"])) for r in report["partitions"]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out.append("")
    out += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    start = report["start"]
    out.append("")
    out.append(f"a start now would: {start['action']} (exit {start['exit']})")
    out += [f"  {line}" for line in start["lines"]]
    return "\n".join(out)


def show(s: RunSettings, as_json: bool) -> int:
    """Read the facts, describe them, print. Re-read when the prediction is not a plain resume
    (see REREADS)."""
    extra = s.kafka_client_config
    adm = kafka_io.wait_for_broker(s.bootstrap_servers, extra, s.startup_timeout)
    consumer = Consumer(kafka_io.client_config(s.bootstrap_servers, extra, **{
        "group.id": s.group_id, "isolation.level": "read_committed",
        "enable.auto.commit": False}))
    try:
        for attempt in range(REREADS + 1):
            report = describe(gather(adm, s, consumer, lambda: read_table(adm, s),
                                     created=False), s)
            if report["start"]["action"] in ("resume", "fresh") or attempt == REREADS:
                break
            time.sleep(REREAD_PAUSE_S)
    finally:
        consumer.close()
    text = json.dumps(report, indent=2) if as_json else render(report)
    print(mask(text), flush=True)
    return 0
