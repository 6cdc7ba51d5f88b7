"""``benchlib status``: where a grid stands, also while Snakemake (local or SLURM) is running it.

It reads only files in the workflow's working directory, never a scheduler:

- ``results/runs/.../metrics.json``: the cell is **done** (unless the metrics were written for
  another cell config than the current one: then the workflow will run it again, so **pending**);
- Snakemake's records in ``.snakemake/`` (keyed by the urlsafe-base64 of the output path):
  an ``incomplete/`` marker of the cell's metrics.json means Snakemake started the job and has not
  finished it: **running** while a Snakemake holds the working directory's lock
  (``.snakemake/locks/``; on SLURM this includes jobs still queued), **failed** otherwise (an
  interrupted run: re-running resumes from its checkpoint). A ``metadata/`` record or a
  ``logs/run_cell/...`` log without metrics.json is a job that ended without its outputs:
  **failed** (Snakemake 9 keeps the record of a failed job);
- nothing of these: **pending**.

A lock outlives a Snakemake killed with ``kill -9``, so the lock alone never says that Snakemake
runs: on Linux, a Snakemake process of this host whose working directory is the workflow's must
hold it too (:func:`snakemake_processes`), else the lock is stale and the started cells are
**failed** (interrupted). A running cell's progress lines name the process that runs it
(``pid``, ``host``): when that process is gone (same host), or when no round has finished for
:data:`STALE_ROUNDS` times its round time (at least :data:`STALE_MIN_SECONDS`; another host),
the cell counts as **failed** and the lock as stale. Where no process table can be read (not
Linux), the lock and the cells' processes are all there is to go by. A cell whose models went
non-finite (metrics.json ``history.nonfinite``, or its progress lines) is listed as diverged.

The ETA comes from the measured round times in each cell's ``progress.jsonl``
(:mod:`benchlib.fl.progress`): a running cell needs its remaining rounds at its own mean round
time, a pending or failed one all its rounds at the experiment's mean round time; the grid's ETA
is that work spread over the cells running now (at least one); cells of an experiment with no
measured round yet are counted apart ("ETA at least ...").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from base64 import urlsafe_b64decode
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.fl.progress import progress_path, read_progress
from benchlib.primitives import layout
from benchlib.primitives.durations import format_duration
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.io import loads_json

if TYPE_CHECKING:
    from benchlib.configuration.config import Cell, Config

STATES = ("done", "running", "failed", "pending")
HELP = (
    "count a target's cells that are done, running, failed or pending, per experiment, with an "
    "ETA from the measured round times (works while Snakemake runs; reads .snakemake/ and "
    "progress.jsonl)"
)
MAX_LISTED = 10  # running and failed cells listed by name under the table
STALE_ROUNDS = 10  # a running cell with no round for this many round times is stalled...
STALE_MIN_SECONDS = 1800.0  # ...and for at least this long


def snakemake_keys(workdir: Path, kind: str) -> set[str]:
    """The output paths Snakemake holds a ``kind`` record of (``incomplete`` or ``metadata``).

    A record's file name is the urlsafe base64 of the path, cut into folder names prefixed
    with ``@`` when longer than the file system allows.
    """
    root = workdir / ".snakemake" / kind
    keys: set[str] = set()
    for folder, _, files in os.walk(root):
        for name in files:
            if name == "migration_underway":
                continue
            parts = (Path(folder) / name).relative_to(root).parts
            try:
                keys.add(urlsafe_b64decode("".join(p.removeprefix("@") for p in parts)).decode())
            except (ValueError, UnicodeDecodeError):
                continue  # not a record (a temporary file)
    return keys


def snakemake_running(workdir: Path) -> bool:
    """Whether the working directory's lock is taken (a Snakemake took it; whether that one
    still runs is :func:`snakemake_processes`'s to say)."""
    locks = workdir / ".snakemake" / "locks"
    return locks.is_dir() and any(p.name.endswith(".lock") for p in locks.iterdir())


def _runs_snakemake(argv: list[str]) -> bool:
    """``snakemake ...``, ``python .../bin/snakemake ...`` or ``python -m snakemake ...``."""
    return any(os.path.basename(arg) == "snakemake" for arg in argv[:3])


