"""FTP downloads for pooch that report their bytes to a progress object, as HTTP ones do.

pooch's own FTP downloader takes no progress object (only its tqdm bar) and always connects to
port 21, whatever the URL says. This one connects to the URL's host and port (user and password
from the URL, anonymous otherwise), announces the server's ``SIZE`` (when it answers one) to the
progress object and passes it every block as it arrives. The progress object can stop the
transfer by raising (:class:`benchlib.data.download.BoundedProgress` does past a byte limit).
"""

from __future__ import annotations

import ftplib
from typing import Any
from urllib.parse import unquote, urlparse

BLOCK_BYTES = 1 << 16


class FTPDownload:
    """A pooch downloader (``downloader(url, output_file, pooch)``) for ``ftp://`` URLs."""

    def __init__(self, progress: Any, timeout: float) -> None:
        self.progress = progress
        self.timeout = timeout

    def __call__(self, url: str, output_file: Any, pooch: Any, check_only: bool = False) -> Any:
        """Download ``url`` into ``output_file`` (a path or a binary file); ftplib's errors
        become OSError, so the caller reports them as a failed download."""
        parsed = urlparse(url)
        path = unquote(parsed.path)
        ftp = ftplib.FTP(timeout=self.timeout)
        try:
            ftp.connect(parsed.hostname or "", parsed.port or 21)
            ftp.login(unquote(parsed.username or "anonymous"), unquote(parsed.password or ""))
            ftp.voidcmd("TYPE I")  # binary: SIZE counts bytes
            if check_only:
                return self._size(ftp, path) is not None
            # set as each attempt starts (0: unknown), as pooch's HTTP downloader does; a
            # bounded progress refuses a size over its limit here
            self.progress.total = self._size(ftp, path) or 0
            if hasattr(output_file, "write"):
                received = self._retrieve(ftp, path, output_file)
            else:
                with open(output_file, "w+b") as handle:
                    received = self._retrieve(ftp, path, handle)
        except (ftplib.Error, EOFError) as exc:
            raise OSError(f"FTP: {exc}") from exc
        finally:
            ftp.close()  # no QUIT: after a refused transfer the server may still be sending
        self.progress.reset()  # the transfer is over: the bar shows what arrived
        self.progress.update(received)
        self.progress.close()
        return None

    @staticmethod
    def _size(ftp: ftplib.FTP, path: str) -> int | None:
        """The file's size in bytes, or None where the server does not say."""
        try:
            size = ftp.size(path)
        except ftplib.error_perm:  # 5xx: SIZE unsupported (or no such file: RETR will say)
            return None
        return None if size is None else int(size)

    def _retrieve(self, ftp: ftplib.FTP, path: str, handle: Any) -> int:
        """Write ``path`` into ``handle`` block by block; the bytes received."""
        received = 0

        def block(data: bytes) -> None:
            nonlocal received
            self.progress.update(len(data))  # may raise: nothing more is written
            handle.write(data)
            received += len(data)

        ftp.retrbinary(f"RETR {path}", block, blocksize=BLOCK_BYTES)
        return received
