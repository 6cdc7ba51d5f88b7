"""Where a run's numbers came from: code version, library versions, device and CPU kernels.

Every cell's metrics.json carries :func:`cell_provenance` under ``provenance``; ``benchlib
--version`` prints :func:`version_line`. Where the code came from (:func:`git_state`): the
checkout that holds this package (an editable install, ``PYTHONPATH``), else what a ``pip
install`` recorded when it built the package (``_origin.json``, setup.py: the clone's commit, or
none for a package built without git), so a cell always names its code by commit or version.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import benchlib
from benchlib.grid.plugin_use import PARTITIONER, SOURCE

PACKAGE_ROOT = Path(benchlib.__file__).resolve().parents[2]  # the checkout of a src layout
ORIGIN = Path(benchlib.__file__).resolve().parent / "_origin.json"  # written by a pip install
CHECKOUT, CLONE, PACKAGE = "git checkout", "git clone", "package"  # installed_from values


@functools.cache
def git_state(root: Path = PACKAGE_ROOT, origin: Path = ORIGIN) -> dict[str, Any]:
    """``{"commit", "dirty", "installed_from"}``: the commit and uncommitted changes of the
    checkout at ``root`` (``installed_from`` "git checkout"); else those recorded in ``origin``
    by the pip install that built the package ("git clone", or "package" with commit None when
    it was built without git); else commit None, "package" (the version names the code)."""
    if not (root / ".git").exists():
        return _recorded_origin(origin)
    state = _checkout_state(root)
    return state if state["commit"] else _recorded_origin(origin)


def _recorded_origin(origin: Path) -> dict[str, Any]:
    import json

    try:
        recorded = json.loads(origin.read_text())
    except (OSError, ValueError):
        recorded = {}
    return {
        "commit": recorded.get("commit"),
        "dirty": recorded.get("dirty"),
        "installed_from": CLONE if recorded.get("commit") else PACKAGE,
    }


def _checkout_state(root: Path) -> dict[str, Any]:
    """The commit and uncommitted changes of the checkout at ``root`` (commit None if git
    cannot tell)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return {"commit": None, "dirty": None, "installed_from": CHECKOUT}
    status = git("status", "--porcelain", "--untracked-files=no")
    dirty = None if status is None else bool(status)
    return {"commit": commit, "dirty": dirty, "installed_from": CHECKOUT}


def version_line() -> str:
    """``benchlib 0.1.0 (commit abc1234, uncommitted changes)`` - what ``benchlib --version``
    prints; ``(commit abc1234, installed from a git clone)`` after a pip install of a clone,
    ``(package, no git commit)`` for a package built without git."""
    state = git_state()
    if not state["commit"]:
        return f"benchlib {benchlib.__version__} (package, no git commit)"
    dirty = ", uncommitted changes" if state["dirty"] else ""
    source = ", installed from a git clone" if state["installed_from"] == CLONE else ""
    return f"benchlib {benchlib.__version__} (commit {state['commit'][:12]}{dirty}{source})"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def plugins_used(
    spec: Any, dataset_source: str | None, partitioner: str | None
) -> dict[str, list[Any]]:
    """Which plugin packages cell ``spec`` used, for its provenance.

    ``plugins``: the packages (name, version) that provide a component the spec names
    (:meth:`~benchlib.grid.spec.CellSpec.components`) or the dataset source and partitioner that its
    store and split record. ``plugins_unknown``: the data components whose package cannot be
    named, so that a missing record is never read as "built-in": ``"dataset source"`` /
    ``"partitioner"`` where the store or split records none (written by an older benchlib),
    ``"<kind> <name>"`` where no installed package registers the recorded name (its plugin was
    uninstalled since).
    """
    from benchlib.data.partition import partitioner_names
    from benchlib.data.registry import dataset_names
    from benchlib.declarations import plugins

    components = spec.components()
    unknown = []
    for kind, name, registered in (
        (SOURCE, dataset_source, dataset_names),
        (PARTITIONER, partitioner, partitioner_names),
    ):
        if name is None:
            unknown.append(kind)
        elif name not in registered():
            unknown.append(f"{kind} {name}")
        else:
            components.append((kind, name))
    return {"plugins": plugins.used_by(components), "plugins_unknown": unknown}


def cell_provenance(
    device: Any, cpu_kernels: dict[str, Any], plugins: dict[str, list[Any]] | None = None
) -> dict[str, Any]:
    """The software and hardware facts a cell's numbers depend on (for metrics.json), with the
    plugin packages whose components the cell used (:func:`plugins_used`).

    Only facts that change the numbers: no host name, no clock time, so the same cell on the same
    software gives the same bytes on any machine where the kernels match.
    """
    import numpy
    import torch

    cuda = torch.version.cuda if torch.cuda.is_available() else None
    on_gpu = getattr(device, "type", str(device)) == "cuda"
    return {
        "benchlib": benchlib.__version__,
        **git_state(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": _version("torchvision"),
        "numpy": numpy.__version__,
        "cuda": cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
        "threads": torch.get_num_threads(),
        "cpu_kernels": cpu_kernels,
        "plugins": list((plugins or {}).get("plugins", [])),
        "plugins_unknown": list((plugins or {}).get("plugins_unknown", [])),
    }
