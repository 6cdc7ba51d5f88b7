"""Shared helpers of the per-round report kinds (LIGHTYEAR Figure 13, first version's Figures 8-9,
the agreement-score view): they read the cells' metrics.json files, whose ``history`` holds every
round's per-client validation metric and, for P2P methods, the receiver x sender scores.

No kind is registered here. Pandas and matplotlib are imported inside functions (Snakemake
imports the kind modules when it parses the workflow).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.malfunctions import NO_MALFUNCTION
from benchlib.primitives import layout
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import loads_json
from benchlib.report.base import ReportKind, check_known, check_outputs
from benchlib.report.figures import save_figure
from benchlib.report.statistics.table import per_round_stats

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig


def run_file(experiment: str, malfunction: str, method: str, k: int, seed: int) -> str:
    """The metrics.json of one cell (k = 0 cells run without malfunction)."""
    mal = NO_MALFUNCTION if k == 0 else malfunction
    return layout.run_metrics(experiment, mal, method, k, seed)


def check_methods(config: ReportConfig, experiment: str, methods: list[str]) -> None:
    check_known(config, experiment, "methods", methods, lambda m: f"method {m!r}")


def check_ks(config: ReportConfig, experiment: str, ks: list[int]) -> None:
    check_known(config, experiment, "k", ks, lambda k: f"k = {k}")


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON file, with one clear error when it is missing or broken."""
    require(Path(path).is_file(), f"{what} {path} not found; run its cell first")
    try:
        return loads_json(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise BenchlibError(f"{path} is not valid JSON; delete it and rerun its cell") from exc


def read_metrics(path: Path) -> dict[str, Any]:
    """One metrics.json, with one clear error when it is missing or broken."""
    return read_json(path, "metrics file")


def round_frame(runs: list[dict[str, Any]], inputs: list[Path]) -> pd.DataFrame:
    """Tidy per-round validation metric: one row per (run, round, client).

    ``runs`` are the spec's run entries (any JSON fields, copied into every row) in the order of
    ``inputs``; the value column is ``value`` (the history's ``val_<primary metric>``) and
    ``client`` counts the clients listed in the history (the federation).
    """
    import pandas as pd

    require(
        len(runs) == len(inputs),
        f"the spec names {len(runs)} runs but {len(inputs)} metrics files were given",
    )
    rows = []
    for run, path in zip(runs, inputs, strict=True):
        metrics = read_metrics(path)
        key = f"val_{metrics['primary_metric']}"
        require(key in metrics["history"], f"{path} has no per-round {key}")
        for round_index, values in enumerate(metrics["history"][key]):
            for client, value in enumerate(values):
                rows.append({**run, "round": round_index, "client": client, "value": value})
    require(bool(rows), "the metrics files hold no rounds")
    return pd.DataFrame(rows)


def scaled_round_stats(
    runs: list[dict[str, Any]], inputs: list[Path], by: list[str], scale: float
) -> pd.DataFrame:
    """:func:`per_round_stats` of the runs' :func:`round_frame`, mean and std times ``scale``."""
    stats = per_round_stats(round_frame(runs, inputs), by)
    return stats.assign(mean=stats["mean"] * scale, std=stats["std"] * scale)


class RunsFigure(ReportKind):
    """A figure kind drawn from the metrics.json files of the cells its spec lists in ``runs``.

    Subclasses implement :meth:`draw`; :meth:`render` writes its figure as PDF and PNG.
    """

    output = "figure"

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [run["path"] for run in spec["runs"]]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        check_outputs(self, outputs)
        save_figure(self.draw(spec, inputs), outputs[0], outputs[1])

    def draw(self, spec: dict[str, Any], inputs: list[Path]) -> Any:
        """The matplotlib figure (tests read its lines and images back)."""
        raise NotImplementedError
