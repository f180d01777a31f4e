"""logcount/core/settings_fields.py: a `Setting` declared once and changed per command, the
order a command's fields take, secrets masked where they are declared, and the groups the
commands share."""

import argparse
import dataclasses

import pytest

from logcount.core import settings as st
from logcount.core.errors import ConfigError
from logcount.core.settings_fields import (
    AT_LEAST_1,
    Setting,
    Settings,
    add_arguments,
    command,
    read,
)

pytestmark = pytest.mark.unit

PORT = Setting(int, 80, "a port", **AT_LEAST_1)


@command
class Example(Settings):
    """An example command."""

    name = Setting(str, "x", "a name")
    port = PORT(default=8080)
    password = Setting(str | None, None, "a password", secret=True)
    url = Setting(str, "u://p@h", "a URL", secret=lambda v: v.replace("p@", "***@"))

    @property
    def shown(self) -> str:
        return f"{self.name}:{self.port}"


@command
class Extended(Example):
    """Another command: every field of Example, then its own."""

    verbose = Setting(bool, False, "say more")


def test_a_setting_changed_for_one_command_keeps_the_rest():
    assert PORT(default=8080) == Setting(int, 8080, "a port", lo=1)
    assert PORT.default == 80  # the declaration itself is unchanged


def test_a_command_is_a_frozen_dataclass_in_the_order_its_body_names():
    assert [f.name for f in dataclasses.fields(Example)] == ["name", "port", "password", "url"]
    assert [f.name for f in dataclasses.fields(Extended)][-1] == "verbose"
    e = Example(port=9)
    assert e.shown == "x:9" and Extended().verbose is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.name = "y"  # type: ignore[misc]


def test_secrets_are_masked_as_declared():
    shown = repr(Example(password="hunter2"))
    assert "hunter2" not in shown and "password='***'" in shown and "url='u://***@h'" in shown
    assert "password=None" in repr(Example())  # nothing set, nothing to mask


def test_flags_and_env_are_read_and_ranges_checked():
    parser = argparse.ArgumentParser()
    add_arguments(parser, Extended)
    ns = parser.parse_args(["--port", "81", "--verbose"])
    assert read(Extended, ns, {"LOGCOUNT_NAME": "env"}) == {
        "name": "env", "port": 81, "verbose": True}
    with pytest.raises(ConfigError, match="--port must be at least 1, got 0"):
        read(Extended, parser.parse_args(["--port", "0"]), {})


def test_the_commands_share_their_groups():
    def meta(cls, name):
        return dict(next(f.metadata for f in dataclasses.fields(cls) if f.name == name))

    for name in ("bootstrap_servers", "client_config", "kafka_config"):
        assert meta(st.RunSettings, name) == meta(st.SinkSettings, name) \
            == meta(st.ProduceSettings, name)
    for name in ("level", "line_regex", "json_time_field"):
        assert meta(st.RunSettings, name)["metavar"] == meta(st.ProduceSettings, name)["metavar"]
    assert st.SinkSettings().metrics_port == 9109 and st.RunSettings().metrics_port == 9108
    assert meta(st.SinkSettings, "metrics_port")["help"] == \
        meta(st.RunSettings, "metrics_port")["help"]
