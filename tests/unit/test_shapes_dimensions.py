"""logcount/formats/shapes.py with dimensions: a fleet of services in every shape, what each record
says it wrote, the per-series expectation, and the records without dimensions pinned to those of
before the fleet existed."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

import pytest

from logcount.connectors.produce import keyed_values, synthetic_values
from logcount.core.errors import ConfigError
from logcount.core.settings import ProduceSettings
from logcount.formats.catalogue import DIMENSIONS, SHAPES, check_group_by
from logcount.formats.shapes import (
    SeriesCounts,
    SyntheticRecord,
    expected_from_records,
    synthetic_records,
)
from logcount.formats.spec import FormatError
from logcount.formats.spec import parse_group_by as spec_parse_group_by


def parse_group_by(text: str) -> tuple[tuple[str, str], ...]:
    """--expect-group-by as produce reads it: run's parser, every source a field path."""
    return tuple((d.name, d.source)
                 for d in spec_parse_group_by(text, "json", None, "--expect-group-by"))


# sha256 (first 16 hex digits) of repr((value, minute, level)) of 3,000 records per (seed, zone),
# computed with the generator before dimensions existed: without --dimensions, not a byte moves.
PINNED = {
    "seed": ("e85198a850aa9d65", "66245bf10e051e3a", "73ff6ed8d5566587"),
    "kafka": ("d911c2b496cb593d", "b53620dbe461be15", "47206da82a87b116"),
    "rfc3339": ("aa7760a02071a9e9", "3432f5fb388fc5ab", "56208a1bef699e7f"),
    "log4j2": ("fc62787a24f25cfc", "a6c81a2e74c15e2a", "18620a914f4cda62"),
    "python": ("e36e71d546b0a1ec", "f2b531c0ac57e101", "5b2fb2157438fc2b"),
    "spark": ("1fa1d0049baa368d", "fcde855d90fc23d1", "f127c5a96c59db6d"),
    "mariadb": ("47c8643065b09c56", "315648710e61ffc3", "5ec64dd642854a50"),
    "filebeat": ("f09dd3015e57d167", "cd7dbdcc7a745936", "b20a6b0c2079e157"),
    "fluentbit": ("9ad4f81f45b0ed5e", "91cf91b53a7c7452", "a73ac440c4b5d46a"),
    "logstash": ("41f4e2d517dc6c95", "db7ce7b28f24e757", "dcb8974a15857ae9"),
    "ecs-dotted": ("fd3a998e95b3623c", "2341b7347a60205a", "e271f245729d675f"),
    "ecs-nested": ("80d2d526ac22ab0b", "40fbea263c64d311", "5cd066a3fc92deca"),
    "zap": ("92a4606535bc078b", "197c37d5244943c2", "7a510626911723ce"),
    "pino": ("0e3ea822c5662e3d", "859187b56a1f2429", "be8b96a10d904698"),
}
DRAWS = ((1, "UTC"), (7, "America/New_York"), (42, "+05:30"))


