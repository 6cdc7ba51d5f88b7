"""Hand edits of a prepared store, as a careless or hostile user makes them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib.data.store_checks import MANIFEST_CHECKSUM, manifest_checksum
from benchlib.primitives.io import sha256_file


def copy_store(source: Path, target: Path) -> Path:
    """A copy of a store that a test may damage."""
    return Path(shutil.copytree(source, target))


def edit_manifest(store: Path, edit: Callable[[dict[str, Any]], Any]) -> None:
    """Change the manifest in place (no resealing: its own checksum then disagrees)."""
    manifest = json.loads((store / "manifest.json").read_text())
    result = edit(manifest)
    (store / "manifest.json").write_text(json.dumps(manifest if result is None else result))


def reseal(store: Path) -> None:
    """Record the current files' sizes and checksums and the manifest's own checksum, as a
    user who edits a store and its manifest consistently would: only validity checks remain."""
    manifest = json.loads((store / "manifest.json").read_text())
    for name in manifest["files"]:
        manifest["files"][name] = sha256_file(store / name)
        manifest["sizes"][name] = (store / name).stat().st_size
    manifest[MANIFEST_CHECKSUM] = manifest_checksum(manifest)
    (store / "manifest.json").write_text(json.dumps(manifest))
