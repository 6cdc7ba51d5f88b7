"""Checks of a Snakemake run before benchlib reads its config: the config files read strictly
(also when benchlib is a module of another workflow), and a word when another Snakemake runs in
the same folder.

Snakemake parses YAML itself, where the last of two equal keys wins silently and aliases expand
unchecked. As a module of another workflow, benchlib receives the config only as a parsed dict
(``module benchlib: config: config``), so :func:`check_config_files` reads every config file the
workflow loaded (``workflow.configfiles``: its ``configfile:`` directives and ``--configfile``)
again with benchlib's strict loader, and refuses a config that no file holds, which cannot be
checked. :func:`concurrent_note` explains what Snakemake's own advice hides while a first run is
still going: the files it builds look incomplete to a second Snakemake, which then suggests
``--cleanup-metadata`` or ``--rerun-incomplete`` (and a locked folder ``--unlock``). Torch-free.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchlib.primitives.errors import BenchlibError


def check_config_files(configfiles: Sequence[str | Path], config: Mapping[str, Any]) -> None:
    """Read each of ``configfiles`` with the strict loader (duplicate keys, alias bombs); a config
    with experiments but no file behind it is refused, as it cannot be checked."""
    from benchlib.configuration.config import load_config_file

    for path in configfiles:
        load_config_file(path)
    if not configfiles and "experiments" in config:
        raise BenchlibError(
            "benchlib received a config that no config file holds (a Snakemake module's "
            "`config:` built in Python?), so its duplicate keys and YAML aliases cannot be "
            'checked; load it from a file (`configfile: "config/config.yaml"`) and pass that: '
            "`config: config`"
        )


def _ancestors(pid: int, proc: Path) -> set[int]:
    """``pid`` and the processes it descends from (their /proc ``stat`` parent ids)."""
    found = set()
    while pid > 0 and pid not in found:
        found.add(pid)
        try:
            stat = (proc / str(pid) / "stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def concurrent_note(workdir: Path, proc: Path = Path("/proc")) -> str | None:
    """A note when another Snakemake of this host holds ``workdir``'s lock, or None."""
    from benchlib.commands.status import snakemake_processes, snakemake_running

    if not snakemake_running(workdir):
        return None
    running = snakemake_processes(workdir, proc) or []
    others = sorted(set(running) - _ancestors(os.getpid(), proc))
    if not others:
        return None
    return (
        f"note: another Snakemake (pid {others[0]}) is running in {workdir.resolve()}: the files "
        "it is building look incomplete to this one, and its lock is not stale. Wait for it "
        "(`benchlib status` shows how far it is) rather than run `--cleanup-metadata`, "
        "`--rerun-incomplete` or `--unlock`, which would take its unfinished files as complete "
        "or build them twice at once"
    )


def guard(workflow: Any, config: Mapping[str, Any]) -> None:
    """The Snakefile's hook: the config files checked (exit 1 with one ``error:`` line), and the
    note on a concurrent Snakemake (not in jobs Snakemake runs itself)."""
    try:
        check_config_files(list(workflow.configfiles), config)
    except BenchlibError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(1)
    if not (workflow.remote_exec or workflow.subprocess_exec):
        note = concurrent_note(Path.cwd())
        if note:
            sys.stderr.write(note + "\n")
