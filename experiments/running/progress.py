"""Progress of a command's runs, one line on stderr."""

from __future__ import annotations

import sys
import time
from typing import Any

__all__ = ["Progress"]


class Progress:
    """A one-line progress bar on stderr: done/total, failures, elapsed time and ETA. Silent when ``quiet``."""

    def __init__(self, total: int, quiet: bool = False, stream: Any = None, width: int = 28):
        self.total, self.quiet, self.width = total, quiet, width
        self.stream = stream or sys.stderr
        self.done = self.failed = 0
        self.t0 = time.monotonic()
        self._last = 0.0
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    @staticmethod
    def _clock(s: float) -> str:
        s = int(round(s))
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"

    def line(self) -> str:
        n = self.done + self.failed
        frac = n / self.total if self.total else 1.0
        bar = "#" * int(frac * self.width) + "." * (self.width - int(frac * self.width))
        elapsed = time.monotonic() - self.t0
        eta = "--:--" if n == 0 else self._clock(elapsed / n * (self.total - n))
        fail = f", {self.failed} failed" if self.failed else ""
        return f"[{bar}] {n}/{self.total} runs{fail}  {self._clock(elapsed)} elapsed, ETA {eta}"

    def update(self, ok: bool) -> None:
        if ok:
            self.done += 1
        else:
            self.failed += 1
        if self.quiet:
            return
        now = time.monotonic()
        last = self.done + self.failed == self.total
        if self._tty:
            if last or now - self._last > 0.2:
                self.stream.write("\r" + self.line() + ("\n" if last else ""))
                self.stream.flush()
                self._last = now
        elif last or now - self._last > 5.0:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last = now