def snakemake_processes(workdir: Path, proc: Path = Path("/proc")) -> list[int] | None:
    """The pids of this host's Snakemake processes working in ``workdir`` (Snakemake changes
    into its ``--directory``), or None where the process table cannot be read (not Linux)."""
    if not (proc / "self" / "cwd").exists():
        return None
    target = workdir.resolve()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if _runs_snakemake(argv) and Path(os.readlink(entry / "cwd")) == target:
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or another user's process
            continue
    return found


def cell_log(cell: Cell) -> str:
    """The run_cell rule's log of ``cell`` (workflow/rules/train.smk)."""
    return f"logs/run_cell/{cell.id}.log"


@dataclass
class CellState:
    """Where one cell stands."""

    cell: str  # experiment/malfunction/method/kK/seedS
    experiment: str
    state: str
    rounds: int
    rounds_done: int = 0
    round_seconds: list[float] = field(default_factory=list)
    note: str = ""
    diverged: bool = False  # non-finite models in its history

    def mean_round(self) -> float | None:
        return sum(self.round_seconds) / len(self.round_seconds) if self.round_seconds else None


def _config_hash(config: Config, cell: Cell) -> str:
    return config.cell_spec(cell).config_hash()


def _read_metrics(metrics: Path) -> dict[str, Any] | None:
    try:
        data = loads_json(metrics.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process, or not a pid we can ask about
    return True


def stale_note(lines: list[dict[str, Any]], mean_round: float | None, now: float) -> str:
    """Why a cell that Snakemake counts as running is dead, or "" when it may be alive."""
    if not lines:
        return ""
    last = lines[-1]
    pid, host = last.get("pid"), last.get("host")
    if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and host == platform.node():
        if _pid_alive(pid):
            return ""
        return f"its process {pid} is gone (killed); the Snakemake lock here is stale"
    finished = last.get("time")
    if not isinstance(finished, int | float) or mean_round is None:
        return ""
    idle = now - float(finished)
    if idle > max(STALE_ROUNDS * mean_round, STALE_MIN_SECONDS):
        return (
            f"no round finished for {format_duration(idle)} (a round takes "
            f"{format_duration(mean_round)}): stalled or killed; the Snakemake lock here is "
            "stale if so"
        )
    return ""


def cell_state(
    config: Config,
    cell: Cell,
    workdir: Path,
    incomplete: set[str],
    recorded: set[str],
    locked: bool | None,
    now: float | None = None,
) -> CellState:
    """The state of one cell from the files in ``workdir`` (``locked``: whether a Snakemake
    holds the lock, None for a lock whose Snakemake is gone; ``now``: the Unix time to judge a
    stalled cell by; default the current time)."""
    metrics_key = cell.metrics_path
    metrics = workdir / metrics_key
    rounds = int(config.datasets[config.experiment_dataset(cell.experiment)]["training"]["rounds"])
    lines = read_progress(progress_path(metrics))
    state = CellState(cell.id, cell.experiment, "pending", rounds)
    lines = [e for e in lines if 0 <= e["round"] < rounds]  # a damaged line counts for nothing
    state.round_seconds = [float(e["seconds"]) for e in lines if _is_number(e.get("seconds"))]
    state.rounds_done = len({e["round"] for e in lines})
    state.diverged = any(e.get("nonfinite") for e in lines)
    if metrics.is_file():
        recorded_metrics = _read_metrics(metrics) or {}
        if recorded_metrics.get("config_hash") == _config_hash(config, cell):
            state.state, state.rounds_done = "done", rounds
            history = recorded_metrics.get("history")
            state.diverged = bool(isinstance(history, dict) and history.get("nonfinite"))
        else:
            state.note = other_config_note(recorded_metrics, config.cell_spec(cell))
    elif metrics_key in incomplete:
        stale = stale_note(lines, state.mean_round(), time.time() if now is None else now)
        if locked is None:
            state.state = "failed"
            state.note = stale or (
                "interrupted: no Snakemake runs here now (its lock is stale); running the "
                "workflow again resumes it"
            )
        elif locked:
            if stale:
                state.state, state.note = "failed", stale
            else:
                state.state = "running"
        else:
            state.state, state.note = "failed", "interrupted (no Snakemake runs here now)"
    elif metrics_key in recorded or (workdir / cell_log(cell)).is_file():
        state.state, state.note = "failed", f"see {cell_log(cell)}"
    return state


def other_config_note(recorded: dict[str, Any], planned: dict[str, Any]) -> str:
    """Why a finished cell's metrics.json is not this cell's: the plugin versions it was made
    with when those changed (``name version`` each, or ``built-ins only``), else its config."""
    made = recorded.get("config")
    made_with = (made.get("plugins") or {}) if isinstance(made, dict) else {}
    now = planned.get("plugins") or {}
    if isinstance(made, dict) and made_with != now:

        def text(plugins: dict[str, str]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(plugins.items())) or "built-ins only"

        return (
            f"metrics.json made with plugins {text(made_with)}, now {text(now)}: the workflow "
            "runs it again"
        )
    return "metrics.json of another cell config: the workflow runs it again"


def _is_number(value: Any) -> bool:
    """A finite, non-negative measured time (a damaged progress line may hold anything)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value < 1e9  # under 30 years a round
    )


def target_cells(config: Config, targets: list[str]) -> list[Cell]:
    """The cells that ``targets`` need: table/figure files or report names (their collected
    inputs' cells) or experiment names; every report's cells when there is no target."""
    reports = {}
    for report in config.reports.values():
        reports[report.name] = report
        for target in report.targets:
            reports[target] = report
    chosen: dict[Cell, None] = {}
    for target in targets or list(config.reports):
        if target in config.experiments:
            chosen.update(dict.fromkeys(config.cells(target)))
            continue
        if target not in reports:
            raise BenchlibError(
                f"unknown target {target!r}: name a table or figure file of the config "
                "(benchlib targets CONFIG), a report name or an experiment"
            )
        for path in reports[target].inputs:
            collected = layout.collected_from(path)
            if collected is None or collected[0] not in config.experiments:
                continue
            chosen.update(dict.fromkeys(config.cells(*collected)))
    return list(chosen)


def grid_status(
    config: Config, targets: list[str], workdir: Path, now: float | None = None
) -> dict[str, Any]:
    """Counts per experiment and state, the remaining work and the ETA, and every cell
    (``now``: the Unix time to judge stalled cells by; default the current time)."""
    incomplete = snakemake_keys(workdir, "incomplete")
    recorded = snakemake_keys(workdir, "metadata")
    locked = snakemake_running(workdir)
    processes = snakemake_processes(workdir) if locked else None
    orphaned = locked and processes == []  # the lock of a Snakemake that is gone
    cells = [
        cell_state(config, cell, workdir, incomplete, recorded, None if orphaned else locked, now)
        for cell in target_cells(config, targets)
    ]
    experiments: dict[str, dict[str, Any]] = {}
    for experiment in dict.fromkeys(c.experiment for c in cells):
        mine = [c for c in cells if c.experiment == experiment]
        measured = [s for c in mine for s in c.round_seconds]
        mean = sum(measured) / len(measured) if measured else None
        work: float | None = 0.0
        for c in mine:
            if c.state == "done":
                continue
            per_round = c.mean_round() if c.state == "running" and c.round_seconds else mean
            left = c.rounds - (c.rounds_done if c.state == "running" else 0)
            work = None if work is None or per_round is None else work + left * per_round
        experiments[experiment] = {
            **{s: sum(c.state == s for c in mine) for s in STATES},
            "cells": len(mine),
            "mean_round_seconds": mean,
            "work_seconds": work,
        }
    running = sum(e["running"] for e in experiments.values())
    known = [e["work_seconds"] for e in experiments.values() if e["work_seconds"] is not None]
    total = sum(known) if known else None
    unmeasured = sum(
        e["cells"] - e["done"] for e in experiments.values() if e["work_seconds"] is None
    )
    stale = orphaned or (
        locked and any("lock here is stale" in c.note for c in cells) and not running
    )
    return {
        "workdir": str(workdir),
        "snakemake_running": locked and not stale,
        "stale_lock": stale,
        "experiments": experiments,
        "work_seconds": total,  # of the experiments with a measured round time
        "unmeasured_cells": unmeasured,  # cells left of experiments without one
        "eta_seconds": None if total is None else total / max(1, running),
        "cells": [asdict(c) for c in cells],
    }


def _duration(seconds: float | None) -> str:
    return "unknown" if seconds is None else format_duration(seconds)


def format_status(status: dict[str, Any]) -> str:
    """The table ``benchlib status`` prints."""
    header = ["experiment", "cells", *STATES, "s/round", "work left"]
    rows = [
        [
            name,
            str(e["cells"]),
            *(str(e[s]) for s in STATES),
            "-" if e["mean_round_seconds"] is None else f"{e['mean_round_seconds']:.1f}",
            _duration(e["work_seconds"]),
        ]
        for name, e in status["experiments"].items()
    ]
    totals = [sum(e[s] for e in status["experiments"].values()) for s in ("cells", *STATES)]
    rows.append(["total", *map(str, totals), "", _duration(status["work_seconds"])])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            v.ljust(w) if i == 0 else v.rjust(w)
            for i, (v, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]
    done, cells = totals[1], totals[0]
    if done == cells:
        lines.append(f"all {cells} cells are done")
    else:
        running = totals[2]
        unmeasured = status["unmeasured_cells"]
        lines.append(
            f"ETA {'at least ' if unmeasured and status['eta_seconds'] is not None else ''}"
            f"{_duration(status['eta_seconds'])} (the work left over {max(1, running)} cell(s) "
            "in parallel"
            + (
                f", not counting {unmeasured} cell(s) with no measured round yet"
                if unmeasured
                else ""
            )
            + f"; Snakemake {'is running' if status['snakemake_running'] else 'is not running'}"
            " here)"
        )
    if status.get("stale_lock"):
        lines.append(
            "the Snakemake lock here is stale (the Snakemake that took it, or its cells' "
            "processes, are gone): run "
            "`snakemake --unlock` with the same config, then the workflow again (cells resume "
            "from their last checkpoint)"
        )
    for state in ("running", "failed"):
        listed = [c for c in status["cells"] if c["state"] == state]
        for c in listed[:MAX_LISTED]:
            detail = f"round {c['rounds_done']}/{c['rounds']}"
            if c["note"]:
                detail += f"; {c['note']}"
            lines.append(f"{state}: {c['cell']} ({detail})")
        if len(listed) > MAX_LISTED:
            lines.append(f"{state}: ... and {len(listed) - MAX_LISTED} more (--json lists all)")
    # finished cells whose metrics.json is not theirs any more (another config, plugin version)
    again = [c for c in status["cells"] if c["state"] == "pending" and c["note"]]
    for c in again[:MAX_LISTED]:
        lines.append(f"to run again: {c['cell']} ({c['note']})")
    if len(again) > MAX_LISTED:
        lines.append(f"to run again: ... and {len(again) - MAX_LISTED} more (--json lists all)")
    diverged = [c["cell"] for c in status["cells"] if c.get("diverged")]
    if diverged:
        more = f", ... and {len(diverged) - MAX_LISTED} more" if len(diverged) > MAX_LISTED else ""
        lines.append(
            f"{len(diverged)} diverged (non-finite models): "
            f"{', '.join(diverged[:MAX_LISTED])}{more}; tables mark their values"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``benchlib status`` arguments."""
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="table/figure file, report name or experiment (default: every report's cells)",
    )
    parser.add_argument(
        "--config", default=None, help="config file or folder (default config/paper)"
    )
    parser.add_argument(
        "-d", "--directory", default=".", help="the workflow's working directory (default .)"
    )
    parser.add_argument("--json", action="store_true", help="print the status as JSON")


def cmd_status(args: argparse.Namespace) -> None:
    from benchlib.configuration.config import Config
    from benchlib.grid.paper_configs import load_raw_config

    workdir = Path(args.directory)
    if not workdir.is_dir():  # else every cell would look pending
        raise BenchlibError(f"{workdir} is not a folder; pass the workflow's working directory")
    config = Config(load_raw_config(args.config))
    status = grid_status(config, list(args.targets), workdir)
    print(json.dumps(status, indent=1) if args.json else format_status(status))
