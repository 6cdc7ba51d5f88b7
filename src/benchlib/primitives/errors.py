"""User-facing errors: one line that names the problem and the fix."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path


class BenchlibError(Exception):
    """An error caused by bad input (config, data, files) rather than a bug.

    The CLI prints ``error: <message>`` on one line and exits non-zero, without a traceback.
    """


def require(condition: bool, message: str) -> None:
    """Raise :class:`BenchlibError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise BenchlibError(message)


# Optional packages -> the extra of pyproject.toml that installs them.
EXTRAS = {
    "monai": "medical",
    "nibabel": "medical",
    "imagecorruptions": "fedagain",
    "flwr": "bench",
    "snakemake": "workflow",
    "snakemake_executor_plugin_slurm": "workflow",
    "tensorboard": "tracking",
}


def missing_extra(exc: ModuleNotFoundError) -> BenchlibError | None:
    """The clear error for an optional package that is not installed (None for any other)."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return BenchlibError(
        f"{top} is not installed; it comes with the {extra} extra: pip install 'benchlib[{extra}]'"
    )


# errno -> (what happened, the fix); the file system faults every subcommand may meet
_OS_FAULTS = {
    errno.ENOSPC: ("no space left on the device of {path}{free}", "free some space and rerun"),
    errno.EDQUOT: ("disk quota exceeded writing {path}{free}", "free some space and rerun"),
    errno.EROFS: (
        "{path} is on a read-only file system",
        "run from (or write the outputs to) a writable folder",
    ),
    errno.EACCES: ("permission denied: {path}", "fix its permissions or write elsewhere"),
    errno.EPERM: ("operation not permitted: {path}", "fix its permissions or write elsewhere"),
    errno.EISDIR: ("{path} is a folder", "give the path of a file"),
    errno.ENOTDIR: ("a parent of {path} is a file, not a folder", "fix the path"),
    errno.ENOENT: ("{path} does not exist (or its folder cannot hold files)", "fix the path"),
}


def _free_space(path: str) -> str:
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if free < 1024 or unit == "TiB":
            return f" ({free:.0f} {unit} free)" if unit == "B" else f" ({free:.1f} {unit} free)"
        free /= 1024
    return ""


def os_fault(exc: OSError) -> BenchlibError | None:
    """The one-line error of a file-system fault (full disk, read-only, no permission), or None
    for any other OSError (a bug or a fault this table does not know)."""
    fault = _OS_FAULTS.get(exc.errno or -1)
    if fault is None:
        return None
    path = str(exc.filename) if exc.filename is not None else "a file"
    free = _free_space(path) if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    problem, fix = fault
    return BenchlibError(f"{problem.format(path=path, free=free)}; {fix}")
