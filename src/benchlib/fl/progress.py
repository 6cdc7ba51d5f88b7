"""Live progress of a cell: ``progress.jsonl`` beside its metrics.json, one JSON line per round.

The engine appends a line as soon as a round has trained, aggregated and been validated (before
the round's checkpoint is written). A line holds:

- ``round`` (0-based, the index into metrics.json's history), ``rounds`` (the cell's total),
  ``seconds`` (the round's training, aggregation and validation time) and ``time`` (Unix time
  when the line was written); ``pid`` and ``host``: the process that runs the cell (``benchlib
  status`` tells a dead cell from a running one by them);
- ``clients`` (the federation's client ids) and ``val_<metric>`` (each one's primary validation
  metric, ``null`` when not finite), ``mean_val``;
- the round's share of the method's history: ``selections`` and ``scores`` (P2P peer choices and
  trust scores, when the method records them), ``schedule`` (the malfunctions applied),
  ``nonfinite`` and ``round_metrics`` (when present);
- ``val_loss`` (each client's validation loss), only with ``training.tensorboard``
  (:mod:`benchlib.fl.tensorboard`).

Resume: the first round a (resumed) run trains drops every line of that round or later, so the
file always holds exactly one line per round that the current checkpoint chain has finished
(a run killed after a line but before its checkpoint re-runs that round and rewrites its line).
The file is never a declared Snakemake output and never changes metrics.json.

Reading needs no torch: ``benchlib status`` uses :func:`read_progress`.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

from benchlib.primitives.durations import format_duration
from benchlib.primitives.io import loads_json

PROGRESS_NAME = "progress.jsonl"


def progress_path(metrics_path: str | Path) -> Path:
    """The progress file of the cell whose metrics are written to ``metrics_path``."""
    return Path(metrics_path).parent / PROGRESS_NAME


def read_progress(path: str | Path) -> list[dict[str, Any]]:
    """The complete lines of a progress file (none when it is missing; a torn last line, as a
    concurrent write may leave it, is skipped)."""
    try:  # a damaged byte spoils only its line
        text = Path(path).read_bytes().decode("utf-8", errors="replace")
    except OSError:  # missing, a folder, unreadable: no progress to show
        return []
    entries = []
    for line in text.splitlines():
        try:
            entry = loads_json(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("round"), int):
            entries.append(entry)
    return entries


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def round_entry(
    cell: Any, round_index: int, seconds: float, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The progress line of ``cell``'s (an :class:`benchlib.fl.engine.CellRun`) finished round."""
    history = cell.history
    val = list(history.val[round_index])
    finite = [v for v in val if v is not None]
    entry: dict[str, Any] = {
        "round": round_index,
        "rounds": cell.rounds,
        "seconds": seconds,
        "time": time.time(),
        "pid": os.getpid(),
        "host": platform.node(),
        "clients": list(cell.federation),
        f"val_{history.metric}": val,
        "mean_val": sum(finite) / len(finite) if finite else None,
    }
    if len(history.selections) > round_index and any(history.selections[round_index]):
        entry["selections"] = history.selections[round_index]
    if len(history.scores) > round_index and any(history.scores[round_index]):
        entry["scores"] = history.scores[round_index]
    if len(history.schedule) > round_index:
        entry["schedule"] = history.schedule[round_index]
    nonfinite = [n for n in history.nonfinite if n.get("round") == round_index]
    if nonfinite:
        entry["nonfinite"] = nonfinite
    if len(history.round_metrics) > round_index:
        entry["round_metrics"] = history.round_metrics[round_index]
    entry.update(extra or {})
    return _finite(entry)


def _keep_rounds_before(path: Path, first_round: int) -> None:
    """Drop the lines of ``first_round`` and later (rounds a resumed run trains again)."""
    kept = [e for e in read_progress(path) if e["round"] < first_round]
    if not kept:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in kept))
    os.replace(tmp, path)


def record_round(
    metrics_path: str | Path,
    cell: Any,
    round_index: int,
    seconds: float,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Append ``cell``'s finished round (plus ``extra`` keys) to the progress file beside
    ``metrics_path``; the first round a run trains (``cell.start_round``) first drops stale
    lines."""
    path = progress_path(metrics_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if round_index == cell.start_round:
        _keep_rounds_before(path, round_index)
    entry = round_entry(cell, round_index, seconds, extra)
    with open(path, "a") as handle:
        handle.write(json.dumps(entry, separators=(",", ":"), allow_nan=False) + "\n")
    return entry


def eta_text(round_seconds: list[float], remaining_rounds: int) -> str:
    """The ETA of a cell's remaining rounds from the mean of its measured round times."""
    if remaining_rounds <= 0:
        return "0s"
    if not round_seconds:
        return "unknown"
    return format_duration(sum(round_seconds) / len(round_seconds) * remaining_rounds)