def _digest(records) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(repr((r.value, r.minute, r.level)).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("shape", SHAPES)
def test_without_dimensions_every_shape_writes_what_it_wrote_before(shape):
    assert list(PINNED) == list(SHAPES)
    got = tuple(_digest(synthetic_records(shape, 3000, seed, timezone=tz)) for seed, tz in DRAWS)
    assert got == PINNED[shape]
    assert all(r.key is None and r.fields is None for r in synthetic_records(shape, 200, 1))


def _fields(r: SyntheticRecord) -> dict[str, str]:
    assert r.fields is not None, r  # a grouped record's dimension values
    return r.fields


def _at(obj: dict, path: str):
    """A JSON field as the contract reads a path: the literal key, else the dotted path."""
    if obj.get(path) is not None:
        return obj[path]
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


@pytest.mark.parametrize("shape", SHAPES)
def test_with_dimensions_each_record_says_what_it_wrote(shape):
    records = list(synthetic_records(shape, 3000, 5, dimensions=True))
    good = [r for r in records if r.minute is not None]
    assert len(good) > 2800
    for r in good:
        assert r.fields is not None and set(r.fields) == set(DIMENSIONS[shape]), r
        if r.value.startswith(b"{"):  # read back with json, not the project's parser
            obj = json.loads(r.value)
            assert {s: _at(obj, s) for s in r.fields} == r.fields, r.value
        else:
            assert all(v.encode() in r.value for v in r.fields.values()), r.value
    # the same seed draws the same records; the times and levels are those without dimensions
    assert records == list(synthetic_records(shape, 3000, 5, dimensions=True))
    plain = list(synthetic_records(shape, 3000, 5))
    assert [(r.minute, r.level) for r in records] == [(r.minute, r.level) for r in plain]
    assert records != list(synthetic_records(shape, 3000, 6, dimensions=True))


@pytest.mark.parametrize("shape", ["filebeat", "fluentbit", "ecs-nested", "seed"])
def test_a_few_services_are_busy_and_many_are_quiet(shape):
    good = [r for r in synthetic_records(shape, 20_000, 9, dimensions=True) if r.minute]
    keys = Counter(r.key for r in good)
    share = [n / len(good) for _, n in keys.most_common()]
    assert len(keys) == 12 and share[0] > 0.25 and share[-1] < 0.04, keys
    assert sum(share[:3]) > 0.55  # Zipf: three services write most of it
    for source in DIMENSIONS[shape]:
        assert len({_fields(r)[source] for r in good}) >= 4, source


def test_filebeat_by_host_and_namespace_is_about_a_hundred_series_a_few_of_them_busy():
    # the bench's grouped Filebeat shape: 20 nodes x 5 namespaces
    good = [r for r in synthetic_records("filebeat", 20_000, 1, dimensions=True) if r.minute]
    series = Counter((_fields(r)["host.name"], _fields(r)["kubernetes.namespace"]) for r in good)
    share = [n / len(good) for _, n in series.most_common()]
    assert len(series) == 100 and share[0] > 0.15 and share[-1] < 0.002, series


def test_series_counts_add_up_to_the_minute_counts_and_split_by_level():
    records = list(synthetic_records("filebeat", 5000, 3, dimensions=True))
    dims = parse_group_by("host.name,ns=kubernetes.namespace,level")
    series = SeriesCounts(dims, ["ERROR", "WARN"])
    for r in records:
        series.add(r)
    doc = series.document()
    assert doc["group_by"] == {"name": "host.name", "ns": "kubernetes.namespace",
                               "level": "level"} and doc["levels"] == "ERROR,WARN"
    per_minute: Counter = Counter()
    for s in doc["series"]:
        per_minute[s["minute"]] += s["count"]
        assert set(s["dims"]) == {"name", "ns", "level"} and s["dims"]["level"] in (
            "ERROR", "WARN")
    assert dict(per_minute) == expected_from_records(records, ["ERROR", "WARN"])
    # by the record key: every series is a service
    by_key = SeriesCounts(parse_group_by("service=key"), ["ERROR"])
    for r in records:
        by_key.add(r)
    services = {s["dims"]["service"] for s in by_key.document()["series"]}
    assert len(services) >= 10 and "" not in services


def test_series_counts_of_every_level_split_the_minute_counts_by_level():
    records = list(synthetic_records("seed", 3000, 5, dimensions=True))
    series = SeriesCounts(parse_group_by("service=key,level"), ["*"])
    for r in records:
        series.add(r)
    per_minute: Counter = Counter()
    errors: Counter = Counter()
    for s in series.document()["series"]:
        per_minute[s["minute"]] += s["count"]
        errors[s["minute"]] += s["count"] if s["dims"]["level"] == "ERROR" else 0
    assert dict(per_minute) == expected_from_records(records, ["*"])
    assert sum(per_minute.values()) == sum(r.minute is not None for r in records)
    assert +errors == Counter(expected_from_records(records, ["ERROR"]))


def test_produce_counts_every_level_for_star_with_and_without_keys():
    records = list(synthetic_records("seed", 2000, 6, dimensions=True))
    plain: dict[str, int] = {}
    keyed: dict[str, int] = {}
    assert len(list(synthetic_values(records, ("*",), plain))) == 2000
    assert len(list(keyed_values(records, ("*",), keyed, None))) == 2000
    assert plain == keyed == expected_from_records(records, ["*"]) != {}


@pytest.mark.parametrize("text, error", [
    ("log_time=host.name", "log_time"), ("host.name,x=host.name,name=level", "twice"),
    ("a=level,b=key,c=host.name,d=x", "at most 3"),
    ("x=a..b", "not a field path"), ("1x=level", "letters"), ("", "DIM\\[,DIM"),
    ("x=", "--expect-group-by needs a field path"), ("x=a[0]", "not a field path"),
])
def test_a_group_by_mistake_is_one_line(text, error):
    with pytest.raises(FormatError, match=error):
        parse_group_by(text)


def test_the_generator_vouches_only_for_what_it_writes():
    check_group_by("filebeat", parse_group_by("host.name,level,key"), True)
    check_group_by("seed", parse_group_by("level"), False)  # levels need no fleet
    with pytest.raises(FormatError, match="writes key, host.name"):
        check_group_by("filebeat", parse_group_by("stream"), True)
    with pytest.raises(FormatError, match="only with --dimensions"):
        check_group_by("filebeat", parse_group_by("host.name"), False)


def test_produce_checks_the_flags(tmp_path):
    def settings(**kw) -> ProduceSettings:
        return ProduceSettings(**{"synthetic": 10, "expect": str(tmp_path / "e.json"), **kw})

    settings(shape="fluentbit", dimensions=True,
             expect_group_by="kubernetes.namespace_name,kubernetes.container_name").validate()
    with pytest.raises(ConfigError, match="needs --synthetic and --expect"):
        settings(expect=None, expect_group_by="level").validate()
    with pytest.raises(ConfigError, match="--dimensions is what --synthetic writes"):
        ProduceSettings(file="-", dimensions=True).validate()
    with pytest.raises(ConfigError, match="--shape ecs-dotted writes"):
        settings(shape="ecs-dotted", dimensions=True,
                 expect_group_by="kubernetes.namespace_name").validate()
