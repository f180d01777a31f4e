"""A process's /metrics, read with prometheus_client's own parser."""

from __future__ import annotations

import urllib.request
from typing import overload

from prometheus_client.parser import text_string_to_metric_families


def families(port: int, timeout: float = 5.0) -> list:
    """The metric families of http://127.0.0.1:PORT/metrics; OSError while nothing answers."""
    # A local HTTP server answering from memory: a few seconds is a wedged process, not a slow one.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as resp:
        return list(text_string_to_metric_families(resp.read().decode()))


def read_metrics(port: int, timeout: float = 5.0) -> dict[str, float]:
    """Every sample's value by sample name (`..._total`, `..._count`), label sets summed."""
    out: dict[str, float] = {}
    for family in families(port, timeout):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


_RAISE = object()


@overload  # a number in, a number out: `metric(...) >= 1` needs no None check
def metric(port: int, name: str, default: float = 0.0, *, down: float = ...,
           timeout: float = 5.0) -> float: ...
@overload
def metric(port: int, name: str, default: float | None = 0.0, *, down: object = ...,
           timeout: float = 5.0) -> float | None: ...


def metric(port: int, name: str, default: float | None = 0.0, *, down: object = _RAISE,
           timeout: float = 5.0) -> float | None:
    """One sample's value (label sets summed), `default` when absent; while nothing answers,
    `down` when given, else the OSError."""
    try:
        return read_metrics(port, timeout).get(name, default)
    except OSError:
        if down is _RAISE:
            raise
        return down  # type: ignore[return-value]


def label_sets(port: int, name: str, timeout: float = 5.0) -> list[dict[str, str]]:
    """The label sets the sample `name` has now (none before its first increment)."""
    return [dict(s.labels) for family in families(port, timeout) for s in family.samples
            if s.name == name]


def sample(port: int, name: str, timeout: float = 5.0, **labels: str) -> float:
    """The sample `name` with exactly these labels; 0.0 when it has none yet."""
    return next((s.value for family in families(port, timeout) for s in family.samples
                 if s.name == name and dict(s.labels) == labels), 0.0)
