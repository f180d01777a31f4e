"""A one-line progress bar on stderr, drawn only when stderr is a terminal."""

from __future__ import annotations

import logging
import sys
import time


class _ClearLine(logging.Filter):
    """Wipes the bar before a log line is written, so the two never share a line; the next
    draw puts the bar back."""

    def __init__(self, stream) -> None:
        super().__init__()
        self.stream = stream

    def filter(self, record: logging.LogRecord) -> bool:
        self.stream.write("\r\x1b[K")
        return True


class Progress:
    def __init__(self, total: int, label: str, stream=None, enabled: bool | None = None) -> None:
        self.total = max(0, total)
        self.label = label
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._filter = _ClearLine(self.stream) if self.enabled else None
        if self._filter is not None:
            for handler in logging.getLogger().handlers:
                handler.addFilter(self._filter)

    def advance(self, n: int) -> None:
        self.done += n
        self.draw()

    def draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last_draw < 0.2 and self.done < self.total:
            return
        self._last_draw = now
        self.stream.write("\r" + self.render(now) + "\x1b[K")
        self.stream.flush()

    def render(self, now: float | None = None) -> str:
        frac = 1.0 if self.total == 0 else min(1.0, self.done / self.total)
        width = 30
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        elapsed = (now or time.monotonic()) - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        return (f"{self.label} [{bar}] {frac:4.0%} {self.done:,}/{self.total:,} records "
                f"({rate:,.0f}/s)")

    def close(self) -> None:
        if self.enabled:
            self.draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            if self._filter is not None:
                for handler in logging.getLogger().handlers:
                    handler.removeFilter(self._filter)
