"""Atomic file writes and checksums: a reader never sees a half-written output."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it onto ``path``.

    On any exception the temporary file is removed and ``path`` is left untouched. The file gets
    the mode a plain ``open`` would give it (0666 less the umask), not mkstemp's 0600, so that
    results and stores are as readable to a colleague as any other file the user writes.
    """
    path = Path(path)
    _make_parent(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # e.g. a folder under /proc: the error names the output, not the temp
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
    finally:
        os.close(fd)
    tmp = Path(tmp_name)
    try:
        with full_disk_named(path, tmp):
            yield tmp
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yield a fresh sibling directory of ``path``; on success it replaces ``path`` (rename).

    On any exception the temporary directory is removed and ``path`` is left untouched. The
    directory gets the mode ``mkdir`` would give it (0777 less the umask; mkdtemp makes 0700).
    """
    path = Path(path)
    _make_parent(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    tmp.chmod(0o777 & ~current_umask())
    try:
        with full_disk_named(path, tmp):
            yield tmp
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _make_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:  # a file where a folder of the path should be
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path)) from exc


FULL_BELOW_BYTES = 1 << 20  # a disk with less free space than this counts as full


@contextlib.contextmanager
def full_disk_named(path: Path, tmp: Path) -> Iterator[None]:
    """Errors of writing ``tmp`` (a file, or a folder of files) name ``path``, the output the
    user asked for; a write that failed on a full disk without saying so becomes ``ENOSPC``.

    numpy ("N requested and M written") and torch ("unexpected pos") report a short write
    without an errno; when the disk holding ``path`` is (nearly) full, that is the reason.
    """
    try:
        yield
    except OSError as exc:
        name = str(exc.filename) if exc.filename is not None else ""
        if exc.errno is not None and name.startswith(str(tmp)):
            raise OSError(exc.errno, exc.strerror, str(path) + name[len(str(tmp)) :]) from exc
        if exc.errno is None and _nearly_full(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from exc
        raise
    except RuntimeError as exc:
        if _nearly_full(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from exc
        raise


def _nearly_full(path: Path) -> bool:
    try:
        return shutil.disk_usage(path.parent).free < FULL_BELOW_BYTES
    except OSError:
        return False


def current_umask() -> int:
    """The process's umask, read without changing it where Linux tells it (``/proc``)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore at once
    os.umask(mask)
    return mask


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))


def dumps_json(obj: Any) -> str:
    """Canonical JSON text: sorted keys, 2-space indent, trailing newline, no NaN literals."""
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n"


def loads_json(text: str | bytes, **options: Any) -> Any:
    """``json.loads`` (with ``options``), with JSON nested too deeply for the parser
    (``[[[...]]]`` 100,000 deep) raised as the :class:`json.JSONDecodeError` of any malformed
    JSON, not a RecursionError."""
    try:
        return json.loads(text, **options)
    except RecursionError:
        shown = text if isinstance(text, str) else text.decode("utf-8", errors="replace")
        raise json.JSONDecodeError("nested too deeply", shown[:100], 0) from None


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as canonical JSON to ``path`` atomically."""
    write_text_atomic(path, dumps_json(obj))


def write_with_atomic(path: str | Path, writer: Callable[[Path], None]) -> None:
    """Call ``writer(tmp_path)`` and move the result onto ``path`` atomically."""
    with atomic_path(path) as tmp:
        writer(tmp)


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_json(obj: Any) -> str:
    """Hex SHA-256 of the canonical JSON form of ``obj`` (a config fingerprint)."""
    return hashlib.sha256(dumps_json(obj).encode("utf-8")).hexdigest()
