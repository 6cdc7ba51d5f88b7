"""Shared helpers of the TFL cost and figure kinds: which cells a report reads, a cell's mean
metric over its in-federation (IF) or out-of-federation (OOF) clients, and its wall-clock time.

No kind is registered here. A cell's wall-clock time comes from its ``timing.json`` (written by
``benchlib run`` next to metrics.json): ``round_seconds`` holds the time of every round the last
call ran (training, aggregation, the method's server work such as TFL's topology and dual step,
any ``training.round_metrics`` evaluation, the round checkpoint). A cell that ran in one go has
every round; a resumed cell has only the rounds after the resume, and its total is estimated as
their mean times the cell's rounds (flagged ``estimated``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.errors import BenchlibError, require
from benchlib.report.base import check_experiments
from benchlib.report.kinds.tfl_table import SCOPES, cell_value

if TYPE_CHECKING:
    from benchlib.config import Config


def scope_schema() -> dict[str, Any]:
    """The JSON schema of a report's ``scope`` parameter (``if`` or ``oof``)."""
    return {"enum": list(SCOPES)}


def check_methods_of(config: Config, name: str, experiment: str, methods: list[str]) -> None:
    """Every method must be one of the experiment's."""
    missing = [m for m in methods if m not in config.experiments[experiment]["methods"]]
    require(not missing, f"reports.{name}: experiment {experiment} has no methods {missing}")


def check_scope(config: Config, name: str, experiment: str, scope: str) -> None:
    """An OOF scope needs held-out clients in the experiment's dataset."""
    if scope == "oof":
        dataset = config.datasets[config.experiments[experiment]["dataset"]]
        require(
            bool(dataset.get("held_out")),
            f"reports.{name}: scope oof but experiment {experiment} holds out no clients; set "
            "its dataset's held_out",
        )


def cell_runs(
    config: Config, name: str, experiments: list[str], methods: list[str]
) -> list[dict[str, Any]]:
    """One entry per cell of ``methods`` in ``experiments`` (experiment order, then the config's
    cell order): experiment, method, seed, ``path`` (metrics.json) and ``timing``."""
    check_experiments(config, experiments)
    runs = []
    for experiment in experiments:
        check_methods_of(config, name, experiment, methods)
        for cell in config.cells(experiment):
            if cell.method in methods:
                runs.append(
                    {
                        "experiment": experiment,
                        "method": cell.method,
                        "seed": cell.seed,
                        "path": f"{cell.run_dir}/metrics.json",
                        "timing": f"{cell.run_dir}/timing.json",
                    }
                )
    return runs


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON file, with one clear error when it is missing or broken."""
    require(Path(path).is_file(), f"{what} {path} not found; run its cell first")
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise BenchlibError(f"{path} is not valid JSON; delete it and rerun its cell") from exc


def scope_mean(metrics: dict[str, Any], scope: str, metric: str, where: str) -> float:
    """Mean test ``metric`` over the scope's clients (IF: federation, OOF: held-out)."""
    return cell_value(metrics, scope, f"test_{metric}", where)


def total_seconds(timing: dict[str, Any], rounds: int, where: str) -> tuple[float, bool]:
    """(wall-clock seconds of the cell's ``rounds`` rounds, whether the total is estimated)."""
    seconds = timing.get("round_seconds")
    require(
        isinstance(seconds, list) and len(seconds) > 0,
        f"{where} has no round_seconds; rerun the cell (benchlib run --timing writes them)",
    )
    resumed = int(timing.get("resumed_from_round", 0))
    if resumed == 0 and len(seconds) == rounds:
        return float(sum(seconds)), False
    return float(sum(seconds)) / len(seconds) * rounds, True


def rounds_of(metrics: dict[str, Any]) -> int:
    """How many rounds the cell ran (its per-round validation history)."""
    history = metrics.get("history", {})
    key = f"val_{metrics.get('primary_metric', 'accuracy')}"
    return len(history.get(key, []))
