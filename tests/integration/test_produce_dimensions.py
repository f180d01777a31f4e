"""`logcount produce --synthetic --dimensions --expect-group-by` on the real broker: the records
arrive keyed by their service, and the per-series expectation is what the topic holds, read back
with plain json and strptime (not the project's parser)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime

from tests.support.readers import read_all
from tests.support.run import cli


def _minute_and_level(line: str) -> tuple[str, str] | None:
    """A Fluent Bit record's application line: `[stamp] LEVEL ...` in one of four stamps."""
    stamp, _, rest = line.lstrip("[").partition(" ")
    if "T" not in stamp:  # 2017-07-30 14:09:08[.123|,123][]] LEVEL
        clock, _, rest = rest.partition(" ")
        stamp = f"{stamp} {clock.rstrip(']')[:8]}"
    try:
        when = datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S" if "T" in stamp
                                 else "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return when.strftime("%Y-%m-%d %H:%M:00"), rest.split(" ", 1)[0].upper()


def test_fluent_bit_records_keyed_by_service_and_their_series(endpoints, names, tmp_path):
    expect = tmp_path / "expect.json"
    cli("produce", "--bootstrap-servers", endpoints.bootstrap, "--topic", names.topic("in"),
        "--synthetic", "4000", "--seed", "4", "--shape", "fluentbit", "--dimensions",
        "--expect", str(expect), "--expect-group-by",
        "ns=kubernetes.namespace_name,container=kubernetes.container_name,level",
        "--level", "ERROR,WARN")
    doc = json.loads(expect.read_text())
    assert doc["group_by"] == {"ns": "kubernetes.namespace_name",
                               "container": "kubernetes.container_name", "level": "level"}

    got: Counter = Counter()
    keys: Counter = Counter()
    msgs = read_all(endpoints.bootstrap, names.topic("in"))
    assert len(msgs) == 4000
    for m in msgs:
        try:
            obj = json.loads(m.value())
        except ValueError:
            continue
        k8s = obj.get("kubernetes") if isinstance(obj, dict) else None
        line = obj.get("log") if isinstance(obj, dict) else None
        if not isinstance(k8s, dict) or not isinstance(line, str):
            continue
        read = _minute_and_level(line)
        if read is None:
            continue
        keys[m.key()] += 1
        assert m.key().decode() in k8s["pod_name"]  # the key is the pod's service
        if read[1] in ("ERROR", "WARN"):
            got[(read[0], k8s["namespace_name"], k8s["container_name"], read[1])] += 1
    want = {(s["minute"], s["dims"]["ns"], s["dims"]["container"], s["dims"]["level"]): s["count"]
            for s in doc["series"]}
    assert dict(got) == want
    assert len({ns for _, ns, _, _ in want}) >= 4 and len(keys) == 12
    busiest = keys.most_common(1)[0][1]
    assert busiest > 0.25 * sum(keys.values())  # a few services are busy
