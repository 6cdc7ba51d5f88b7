"""Checksummed downloads through pooch: pinned sha256, a cache folder, retries, no partial files.

A dataset source declares the files it downloads as :class:`RemoteFile` entries
(:func:`register_remote_files`). The workflow's ``download_data`` rule fetches each of them into
``results/downloads/<dataset>/`` (on the submitting host, where the network is); the prepare
step calls :func:`fetch` again, which only re-checks the hash of the file already there.

pooch streams every download into a temporary file beside the target and moves it into place only
when its sha256 matches, so a failed, truncated or tampered download never leaves a file behind.

Progress: on a terminal, pooch's tqdm bar; otherwise (a Snakemake job's log, a batch job) a
download logs a line with the bytes so far, the rate and an ETA every :data:`PROGRESS_EVERY_S`
seconds, and one line when it ends (:class:`LogProgress`). Every download, HTTP(S) or FTP
(:mod:`benchlib.data.ftp`), stops past the file's known size, or :data:`MAX_DOWNLOAD_BYTES` for a
file of unknown size, announced or received (:class:`BoundedProgress`).
"""

from __future__ import annotations

import errno
import logging
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from benchlib.data.ftp import FTPDownload
from benchlib.declarations.params import Param
from benchlib.primitives.durations import format_duration
from benchlib.primitives.errors import BenchlibError, os_fault, require
from benchlib.primitives.io import sha256_file

LOG = logging.getLogger("benchlib")
SCHEMES = ("http", "https", "ftp")
DEFAULT_RETRIES = 2
DEFAULT_TIMEOUT_S = 60.0
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")
PROGRESS_EVERY_S = 10.0  # off a terminal: seconds between a download's progress lines
MAX_DOWNLOAD_BYTES = 200 * 1024**3  # the most a download of unknown size may write


@dataclass(frozen=True)
class RemoteFile:
    """One file a source downloads: its cache name, URL and pinned sha256.

    ``url_param`` and ``sha256_param`` name the dataset ``params`` keys that override the URL and
    the checksum (e.g. a mirror, or a local test server). A source without a published checksum
    declares ``sha256=""`` and ``pinned=False`` (the user may still pin one through
    ``sha256_param``) and, where it is known, the byte ``size`` the download must have; its
    content is verified by the source's prepare step (counts of rows, images...).
    """

    name: str
    url: str
    sha256: str
    url_param: str = "url"
    sha256_param: str = "sha256"
    size: int = 0
    pinned: bool = True
    md5: str = ""  # a published md5 (torchvision's lists) when no sha256 is published
    md5_param: str = "md5"
    size_param: str = "size"  # overrides a declared size (a mirror, or a local test server)


_REMOTE_FILES: dict[str, tuple[RemoteFile, ...]] = {}


def download_params(files: Sequence[RemoteFile]) -> dict[str, Param]:
    """The ``params`` of a source that downloads ``files``: each file's overrides (URL,
    checksums, size; absent = the pinned values), the download's retries and timeout, and the
    download folder the workflow sets."""
    optional = {"type": "string"}
    result = {
        "download_dir": Param(optional, description="set by the workflow; do not set it"),
        "retries": Param({"type": "integer", "minimum": 0}, DEFAULT_RETRIES, "download retries"),
        "timeout": Param(
            {"type": "number", "exclusiveMinimum": 0}, DEFAULT_TIMEOUT_S, "seconds per attempt"
        ),
    }
    for remote in files:
        what = f"of {remote.name}"
        result[remote.url_param] = Param(optional, description=f"URL {what} (a mirror)")
        result[remote.sha256_param] = Param(optional, description=f"sha256 {what}")
        if remote.md5:
            result[remote.md5_param] = Param(optional, description=f"md5 {what}")
        if remote.size:
            result[remote.size_param] = Param(
                {"type": "integer", "minimum": 1}, description=f"byte size {what}"
            )
    return result


