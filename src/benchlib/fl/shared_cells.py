"""Cells shared across projects: with ``BENCHLIB_SHARED_CELLS`` set to a folder, a finished cell
is published there, and any project (a checkout, a module deployment, a plugin's project) whose
cell has the same identity copies it instead of training it again.

A cell's identity (:func:`cell_identity`) is what its numbers depend on: the hash of its resolved
spec, the bytes of its prepared store's manifest and of its split, and the software that trains
it (benchlib's version and commit, the plugin packages its components come from, Python, torch
and numpy versions, the device and the thread count). A restored cell's metrics.json is the
published bytes; its timing.json is the publisher's with ``reused_from`` (the shared entry) added,
and keeps ``trained_at``, the metrics.json path the cell was trained at.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.io import (
    current_umask,
    loads_json,
    sha256_file,
    sha256_json,
    write_bytes_atomic,
    write_json_atomic,
)

ENV = "BENCHLIB_SHARED_CELLS"
FORMAT = 1
LOG = logging.getLogger("benchlib")


def shared_folder() -> Path | None:
    """The folder ``BENCHLIB_SHARED_CELLS`` names (None when unset); it must exist."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    folder = Path(value).expanduser().resolve()
    if not folder.is_dir():
        raise BenchlibError(
            f"{ENV}={value} is not a folder; create it (mkdir -p {value}) or unset {ENV}"
        )
    return folder


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def cell_identity(spec: Any, store: Path, split: Path, device: str, threads: int) -> dict:
    """Everything the cell's numbers depend on (see the module docstring), as JSON data."""
    import benchlib
    from benchlib.declarations import plugins
    from benchlib.facts.provenance import git_state

    return {
        "format": FORMAT,
        "spec": spec.config_hash(),
        "store_manifest": sha256_file(Path(store) / "manifest.json"),
        "split": sha256_file(split),
        "benchlib": benchlib.__version__,
        **git_state(),
        "plugins": plugins.used_by(spec.components()),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "numpy": _version("numpy"),
        "device": device,
        "threads": threads,
    }


def entry_of(folder: Path, identity: dict) -> Path:
    """The shared entry of a cell identity: ``<folder>/<sha256 of the identity>``."""
    return folder / sha256_json(identity)


def _entry_problem(entry: Path, config_hash: str | None) -> tuple[str, bytes, dict]:
    """Why a published entry cannot be restored ("" if it can), its metrics bytes and timing: a
    shared folder is written by others, and a damaged or foreign entry must not become this
    cell's result."""
    data = (entry / "metrics.json").read_bytes()
    try:
        metrics = loads_json(data)
        published = loads_json((entry / "timing.json").read_bytes())
    except (OSError, ValueError) as exc:
        return f"cannot be read ({type(exc).__name__}: {exc})", data, {}
    if not isinstance(metrics, dict) or not isinstance(published, dict):
        return "holds a metrics.json or timing.json that is not a JSON object", data, {}
    if config_hash is not None and metrics.get("config_hash") != config_hash:
        return "holds the metrics of another cell config", data, {}
    return "", data, published


def restore(entry: Path, out: Path, timing: Path | None, config_hash: str | None = None) -> bool:
    """Copy a published cell into ``out`` (and ``timing``); False when none is published, or
    when the entry is damaged or (``config_hash`` given) holds another cell config's metrics
    (a warning: the cell is trained instead)."""
    metrics = entry / "metrics.json"
    if not metrics.is_file():
        return False
    problem, data, published = _entry_problem(entry, config_hash)
    if problem:
        LOG.warning("shared cell %s %s; training the cell instead", entry, problem)
        return False
    write_bytes_atomic(out, data)
    if timing is not None:
        write_json_atomic(timing, {**published, "reused_from": str(entry)})
    LOG.info(
        "reused: %s was trained at %s; copied from %s, not trained again",
        out,
        published.get("trained_at"),
        entry,
    )
    return True


def publish(entry: Path, identity: dict, out: Path, timing: Path | None) -> None:
    """Publish a finished cell (atomically: a complete entry or none); the first one stays."""
    if entry.exists():
        return
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    try:
        shutil.copyfile(out, tmp / "metrics.json")
        recorded = json.loads(Path(timing).read_text()) if timing is not None else {}
        recorded.setdefault("trained_at", str(Path(out).resolve()))
        (tmp / "timing.json").write_text(json.dumps(recorded, indent=1) + "\n")
        (tmp / "identity.json").write_text(json.dumps(identity, indent=1) + "\n")
        tmp.chmod(0o777 & ~current_umask())
        try:
            tmp.rename(entry)
        except OSError:  # another project published the same cell first: keep theirs
            if not (entry / "metrics.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def train_or_reuse(
    folder: Path,
    cell: tuple[Any, Path, Path],
    outputs: tuple[Path, Path | None, Path],
    train: Callable[[], None],
) -> None:
    """Copy the published cell (spec, store, split) into its outputs (metrics.json,
    timing.json, checkpoint folder), or ``train`` it and publish it."""
    import torch

    from benchlib.fl.checkpoint import clear_checkpoints
    from benchlib.fl.device import select_device

    spec, store, split = cell
    out, timing, checkpoints = outputs
    device = select_device()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    identity = cell_identity(spec, store, split, name, torch.get_num_threads())
    entry = entry_of(folder, identity)
    if restore(entry, out, timing, spec.config_hash()):
        clear_checkpoints(checkpoints)  # an earlier, interrupted attempt's rounds
        return
    train()
    publish(entry, identity, out, timing)
