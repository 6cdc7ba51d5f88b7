"""Memory and I/O of this process from /proc: anonymous and file-backed resident memory sampled
in a background thread, bytes read from storage, and evicting a file from the page cache."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

Print = Callable[[str], None]


def rss_anon_bytes(field: str = "RssAnon") -> int:
    """This process's resident memory of one kind (``RssAnon``, ``RssFile``) from /proc."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024  # the kernel reports kB
    raise OSError(f"/proc/self/status has no {field} line (Linux >= 4.5 needed)")


def disk_read_bytes() -> int:
    """Bytes this process has caused to be read from storage (page-cache misses included)."""
    try:
        with open("/proc/self/io") as handle:
            for line in handle:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1  # not available (no task I/O accounting)


class PeakRss:
    """Samples RssAnon and RssFile in a background thread; ``peak_anon`` / ``peak_file`` bytes.

    Use as a context manager around the measured code.
    """

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.peak_anon = 0
        self.peak_file = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        self.peak_anon = max(self.peak_anon, rss_anon_bytes("RssAnon"))
        self.peak_file = max(self.peak_file, rss_anon_bytes("RssFile"))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> PeakRss:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def drop_file_cache(path: Path) -> bool:
    """Ask the kernel to evict ``path``'s clean pages from the page cache (no root needed)."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True