def register_remote_files(source: str, files: Sequence[RemoteFile]) -> None:
    """Declare the files dataset source ``source`` downloads (module import time)."""
    if source in _REMOTE_FILES:
        raise ValueError(f"remote files of source {source!r} registered twice")
    _REMOTE_FILES[source] = tuple(files)


def remote_files(source: str, params: dict[str, Any] | None = None) -> list[RemoteFile]:
    """The files ``source`` downloads, with URL / sha256 overrides from ``params`` applied.

    Sources that download nothing give an empty list.
    """
    from benchlib.data.registry import get_dataset

    get_dataset(source)  # imports every source module, so their files are registered
    params = params or {}
    files = []
    for remote in _REMOTE_FILES.get(source, ()):
        url = str(params.get(remote.url_param, remote.url))
        sha256 = str(params.get(remote.sha256_param, remote.sha256)).lower()
        md5 = str(params.get(remote.md5_param, remote.md5)).lower()
        size = int(params.get(remote.size_param, remote.size)) if remote.size else 0
        files.append(replace(remote, url=url, sha256=sha256, md5=md5, size=size))
    return files


def remote_file(source: str, name: str, params: dict[str, Any] | None = None) -> RemoteFile:
    """The remote file called ``name`` of ``source``, with overrides applied."""
    files = {f.name: f for f in remote_files(source, params)}
    require(
        name in files,
        f"dataset source {source!r} downloads no file named {name!r}; it downloads: "
        f"{', '.join(sorted(files)) or 'nothing'}",
    )
    return files[name]


def check_remote(remote: RemoteFile, context: str = "params") -> None:
    """Reject malformed URLs and checksums before any network access."""
    scheme = urlparse(remote.url).scheme
    require(
        scheme in SCHEMES and bool(urlparse(remote.url).netloc),
        f"download URL {remote.url!r} of {remote.name} is not an {'/'.join(SCHEMES)} URL; "
        f"fix {context}.{remote.url_param}",
    )
    require(
        bool(_SHA256.match(remote.sha256))
        or (not remote.pinned and not remote.sha256)
        or (not remote.sha256 and bool(_MD5.match(remote.md5))),
        f"checksum {remote.sha256!r} of {remote.name} is not a 64-digit hex sha256; "
        f"fix {context}.{remote.sha256_param}",
    )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


_LOCAL_FAULTS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def _local_fault(exc: BaseException, target: Path) -> BenchlibError | None:
    """The one-line error of a fault of the local file system behind ``exc`` (writing
    ``target``: a full disk, a read-only or forbidden folder), or None for a network fault."""
    import requests

    seen: BaseException | None = exc
    for _ in range(5):  # the exception, then what it was raised from or during
        if seen is None:
            return None
        if (
            isinstance(seen, OSError)
            and not isinstance(seen, requests.exceptions.RequestException)
            and seen.errno in _LOCAL_FAULTS
        ):
            filename = seen.filename if seen.filename is not None else str(target)
            return os_fault(OSError(seen.errno, seen.strerror, filename))
        seen = seen.__cause__ or seen.__context__
    return None


