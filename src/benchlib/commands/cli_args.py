"""Argument helpers of the ``benchlib`` commands: a spec's keys, output paths and thread counts
checked before any work (shared by cli.py and the commands other modules register). A step's
``--spec`` is read by :func:`benchlib.grid.spec.parse_spec`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.limits import MAX_THREADS


def require_keys(spec: dict[str, Any], keys: tuple[str, ...], what: str) -> None:
    """A clear error naming the keys missing from a spec (instead of a KeyError later)."""
    missing = [key for key in keys if key not in spec]
    if missing:
        raise BenchlibError(
            f"{what} lacks {', '.join(missing)}; pass the spec the workflow generates "
            "(benchlib.configuration.config.Config.cell_spec)"
        )


def check_output_file(path: Path) -> None:
    """Fail before any work when an output file's path cannot be written."""
    if path.is_dir():
        raise BenchlibError(f"output path {path} is a directory; remove it or choose another path")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BenchlibError(f"output folder {parent} is an existing file; remove it")
            break


def check_output_dir(path: Path) -> None:
    """Fail before any work when an output directory's path is taken by a file."""
    if path.exists() and not path.is_dir():
        raise BenchlibError(f"output path {path} is an existing file; remove it or choose another")
    check_output_file(path / "_")


def set_threads(threads: int | None) -> None:
    """Torch intra-op threads for this process (None: torch's default); checked."""
    if threads is not None and threads < 1:
        raise BenchlibError(f"--threads must be at least 1, got {threads}")
    if threads is not None and threads > MAX_THREADS:  # each one a thread stack: memory runs out
        raise BenchlibError(
            f"--threads {threads} is more than {MAX_THREADS}; set --threads <= {MAX_THREADS}"
        )
    if threads:
        import torch

        torch.set_num_threads(threads)
