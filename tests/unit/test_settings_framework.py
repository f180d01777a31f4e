"""The settings framework: masking comes from a field's declaration, flag order from the class,
and a field declared once in a group reaches every command that takes the group."""

from __future__ import annotations

import argparse
import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from logcount.core import settings as st
from logcount.core.errors import ConfigError
from logcount.core.settings import (
    CountingFields,
    KafkaClientFields,
    RunSettings,
    Settings,
    add_arguments,
    flag_fields,
    from_namespace,
)
from logcount.core.settings.framework import opt


@dataclass(frozen=True, kw_only=True, repr=False)
class _Group(Settings):
    alpha: str = field(default="a", metadata=opt("alpha"))
    token: str = field(default="", metadata=opt("a token", secret=True))


@dataclass(frozen=True, kw_only=True, repr=False)
class _Command(_Group):
    flag_order = ("first", _Group)

    first: int = field(default=1, metadata=opt("first"))
    url: str = field(default="x://u:pw@h", metadata=opt("a URL", secret=lambda v: v[:6] + "..."))
    last: bool = field(default=False, metadata=opt("not named in flag_order"))


def _all_settings_classes() -> list[type]:
    found, todo = [], [Settings]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return [c for c in found if dataclasses.is_dataclass(c)]


def test_a_secret_is_masked_as_its_declaration_says():
    text = repr(_Command(token="s3cret", url="x://u:pw@h"))
    assert "s3cret" not in text and "token='***'" in text
    assert "url='x://u:...'" in text
    assert "token=''" in repr(_Command()), "an empty secret shows as empty"


def test_flag_order_names_first_a_group_brings_its_fields_the_rest_follow():
    assert [f.name for f in flag_fields(_Command)] == ["first", "alpha", "token", "url", "last"]
    p = argparse.ArgumentParser()
    add_arguments(p, _Command)
    flags = [a.option_strings[0] for a in p._actions if a.option_strings[0] != "-h"]
    assert flags == ["--first", "--alpha", "--token", "--url", "--last"]
    assert repr(_Command()).startswith("_Command(first=1, alpha='a', token='', url=")


def test_every_settings_class_keeps_the_masked_repr_and_a_valid_flag_order():
    # A class declared without repr=False would get dataclass's repr: secrets in log lines.
    classes = _all_settings_classes()
    assert st.SinkSettings in classes and st.BenchSettings in classes
    for cls in classes:
        assert cls.__repr__ is Settings.__repr__, f"{cls.__name__}: declare it with repr=False"
        names = [f.name for f in flag_fields(cls)]
        assert sorted(names) == sorted(f.name for f in dataclasses.fields(cls) if f.init), \
            cls.__name__


def test_the_groups_are_shared_not_copied():
    for cls in (st.RunSettings, st.SinkSettings, st.ProduceSettings):
        assert issubclass(cls, KafkaClientFields)
        assert cls.__dataclass_fields__["kafka_config"].metadata["secret"] is \
            KafkaClientFields.__dataclass_fields__["kafka_config"].metadata["secret"]
    run_counting = [f.name for f in flag_fields(RunSettings)
                    if f.name in CountingFields.__dataclass_fields__]
    assert run_counting == [f.name for f in dataclasses.fields(CountingFields) if f.init]


def test_the_client_files_bootstrap_servers_apply_unless_a_flag_or_env_gives_them(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("bootstrap.servers=broker-from-file:9093\n")
    env = {"LOGCOUNT_CLIENT_CONFIG": str(props)}
    assert from_namespace(st.SinkSettings, None, env).bootstrap_servers == "broker-from-file:9093"
    env["LOGCOUNT_BOOTSTRAP_SERVERS"] = "b:1"
    assert from_namespace(st.SinkSettings, None, env).bootstrap_servers == "b:1"


def test_the_parsed_values_are_parsed_once_at_construction_and_never_shown(monkeypatch):
    """A command's settings hold their parsed values (LineFormat, clients' settings, horizon,
    MySQL URL): built once when the object is, never again per read, never in the repr."""
    from logcount.formats import spec

    calls = []
    real = spec.LineFormat.from_flags.__func__  # type: ignore[attr-defined]

    def counting(cls, *a, **kw):
        calls.append(a)
        return real(cls, *a, **kw)

    monkeypatch.setattr(spec.LineFormat, "from_flags", classmethod(counting))
    s = RunSettings(level="error,fatal", lateness_horizon="90m",
                    kafka_config=("sasl.password=hunter2",))
    assert len(calls) == 1
    assert s.line_format is s.line_format and s.line_format.levels == ("ERROR", "FATAL")
    assert len(calls) == 1, "read again, not rebuilt"
    assert s.horizon_minutes == 90 and s.kafka_client_config["sasl.password"] == "hunter2"
    assert "hunter2" not in repr(s) and "line_format" not in repr(s)
    with pytest.raises(TypeError):
        s.kafka_client_config["x"] = "y"  # type: ignore[index]
    sink = st.SinkSettings(mysql_url="mysql://u:pw@h:3306/db")
    assert sink.mysql is sink.mysql and sink.mysql.password == "pw" and "pw" not in repr(sink)
    assert dataclasses.replace(s, level="WARN").line_format.levels == ("WARN",)
    assert s == RunSettings(level="error,fatal", lateness_horizon="90m",
                            kafka_config=("sasl.password=hunter2",))
    copied = pickle.loads(pickle.dumps(s))  # as its flags, parsed again
    assert copied == s and copied.line_format == s.line_format
    assert copied.kafka_client_config == s.kafka_client_config


def test_a_mistake_is_refused_when_the_settings_are_built():
    with pytest.raises(ConfigError, match="--lateness-horizon"):
        RunSettings(lateness_horizon="soon")
    with pytest.raises(ConfigError, match="--level"):
        RunSettings(level="")
