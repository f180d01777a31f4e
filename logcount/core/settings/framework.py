"""The settings framework: a field declares its flag, env variable, help, range and whether it is
a secret (`opt(...)` metadata); from that alone come the command's flags, the reading of a value
from flags, then `LOGCOUNT_*` env, then defaults, the masked repr and the configuration reference.

A settings class is a frozen dataclass deriving from `Settings`, declared with
`@dataclass(frozen=True, kw_only=True, repr=False)` (repr=False keeps the masked repr).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, TypeVar

from logcount.core.errors import ConfigError
from logcount.core.redact import MASK

ENV_PREFIX = "LOGCOUNT_"


def opt(help: str, *, flag: str | None = None, secret: bool | Callable[[Any], Any] = False,
        metavar: str | None = None, lo: float | None = None, hi: float | None = None,
        above: float | None = None) -> dict[str, Any]:
    """Field metadata: help text, optional explicit flag, whether the value is a secret (True:
    masked whole; a function: the value as it may be shown), and for numbers their range
    (`lo`/`hi` inclusive, `above` exclusive), checked where it is read."""
    return {"help": help, "flag": flag, "secret": secret, "metavar": metavar, "lo": lo,
            "hi": hi, "above": above}


# Ranges shared by many flags.
PORT: dict[str, Any] = {"lo": 0, "hi": 65535}  # 0: off
POSITIVE: dict[str, Any] = {"above": 0}  # seconds, sizes
AT_LEAST_1: dict[str, Any] = {"lo": 1}


def _check_range(f: dataclasses.Field, value: float, source: str) -> None:
    lo, hi, above = f.metadata.get("lo"), f.metadata.get("hi"), f.metadata.get("above")
    if ((lo is not None and value < lo) or (hi is not None and value > hi)
            or (above is not None and value <= above)):
        if lo is not None and hi is not None:
            want = f"between {lo:g} and {hi:g}"
        elif above is not None:
            want = f"greater than {above:g}"
        else:
            want = f"at least {lo:g}" if lo is not None else f"at most {hi:g}"
        raise ConfigError(f"{source} must be {want}, got {value:g}")


def shown(f: dataclasses.Field, value: Any) -> Any:
    """The value as it may be printed: a secret field's masked as its declaration says."""
    secret = f.metadata.get("secret")
    if callable(secret):
        return secret(value)
    return MASK if secret and value else value


class Settings:
    """Shared behaviour of every command's settings: the masked repr, the flag order."""

    # The order of the flags (help, reference, repr) when it is not the fields' own: these
    # field names (a group class: its fields) first, then every other field as declared.
    flag_order: ClassVar[tuple[str | type, ...]] = ()

    @classmethod
    def complete(cls, values: dict[str, Any]) -> None:
        """Fill in `values` (from flags and env, by field name) before the object is built."""

    def validate(self: S) -> S:
        """The settings as built: every command's are validated, and their values parsed, once
        at construction; this stays so that `Cls(...).validate()` reads as it did."""
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and deep-copied) as its flags' values: the copy parses them again, so its
        parsed values (`derived()`, some read-only views) need not pickle."""
        values = {f.name: getattr(self, f.name) for f in flag_fields(type(self))}
        return (_rebuild, (type(self), values))

    def __repr__(self) -> str:
        parts = [f"{f.name}={shown(f, getattr(self, f.name))!r}" for f in flag_fields(type(self))]
        return f"{type(self).__name__}({', '.join(parts)})"

    __str__ = __repr__


S = TypeVar("S", bound=Settings)


def _rebuild(cls: type[S], values: dict[str, Any]) -> S:
    return cls(**values)


def derived() -> Any:
    """A value the settings parse once from their flags at construction (`set_derived`): a
    dataclass field outside `__init__`, the flags, the repr and equality."""
    return dataclasses.field(init=False, repr=False, compare=False)


def set_derived(settings: Settings, name: str, value: Any) -> None:
    """Store a parsed value on a frozen settings object, in its `__post_init__`."""
    object.__setattr__(settings, name, value)


def flag_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of a settings class in flag order (see `Settings.flag_order`); the values
    derived from them (`derived()`) are not flags."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    order = [name for entry in getattr(cls, "flag_order", ())
             for name in ([f.name for f in dataclasses.fields(entry) if f.init]
                          if isinstance(entry, type) else [entry])]
    return [fields[n] for n in order] + [f for n, f in fields.items() if n not in order]


def flag(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def env_name(f: dataclasses.Field) -> str:
    return ENV_PREFIX + f.name.upper()


def _kind(cls: type, f: dataclasses.Field) -> tuple[type, tuple[str, ...] | None]:
    """(base type, choices) of a field, from its annotation."""
    tp = typing.get_type_hints(cls)[f.name]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    if typing.get_origin(tp) is Literal:
        return str, typing.get_args(tp)
    if typing.get_origin(tp) is tuple:
        return tuple, None
    return tp, None


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One flag per field; defaults stay out of argparse so env can fill what flags leave."""
    for f in flag_fields(cls):
        kind, choices = _kind(cls, f)
        meta = f.metadata
        help_text = f"{meta['help']} (env {env_name(f)}; default: {f.default!r})"
        if kind is bool:
            parser.add_argument(flag(f), dest=f.name, action="store_true", default=None,
                                help=help_text)
        elif kind is tuple:
            parser.add_argument(flag(f), dest=f.name, action="append", default=None,
                                metavar="KEY=VALUE", help=help_text)
        else:
            parser.add_argument(flag(f), dest=f.name, type=str, default=None, choices=choices,
                                metavar=meta.get("metavar") or (None if choices else "VALUE"),
                                help=help_text)


def _convert(cls: type, f: dataclasses.Field, raw: Any, source: str) -> Any:
    kind, choices = _kind(cls, f)
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        low = str(raw).strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{source} must be true or false, got {raw!r}")
    if kind is tuple:
        # From the environment: one item a line, so a value may hold commas (a password);
        # a single line is split on commas, the short form for simple settings.
        text = str(raw)
        parts = text.splitlines() if "\n" in text else text.split(",")
        items = raw if isinstance(raw, list) else [p for p in parts if p.strip()]
        return tuple(items)
    if choices and raw not in choices:
        raise ConfigError(f"{source} must be one of {', '.join(choices)}, got {raw!r}")
    if kind in (int, float):
        try:
            value = kind(str(raw).strip())
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise ConfigError(f"{source} must be {what}, got {raw!r}") from None
        if not math.isfinite(value):
            raise ConfigError(f"{source} must be a finite number, got {raw!r}")
        _check_range(f, value, source)
        return value
    return raw


def from_namespace(cls: type[S], ns: argparse.Namespace | None = None,
                   env: Mapping[str, str] | None = None) -> S:
    """Build `cls` from parsed flags, then env, then defaults; a command's settings validate
    and parse themselves as they are built (`__post_init__`)."""
    env = os.environ if env is None else env
    values = {}
    for f in flag_fields(cls):
        raw = getattr(ns, f.name, None) if ns is not None else None
        source = flag(f)
        if raw is None and env_name(f) in env:
            raw, source = env[env_name(f)], env_name(f)
        if raw is not None:
            values[f.name] = _convert(cls, f, raw, source)
    cls.complete(values)
    return cls(**values)
