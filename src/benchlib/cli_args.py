"""Argument helpers of the ``benchlib`` commands: spec JSON and output paths checked before any
work (shared by cli.py and the commands other modules register)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchlib.errors import BenchlibError
from benchlib.io import loads_json
from benchlib.limits import MAX_THREADS


def parse_spec(text: str) -> dict[str, Any]:
    """A JSON object given inline or as ``@path``."""
    if text.startswith("@"):
        path = Path(text[1:])
        if not path.is_file():
            raise BenchlibError(f"spec file {path} not found")
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BenchlibError(f"spec file {path} is not UTF-8 JSON; regenerate it") from exc
    try:
        spec = loads_json(text, parse_constant=_not_finite)
    except json.JSONDecodeError as exc:
        raise BenchlibError(f"--spec is not valid JSON ({exc.msg}); pass a JSON object") from exc
    if not isinstance(spec, dict):
        raise BenchlibError("--spec must be a JSON object")
    return spec


def _not_finite(name: str) -> None:
    """Python's JSON reads NaN and Infinity; a spec never holds them (every hash refuses them)."""
    raise BenchlibError(
        f"--spec holds {name}, not a finite number; pass the spec the workflow generates"
    )


def require_keys(spec: dict[str, Any], keys: tuple[str, ...], what: str) -> None:
    """A clear error naming the keys missing from a spec (instead of a KeyError later)."""
    missing = [key for key in keys if key not in spec]
    if missing:
        raise BenchlibError(
            f"{what} lacks {', '.join(missing)}; pass the spec the workflow generates "
            "(benchlib.config.Config.cell_spec)"
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