def fetch(
    remote: RemoteFile,
    folder: str | Path,
    *,
    retries: int = DEFAULT_RETRIES,
    timeout: float = DEFAULT_TIMEOUT_S,
    context: str = "params",
) -> Path:
    """Return ``folder/remote.name``, downloaded first unless a copy with the right hash is there.

    ``context`` names the config section the URL and checksum come from (for error messages).
    A cached copy with a wrong hash is deleted and downloaded again; a download that fails or does
    not match the pinned sha256 raises :class:`BenchlibError` and leaves no file behind.
    """
    import pooch
    import requests

    check_remote(remote, context)
    folder = Path(folder)
    target = folder / remote.name
    if target.is_file():
        if _cached_copy_ok(target, remote):
            return target
        LOG.warning("cached %s fails its size or sha256 check; downloading it again", target)
        target.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    # HTTP(S) and FTP alike: progress shown, and the bytes bounded by the file's known size (or
    # MAX_DOWNLOAD_BYTES), announced or received
    progress = _terminal_bar() if _on_terminal() else LogProgress(remote.name)
    limit = remote.size or MAX_DOWNLOAD_BYTES
    bounded = BoundedProgress(progress, limit, remote.url, context, remote.url_param)
    if urlparse(remote.url).scheme.startswith("http"):
        downloader: Any = pooch.HTTPDownloader(progressbar=bounded, timeout=timeout)
    else:
        downloader = FTPDownload(bounded, timeout)
    cache = pooch.create(
        path=folder,
        base_url="",
        registry={remote.name: _known_hash(remote)},
        urls={remote.name: remote.url},
        retry_if_failed=retries,
    )
    LOG.info("downloading %s -> %s (sha256 %s)", remote.url, target, remote.sha256)
    pooch_log = pooch.get_logger()
    level = pooch_log.level
    pooch_log.setLevel(logging.WARNING)  # benchlib logs the download itself
    try:
        path = Path(cache.fetch(remote.name, downloader=downloader))
    # requests' InvalidURL, InvalidSchema, InvalidProxyURL and InvalidHeader are ValueErrors too:
    # they are failed downloads, not checksum mismatches, so they are caught first
    except (requests.exceptions.RequestException, OSError) as exc:
        local = _local_fault(exc, target)
        if local is not None:  # the disk, not the network: a full disk is named as such
            raise local from exc
        raise BenchlibError(
            f"download of {remote.url} failed ({_one_line(exc)}); check the network, the proxy "
            f"variables (http_proxy, https_proxy) or point {context}.{remote.url_param} at a "
            "reachable copy"
        ) from exc
    except ValueError as exc:
        got = re.search(r"but got ([0-9a-fA-F]+)", str(exc))
        known = _known_hash(remote)
        if known is None or got is None:
            raise BenchlibError(
                f"download of {remote.url} failed ({_one_line(exc)}); check "
                f"{context}.{remote.url_param}"
            ) from exc
        expected = known.replace(":", " ", 1)  # "sha256 <hex>" / "md5 <hex>"
        raise BenchlibError(
            f"checksum mismatch for {remote.url}: expected {expected}, got {got.group(1)}; the "
            "download is corrupt or truncated, or the file changed upstream: retry, or fix "
            f"{context}.{remote.url_param} / "
            f"{context}.{remote.sha256_param if remote.sha256 else remote.md5_param}"
        ) from exc
    finally:
        pooch_log.setLevel(level)
    if remote.size and path.stat().st_size != remote.size:
        got = path.stat().st_size
        path.unlink()
        raise BenchlibError(
            f"{remote.url} gave {got} bytes, expected {remote.size}; the download is truncated or "
            f"the file changed upstream: retry, or fix {context}.{remote.url_param}"
        )
    return path


def fetch_with_params(
    remote: RemoteFile, params: dict[str, Any], folder: str | Path | None = None
) -> Path:
    """:func:`fetch` ``remote`` into ``folder`` (default: ``params["download_dir"]``) with the
    ``retries`` and ``timeout`` of the dataset's params."""
    return fetch(
        remote,
        params["download_dir"] if folder is None else folder,
        retries=int(params["retries"]),
        timeout=float(params["timeout"]),
        context="the dataset's params",
    )


def fetch_source_file(source: str, name: str, params: dict[str, Any]) -> tuple[RemoteFile, Path]:
    """The remote file ``name`` of ``source`` and its copy in ``params["download_dir"]``, fetched
    (or re-checked) by :func:`fetch_with_params`."""
    require(
        "download_dir" in params,
        f"{source} needs params.download_dir (set by the workflow: results/downloads/<dataset>)",
    )
    remote = remote_file(source, name, params)
    return remote, fetch_with_params(remote, params)


def _cached_copy_ok(target: Path, remote: RemoteFile) -> bool:
    """A cached file is reused when its sha256 (pinned) or its byte size (unpinned) matches."""
    if remote.sha256:
        return sha256_file(target) == remote.sha256
    if remote.md5:
        import pooch

        return pooch.file_hash(str(target), alg="md5") == remote.md5
    return not remote.size or target.stat().st_size == remote.size


