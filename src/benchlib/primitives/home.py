"""benchlib's own folder: where its configs, paper values and reference digests are found,
wherever the workflow runs and however benchlib is installed.

Two kinds of files meet in a run. benchlib's own (``config/paper/*.yaml``, ``config/paper_values``,
``config/reference``) live in :func:`benchlib_dir`; the user's (their config, their data) live
in their project folder, the working directory. :func:`resolve_path` looks a relative path up in
the user's folder first and in benchlib's folder next, so a paper config's
``config/paper_values/fedagain.csv`` resolves from any project folder, and a user's file of the
same name takes precedence.

:func:`benchlib_dir` is, in this order: the folder of the Snakefile that is running (the
Snakefile calls :func:`use_workflow_dir`; this covers ``-s``, ``-d``, a Snakemake module and a
snakedeploy'd workflow, and the jobs it starts inherit it through ``BENCHLIB_HOME``); the source
checkout the package is imported from; or the copy of ``config/`` that a ``pip install``
bundled into the package.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from benchlib.primitives.errors import BenchlibError

ENV = "BENCHLIB_HOME"
MARKER = Path("config") / "paper"  # what makes a folder benchlib's own
PACKAGE = Path(__file__).resolve().parents[1]  # benchlib's package folder
BUNDLED = PACKAGE / "_home"  # config/ copied in by a non-editable pip install (setup.py)


def _is_home(folder: Path) -> bool:
    return (folder / MARKER).is_dir()


def use_workflow_dir(folder: str | Path) -> None:
    """Make ``folder`` (the running Snakefile's folder), or its parent (a ``workflow/Snakefile``
    layout), benchlib's folder for this process and the jobs it starts, if it holds benchlib's
    configs (a remote Snakefile does not: then the checkout or the bundled copy serves)."""
    folder = Path(folder).resolve()
    for candidate in (folder, folder.parent):
        if _is_home(candidate):
            os.environ[ENV] = str(candidate)
            return


def benchlib_dir() -> Path:
    """benchlib's own folder (see the module docstring); one clear error when there is none."""
    candidates = []
    if os.environ.get(ENV):
        candidates.append(Path(os.environ[ENV]))
    candidates += [PACKAGE.parents[1], BUNDLED]  # the checkout of a src layout; the bundle
    for folder in candidates:
        if _is_home(folder):
            return folder.resolve()
    raise BenchlibError(
        f"benchlib's own configs ({MARKER}) are neither beside the running Snakefile nor in the "
        f"installed package; set {ENV} to a benchlib checkout or reinstall benchlib with pip"
    )


def resolve_path(path: str | Path, what: str) -> Path:
    """An existing absolute path for ``path``: absolute as given, else the user's folder (the
    working directory) first and benchlib's folder next. ``what`` names the setting in the
    error, which lists every place tried."""
    path = Path(path).expanduser()
    if path.is_absolute():
        candidates = [path]
    else:
        candidates = [Path.cwd() / path]
        with contextlib.suppress(BenchlibError):  # no benchlib folder: the user's only
            candidates.append(benchlib_dir() / path)
    for candidate in candidates:
        if candidate.exists():
            return candidate.resolve()
    tried = ", ".join(str(c) for c in candidates)
    raise BenchlibError(f"{what}: {path} not found (tried {tried}); give an existing path")
