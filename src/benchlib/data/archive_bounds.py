"""Bounds on what is read or written out of an archive: a member may not be larger than its
kind can be, and a copy stops at the size the member declares (a zip bomb, or a damaged
archive, is one clear error before it fills memory or the disk)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import IO

from benchlib.primitives.errors import BenchlibError

CHUNK = 1 << 20


def check_member_size(declared: int, limit: int, what: str) -> None:
    """A member that declares more than ``limit`` bytes is refused before it is read."""
    if declared > limit:
        raise BenchlibError(
            f"{what} declares {declared:,} bytes, more than the {limit:,} it can have; the "
            "archive is damaged or not the expected release: download it again"
        )


def copy_bounded(source: IO[bytes], target: Path, declared: int, compressed: int, what: str) -> int:
    """Copy ``source`` (an archive member that declares ``declared`` bytes, stored in
    ``compressed``) to ``target``; refuse a member whose declared size the disk cannot hold, that
    expands more than a zip of zips can (100x), or that yields more bytes than it declares."""
    if declared > 100 * max(compressed, 1) + CHUNK:
        raise BenchlibError(
            f"{what} declares {declared:,} bytes from {compressed:,} compressed (a zip bomb?); "
            "the archive is damaged or not the expected release: download it again"
        )
    return copy_declared(source, target, declared, what)


def copy_declared(source: IO[bytes], target: Path, declared: int, what: str) -> int:
    """Copy ``source`` (a member that declares ``declared`` bytes) to ``target``; refuse one whose
    declared size the disk cannot hold, or that yields more bytes than it declares."""
    free = shutil.disk_usage(target.parent).free
    if declared > free:
        raise BenchlibError(
            f"{what} needs {declared:,} bytes but {target.parent} has {free:,} free; free some "
            "space and rerun"
        )
    written = 0
    with open(target, "wb") as handle:
        while chunk := source.read(CHUNK):
            written += len(chunk)
            if written > declared:
                raise BenchlibError(
                    f"{what} yields more than the {declared:,} bytes it declares; the archive is "
                    "damaged: download it again"
                )
            handle.write(chunk)
    return written
