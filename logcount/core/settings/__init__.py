"""One frozen settings object per command, read from flags, then `LOGCOUNT_*` env, then defaults.

`framework.py`: a field's metadata (`opt(...)`) is the single source for its flag, its env
variable, its help text, its range, whether it is a secret, and the configuration reference
(docs/configuration.md); secrets are masked in `repr()` and therefore in every log line that
prints settings.
`groups.py`: the field groups commands share (Kafka client, counting, service); `commands.py`:
one class per command; `values.py`: URLs, durations, librdkafka items; `reference.py`: that
reference.

A new flag is one field, declared once: in a group (every command that takes the group gets it)
or in a command's class. Its flag comes last in that command's help unless its `flag_order`
names it (a group named there brings its new fields along).
"""

from logcount.core.settings.commands import (
    BenchSettings,
    DemoSettings,
    ProduceSettings,
    RunSettings,
    SinkSettings,
    StackSettings,
    StateShowSettings,
)
from logcount.core.settings.framework import (
    ENV_PREFIX,
    Settings,
    add_arguments,
    flag_fields,
    from_namespace,
)
from logcount.core.settings.groups import CountingFields, KafkaClientFields, ServiceFields
from logcount.core.settings.reference import EXTRA_ENV, reference_markdown
from logcount.core.settings.values import (
    MySQLUrl,
    mask_url,
    parse_duration_minutes,
    parse_grace_seconds,
    parse_kafka_config,
)

__all__ = [
    "ENV_PREFIX",
    "EXTRA_ENV",
    "BenchSettings",
    "CountingFields",
    "DemoSettings",
    "KafkaClientFields",
    "MySQLUrl",
    "ProduceSettings",
    "RunSettings",
    "ServiceFields",
    "Settings",
    "SinkSettings",
    "StackSettings",
    "StateShowSettings",
    "add_arguments",
    "flag_fields",
    "from_namespace",
    "mask_url",
    "parse_duration_minutes",
    "parse_grace_seconds",
    "parse_kafka_config",
    "reference_markdown",
]
