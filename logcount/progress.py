"""A one-line progress bar on stderr, drawn only when stderr is a terminal."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, label: str, stream=None, enabled: bool | None = None) -> None:
        self.total = max(0, total)
        self.label = label
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.started = time.monotonic()
        self._last_draw = 0.0

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
