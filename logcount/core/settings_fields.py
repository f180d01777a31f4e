"""The settings framework: `Setting` (one field declared once: type, default, help, range and
whether it is a secret), `command` (a frozen settings class from the settings it names), and
the flags and `LOGCOUNT_*` env that fill one (`add_arguments`, `read`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from logcount.core.errors import ConfigError
from logcount.core.redact import MASK

ENV_PREFIX = "LOGCOUNT_"

# Ranges shared by many flags.
PORT = {"lo": 0, "hi": 65535}  # 0: off
POSITIVE = {"above": 0}  # seconds, sizes
AT_LEAST_1 = {"lo": 1}


@dataclass(frozen=True)
class Setting:
    """One setting as declared: its type, default and help text, an optional explicit flag and
    metavar, for numbers their range (`lo`/`hi` inclusive, `above` exclusive, checked where the
    value is read), and `secret`: True shows a set value as ***, a function shows what it
    returns for the value (a URL without its password, say)."""

    type: Any
    default: Any
    help: str
    flag: str | None = None
    secret: bool | Callable[[Any], Any] = False
    metavar: str | None = None
    lo: float | None = None
    hi: float | None = None
    above: float | None = None

    def __call__(self, **changes: Any) -> Setting:
        """The same setting with some of it changed, for one command (another default, or a
        help text that speaks of that command)."""
        return dataclasses.replace(self, **changes)

    def field(self) -> dataclasses.Field:
        meta = {k: getattr(self, k)
                for k in ("help", "flag", "secret", "metavar", "lo", "hi", "above")}
        return dataclasses.field(default=self.default, metadata=meta)


def command(cls: type) -> type:
    """A frozen dataclass from the `Setting`s the class body names, in that order, after those
    of the settings class it extends. Its repr masks the secrets."""
    own = {name: s for name, s in vars(cls).items() if isinstance(s, Setting)}
    cls.__annotations__ = {name: s.type for name, s in own.items()}
    for name, s in own.items():
        setattr(cls, name, s.field())
    return dataclass(frozen=True, repr=False)(cls)


class Settings:
    """What every command's settings share: a repr that shows no secret."""

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value, secret = getattr(self, f.name), f.metadata.get("secret")
            if callable(secret):
                value = secret(value)
            elif secret:
                value = MASK if value else value
            parts.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    __str__ = __repr__


# --- flags and env ------------------------------------------------------------------------------


def flag_of(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def env_of(f: dataclasses.Field) -> str:
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
    for f in dataclasses.fields(cls):
        kind, choices = _kind(cls, f)
        meta = f.metadata
        help_text = f"{meta['help']} (env {env_of(f)}; default: {f.default!r})"
        if kind is bool:
            parser.add_argument(flag_of(f), dest=f.name, action="store_true", default=None,
                                help=help_text)
        elif kind is tuple:
            parser.add_argument(flag_of(f), dest=f.name, action="append", default=None,
                                metavar="KEY=VALUE", help=help_text)
        else:
            parser.add_argument(flag_of(f), dest=f.name, type=str, default=None, choices=choices,
                                metavar=meta.get("metavar") or (None if choices else "VALUE"),
                                help=help_text)


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


def read(cls: type, ns: argparse.Namespace | None, env: Mapping[str, str]) -> dict[str, Any]:
    """The values the flags give, then the env for what they leave, converted and checked;
    what neither gives is left out (the field's default applies)."""
    values = {}
    for f in dataclasses.fields(cls):
        raw = getattr(ns, f.name, None) if ns is not None else None
        source = flag_of(f)
        if raw is None and env_of(f) in env:
            raw, source = env[env_of(f)], env_of(f)
        if raw is not None:
            values[f.name] = _convert(cls, f, raw, source)
    return values
