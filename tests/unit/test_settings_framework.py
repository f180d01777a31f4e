"""The settings framework: masking comes from a field's declaration, flag order from the class,
and a field declared once in a group reaches every command that takes the group."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field

from logcount.core import settings as st
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
        assert sorted(names) == sorted(f.name for f in dataclasses.fields(cls)), cls.__name__


def test_the_groups_are_shared_not_copied():
    for cls in (st.RunSettings, st.SinkSettings, st.ProduceSettings):
        assert issubclass(cls, KafkaClientFields)
        assert cls.__dataclass_fields__["kafka_config"].metadata["secret"] is \
            KafkaClientFields.__dataclass_fields__["kafka_config"].metadata["secret"]
    run_counting = [f.name for f in flag_fields(RunSettings)
                    if f.name in CountingFields.__dataclass_fields__]
    assert run_counting == [f.name for f in dataclasses.fields(CountingFields)]


def test_the_client_files_bootstrap_servers_apply_unless_a_flag_or_env_gives_them(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("bootstrap.servers=broker-from-file:9093\n")
    env = {"LOGCOUNT_CLIENT_CONFIG": str(props)}
    assert from_namespace(st.SinkSettings, None, env).bootstrap_servers == "broker-from-file:9093"
    env["LOGCOUNT_BOOTSTRAP_SERVERS"] = "b:1"
    assert from_namespace(st.SinkSettings, None, env).bootstrap_servers == "b:1"
