"""Progress of long data work (extraction, preparation, corruption) as periodic log lines, the
way downloads report theirs (:class:`benchlib.data.download.LogProgress`): at most every
:data:`EVERY_S` seconds ``<what>: 12000 of 45000 images (26 %), 350 images/s, ETA 1m34s``, and
one line at the end ``<what>: 45000 images in 2m10s (346 images/s)``. Off a terminal these lines
are the only progress (the job's log file); the rules' logs show them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from benchlib.primitives.durations import format_duration

LOG = logging.getLogger("benchlib")
EVERY_S = 10.0  # seconds between two progress lines of one task


def _rate(rate: float) -> str:
    """Items per second with 3 significant digits: ``1250``, ``15``, ``0.34``."""
    return f"{rate:.0f}" if rate >= 100 else f"{rate:.3g}"


class ItemProgress:
    """Counts the items of one task and logs count, percent, rate and ETA periodically."""

    def __init__(
        self,
        what: str,
        total: int | None,
        unit: str = "items",
        every_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.every_s = EVERY_S if every_s is None else every_s
        self.clock = clock
        self.n = 0
        self.started = self.last = clock()
        self.closed = False

    def update(self, count: int = 1) -> None:
        """``count`` more items done; log a line when :attr:`every_s` has passed."""
        self.n += count
        now = self.clock()
        if now - self.last < self.every_s:
            return
        self.last = now
        rate = self.n / max(now - self.started, 1e-9)
        if self.total:
            eta = format_duration((self.total - self.n) / rate) if rate > 0 else "unknown"
            LOG.info(
                "%s: %d of %d %s (%d %%), %s %s/s, ETA %s",
                self.what,
                self.n,
                self.total,
                self.unit,
                100 * self.n // self.total,
                _rate(rate),
                self.unit,
                eta,
            )
        else:
            LOG.info(
                "%s: %d %s so far, %s %s/s", self.what, self.n, self.unit, _rate(rate), self.unit
            )

    def close(self) -> None:
        """Log the end line (once)."""
        if self.closed:
            return
        self.closed = True
        seconds = self.clock() - self.started
        LOG.info(
            "%s: %d %s in %s (%s %s/s)",
            self.what,
            self.n,
            self.unit,
            format_duration(seconds),
            _rate(self.n / max(seconds, 1e-9)),
            self.unit,
        )

    def __enter__(self) -> ItemProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