def _known_hash(remote: RemoteFile) -> str | None:
    """pooch's ``alg:hex`` of the pinned checksum (sha256 first, else md5), or None."""
    if remote.sha256:
        return f"sha256:{remote.sha256}"
    return f"md5:{remote.md5}" if remote.md5 else None


def _on_terminal() -> bool:
    """Whether progress goes to a terminal (tqdm's bar) rather than a log file."""
    try:
        import tqdm  # noqa: F401  (pooch's bar needs it)
    except ImportError:
        return False
    return sys.stderr.isatty()


def _size(count: float) -> str:
    """Bytes in decimal units: ``512 B``, ``102.4 kB``, ``1.3 GB``."""
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


class LogProgress:
    """pooch's progress-bar protocol (``total``, ``update``, ``reset``, ``close``) as log lines:
    bytes so far, rate and ETA at most every :data:`PROGRESS_EVERY_S` seconds, and the end."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._total = 0
        self.n = 0
        self.started = self.last = time.monotonic()
        self.finishing = False

    @property
    def total(self) -> int:
        return self._total

    @total.setter
    def total(self, total: int) -> None:  # pooch sets it as each attempt starts
        self._total, self.n, self.finishing = int(total), 0, False
        self.started = self.last = time.monotonic()

    def update(self, count: int) -> None:
        self.n = min(self.n + count, self._total) if self._total else self.n + count
        now = time.monotonic()
        if self.finishing or now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        rate = self.n / max(now - self.started, 1e-9)
        if self._total:
            eta = format_duration((self._total - self.n) / rate) if rate > 0 else "unknown"
            LOG.info(
                "%s: %s of %s (%d %%), %s/s, ETA %s",
                self.name,
                _size(self.n),
                _size(self._total),
                100 * self.n // self._total,
                _size(rate),
                eta,
            )
        else:
            LOG.info("%s: %s so far, %s/s", self.name, _size(self.n), _size(rate))

    def reset(self) -> None:  # pooch fills the bar once the transfer is over
        self.finishing = True
        self.n = 0

    def close(self) -> None:
        seconds = time.monotonic() - self.started
        LOG.info(
            "%s: %s downloaded in %.1fs (%s/s)",
            self.name,
            _size(self.n),
            seconds,
            _size(self.n / max(seconds, 1e-9)),
        )


def _terminal_bar() -> Any:
    """The tqdm bar pooch draws on a terminal."""
    from tqdm import tqdm

    return tqdm(total=0, ncols=79, unit="B", unit_scale=True, leave=True)


class BoundedProgress:
    """A progress object that stops a download past ``limit`` bytes (the file's known size, or
    :data:`MAX_DOWNLOAD_BYTES`), announced or received, and passes the counts on to ``inner``.

    pooch counts each chunk as its full chunk size, so the bound allows one chunk of slack.
    """

    SLACK = 1 << 16

    def __init__(self, inner: Any, limit: int, url: str, context: str, param: str) -> None:
        self.inner, self.limit, self.url = inner, limit, url
        self.where = f"{context}.{param}"
        self.n = 0
        self.done = False

    def _refuse(self, count: int, verb: str) -> BenchlibError:
        return BenchlibError(
            f"{self.url} {verb} {count:,} bytes, more than the {self.limit:,} this file can "
            f"have; it is not the expected file: fix {self.where}"
        )

    @property
    def total(self) -> int:
        return int(self.inner.total)

    @total.setter
    def total(self, total: int) -> None:
        if total > self.limit:
            raise self._refuse(total, "announces")
        self.inner.total = total
        self.n, self.done = 0, False

    def update(self, count: int) -> None:
        if not self.done:
            self.n += count
            if self.n > self.limit + self.SLACK:
                raise self._refuse(self.n, "sent")
        self.inner.update(count)

    def reset(self) -> None:  # pooch fills the bar once the transfer is over
        self.done = True
        self.inner.reset()

    def close(self) -> None:
        self.inner.close()
