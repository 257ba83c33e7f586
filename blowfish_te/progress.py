"""Progress of long work on standard error: redrawn in place on a terminal, else one line every
few seconds (logs, CI, `nohup`), with what is done, the rate and the time left."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["INTERVAL", "Progress"]

#: Seconds between progress lines outside a terminal (a terminal is redrawn at most every 0.2 s).
INTERVAL = 5.0


def _duration(seconds: float) -> str:
    seconds = max(int(round(seconds)), 0)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class Progress:
    """Report ``done`` of ``total`` (in ``unit``) as work advances; ``total=None`` for work known
    only as a fraction (``update(fraction)`` with ``total=1.0`` and ``unit="%"`` is the usual form).

    ``enabled=False`` (``--quiet``) reports nothing. Outside a terminal a line is written at most
    every :data:`INTERVAL` seconds, and a closing line only when a line was written before (quick
    work stays silent)."""

    def __init__(self, label: str, total: float | None = None, unit: str = "", stream: TextIO | None = None,
                 enabled: bool = True, clock=time.monotonic):
        self.label, self.total, self.unit = label, total, unit
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.clock = clock
        self.start = clock()
        self.done = 0.0
        self.shown = 0
        self._last = self.start
        isatty = getattr(self.stream, "isatty", None)
        self.terminal = bool(isatty and isatty())

    @staticmethod
    def _number(value: float) -> str:
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"

    def line(self) -> str:
        """What is done, of how much, the rate and the time left."""
        elapsed = self.clock() - self.start
        if self.unit == "%":
            done = f"{100 * self.done:.0f}%"
        else:
            of = "" if self.total is None else f" of {self._number(self.total)}"
            done = f"{self._number(self.done)}{of} {self.unit}".rstrip()
        parts = [done]
        if elapsed > 0 and self.done > 0:
            if self.unit != "%":
                parts.append(f"{self.done / elapsed:,.3g} {self.unit}/s".replace("  ", " "))
            if self.total:
                parts.append(f"~{_duration(elapsed * (self.total - self.done) / self.done)} left")
        parts.append(f"{_duration(elapsed)} elapsed")
        return f"{self.label}: " + ", ".join(parts)

    def update(self, done: float, total: float | None = None) -> None:
        """Record progress; write a line when it is time to."""
        self.done = float(done)
        if total is not None:
            self.total = total
        if not self.enabled:
            return
        now = self.clock()
        if now - self._last < (0.2 if self.terminal else INTERVAL):
            return
        self._last = now
        self._write()

    def _write(self) -> None:
        if self.terminal:
            self.stream.write("\r" + self.line() + "\033[K")
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()
        self.shown += 1

    def close(self) -> None:
        """The closing line (on a terminal, the line redrawn and ended)."""
        if self.enabled and self.shown:
            self._write()
            if self.terminal:
                self.stream.write("\n")
                self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
