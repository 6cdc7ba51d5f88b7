"""Round checkpoints: written atomically beside (not inside) a cell's declared outputs.

Each checkpoint carries the hash of the resolved cell config; one written under another config is
never resumed (a warning, then a fresh start), nor is one whose round is not a round of the cell
or disagrees with its file name or with the rounds of history it holds. A checkpoint that cannot
be read is an error.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import torch

from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.io import atomic_path

LOG = logging.getLogger("benchlib")
_NAME = re.compile(r"^round_(\d{4,})\.pt$")


def checkpoint_path(ckpt_dir: Path, round_index: int) -> Path:
    return ckpt_dir / f"round_{round_index:04d}.pt"


def latest_checkpoint(ckpt_dir: Path) -> Path | None:
    """The checkpoint of the highest completed round, if any."""
    if not ckpt_dir.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := _NAME.match(p.name))]
    return max(found)[1] if found else None


def save_checkpoint(ckpt_dir: Path, round_index: int, state: dict[str, Any]) -> None:
    """Save ``state`` for a completed round, then delete older checkpoints."""
    path = checkpoint_path(ckpt_dir, round_index)
    with atomic_path(path) as tmp:
        torch.save(state, tmp)
    for old in ckpt_dir.iterdir():
        if _NAME.match(old.name) and old != path:
            old.unlink()


def load_checkpoint(path: Path, config_hash: str, rounds: int) -> dict[str, Any] | None:
    """Load a checkpoint of a cell of ``rounds`` rounds; None (with a warning) if it belongs to
    another config or its round cannot be trusted (:func:`round_problem`)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds for damaged files
        raise BenchlibError(
            f"checkpoint {path} is corrupted ({type(exc).__name__}); delete it to restart the "
            "cell from scratch"
        ) from exc
    if not isinstance(state, dict) or "config_hash" not in state:
        raise BenchlibError(f"checkpoint {path} is not a benchlib checkpoint; delete it")
    if state["config_hash"] != config_hash:
        LOG.warning(
            "checkpoint %s was written under another cell config; ignoring it and starting fresh",
            path,
        )
        return None
    problem = round_problem(state, path, rounds)
    if problem:
        LOG.warning("checkpoint %s %s; ignoring it and starting fresh", path, problem)
        return None
    return state


def round_problem(state: dict[str, Any], path: Path, rounds: int) -> str:
    """Why the round a checkpoint claims cannot be resumed, or "": it must be an integer in
    ``[0, rounds)``, the one its file name gives, and every per-round history list must hold one
    entry per completed round (a checkpoint without them is left to the restore, which names
    what is missing)."""
    claimed = state.get("completed_round")
    if isinstance(claimed, bool) or not isinstance(claimed, int):
        return f"holds the round {claimed!r}, not an integer"
    if not 0 <= claimed < rounds:
        return f"claims the round index {claimed}, outside 0..{rounds - 1} of this cell"
    named = _NAME.match(path.name)
    if named is not None and int(named.group(1)) != claimed:
        return f"is named for round index {int(named.group(1))} but holds {claimed}"
    history = state.get("history")  # absent or malformed: restoring it names the problem
    for key, values in history.items() if isinstance(history, dict) else ():
        if str(key).startswith("val_") and isinstance(values, list) and len(values) != claimed + 1:
            return f"holds {len(values)} rounds of {key} for round index {claimed}"
    return ""


def clear_checkpoints(ckpt_dir: Path) -> None:
    """Remove a finished cell's checkpoints."""
    if ckpt_dir.is_dir():
        for old in ckpt_dir.iterdir():
            if _NAME.match(old.name):
                old.unlink()
        if not any(ckpt_dir.iterdir()):
            ckpt_dir.rmdir()
