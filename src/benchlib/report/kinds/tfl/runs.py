"""Shared helpers of the TFL cost and figure kinds: their parameters and specs, which cells a
report reads, reading those cells back grouped by method, a cell's mean metric over its
in-federation (IF) or out-of-federation (OOF) clients, and its wall-clock time.

No kind is registered here. A cell's wall-clock time comes from its ``timing.json`` (written by
``benchlib run`` next to metrics.json): ``round_seconds`` holds the time of every round the last
call ran (training, aggregation, the method's server work such as TFL's topology and dual step,
any ``training.round_metrics`` evaluation, the round checkpoint). A cell that ran in one go has
every round; a resumed cell has only the rounds after the resume, and its total is estimated as
their mean times the cell's rounds (flagged ``estimated``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from benchlib.declarations.params import Param
from benchlib.primitives.errors import require
from benchlib.report.base import check_experiments, derived_param, required_param
from benchlib.report.kinds.common.history import read_json
from benchlib.report.statistics.table import METRIC_PATTERN

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig
    from benchlib.report.statistics.table import MetricDisplay

T = TypeVar("T")

SCOPES = {"if": "clients", "oof": "held_out_clients"}  # scope -> metrics.json key
SCOPE_NAMES = {"if": "IF", "oof": "OOF"}  # scope -> its name in captions and axis labels
# a parameter listing ids (methods, experiments): at least one
NAMES_PARAM = {"type": "array", "minItems": 1, "items": {"type": "string"}}
# the parameters naming the one cell a single-cell figure draws
CELL_PARAMS: dict[str, Param] = {
    "experiment": required_param({"type": "string"}, "the cell's experiment"),
    "method": required_param({"type": "string"}, "the cell's method: one of the experiment's"),
    "seed": derived_param(
        {"type": "integer", "minimum": 0}, "the cell's seed", "the experiment's first seed"
    ),
}


# ----------------------------------------------------------------------- parameters and specs
def methods_params(
    selection: dict[str, Param], metric: str, scope: bool = True, **extra: Param
) -> dict[str, Param]:
    """The parameters of a kind over several methods' cells, in this order: ``selection`` (the
    cells' experiments), methods, metric (default ``metric``), the scope (``if``/``oof``, unless
    ``scope`` is False), ``extra`` and title."""
    params = {
        **selection,
        "methods": required_param(NAMES_PARAM, "the methods shown, in this order"),
        "metric": Param(
            {"type": "string", "pattern": METRIC_PATTERN}, metric, "the cells' test metric"
        ),
    }
    if scope:
        params["scope"] = Param(
            {"enum": list(SCOPES)}, "oof", "clients scored: if = the federation's, oof = held out"
        )
    title = derived_param({"type": "string"}, "the title", "the report's name")
    return {**params, **extra, "title": title}


def methods_spec(
    name: str,
    params: dict[str, Any],
    config: ReportConfig,
    display: MetricDisplay,
    runs: list[dict[str, Any]],
    **selection: Any,
) -> dict[str, Any]:
    """The spec fields of a kind over several methods' cells: name, the metric display,
    ``selection`` (e.g. the scope), ``[[method id, label]]``, the cells' runs and the title."""
    return {
        "name": name,
        **display.as_spec(),
        **selection,
        "methods": [[m, config.method_label(m)] for m in params["methods"]],
        "runs": runs,
        "title": params["title"] if params["title"] is not None else name,
    }


def check_methods_of(config: ReportConfig, name: str, experiment: str, methods: list[str]) -> None:
    """Every method must be one of the experiment's."""
    missing = [m for m in methods if m not in config.experiments[experiment]["methods"]]
    require(not missing, f"reports.{name}: experiment {experiment} has no methods {missing}")


def check_scope(config: ReportConfig, name: str, experiment: str, scope: str) -> None:
    """An OOF scope needs held-out clients in the experiment's dataset."""
    if scope == "oof":
        dataset = config.datasets[config.experiments[experiment]["dataset"]]
        require(
            bool(dataset.get("held_out")),
            f"reports.{name}: scope oof but experiment {experiment} holds out no clients; set "
            "its dataset's held_out",
        )


def scoped_runs(
    config: ReportConfig, name: str, experiments: list[str], params: dict[str, Any]
) -> tuple[list[dict[str, Any]], str]:
    """(:func:`cell_runs` of the report's methods in ``experiments``, the report's ``scope``
    parameter (default ``oof``) checked against every experiment)."""
    runs = cell_runs(config, name, experiments, params["methods"])
    scope = params["scope"]
    for experiment in experiments:
        check_scope(config, name, experiment, scope)
    return runs, scope


def cell_runs(
    config: ReportConfig, name: str, experiments: list[str], methods: list[str]
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
                        "path": cell.metrics_path,
                        "timing": cell.timing_path,
                    }
                )
    return runs


def single_cell(config: ReportConfig, name: str, params: dict[str, Any]) -> tuple[str, str]:
    """(metrics.json of the one cell ``params`` names by :data:`CELL_PARAMS`, the default title
    "method label, experiment")."""
    experiment, method = params["experiment"], params["method"]
    check_experiments(config, [experiment])
    exp = config.experiments[experiment]
    require(method in exp["methods"], f"reports.{name}: {experiment} has no method {method}")
    seed = params["seed"] if params["seed"] is not None else exp["seeds"][0]
    require(seed in exp["seeds"], f"reports.{name}: {experiment} has no seed {seed}")
    cells = [c for c in config.cells(experiment) if c.method == method and c.seed == seed]
    require(len(cells) == 1, f"reports.{name}: expected one cell, found {len(cells)}")
    return cells[0].metrics_path, f"{config.method_label(method)}, {experiment}"


# ----------------------------------------------------------------------- reading the cells
def run_metrics(
    spec: dict[str, Any], inputs: list[Path]
) -> Iterator[tuple[dict[str, Any], dict[str, Any], str]]:
    """(run entry, its metrics.json, the file's path) per run of the spec; ``inputs`` are the
    runs' metrics files in spec order."""
    for run, path in zip(spec["runs"], inputs, strict=True):
        yield run, read_json(path, "metrics file"), str(path)


@dataclass(frozen=True)
class TimedRun:
    """One run of the spec with its metrics.json and its wall-clock time."""

    run: dict[str, Any]
    metrics: dict[str, Any]
    where: str  # the metrics file, for error messages
    rounds: int
    seconds: float  # all ``rounds`` rounds
    estimated: bool  # resumed: ``seconds`` estimated from the rounds measured


def timed_inputs(spec: dict[str, Any]) -> list[str]:
    """The metrics.json and timing.json of every run, in spec order (what :func:`timed_runs`
    reads)."""
    return [p for run in spec["runs"] for p in (run["path"], run["timing"])]


def timed_runs(spec: dict[str, Any], inputs: list[Path], output: str) -> dict[str, list[TimedRun]]:
    """:func:`by_method` over the spec's runs with their wall-clock times; ``inputs`` as
    :func:`timed_inputs`."""
    require(
        len(inputs) == 2 * len(spec["runs"]),
        f"{spec['name']}: expected a metrics.json and a timing.json per run, in spec order",
    )
    timed = []
    for i, run in enumerate(spec["runs"]):
        metrics_path, timing_path = Path(inputs[2 * i]), Path(inputs[2 * i + 1])
        metrics = read_json(metrics_path, "metrics file")
        timing = read_json(timing_path, "timing file")
        rounds = rounds_of(metrics)
        require(rounds > 0, f"{metrics_path} records no rounds")
        seconds, estimated = total_seconds(timing, rounds, str(timing_path))
        cell = TimedRun(run, metrics, str(metrics_path), rounds, seconds, estimated)
        timed.append((run["method"], cell))
    return by_method(spec, timed, output)


def by_method(
    spec: dict[str, Any], values: Iterable[tuple[str, T]], output: str
) -> dict[str, list[T]]:
    """method id -> its values in run order, for every method of the spec (each must have at
    least one cell; ``output`` names the report in that error: table or figure)."""
    found: dict[str, list[T]] = {m: [] for m, _ in spec["methods"]}
    for method, value in values:
        found[method].append(value)
    for method, entries in found.items():
        require(bool(entries), f"{output} {spec['name']}: no cells of {method}")
    return found


def scope_mean(metrics: dict[str, Any], scope: str, metric: str, where: str) -> float:
    """Mean test ``metric`` over the scope's clients (IF: federation, OOF: held-out)."""
    return cell_value(metrics, scope, f"test_{metric}", where)


def seed_mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population std (ddof 0) over a method's seeds."""
    import numpy as np

    return float(np.mean(values)), float(np.std(values))


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


# ----------------------------------------------------------------------- drawing
def score_label(display: MetricDisplay, scope: str | None = None) -> str:
    """A figure's score axis: "[IF |OOF ]test <metric>[ (%)]"."""
    prefix = f"{SCOPE_NAMES[scope]} " if scope else ""
    return f"{prefix}test {display.label}{' (%)' if display.percent else ''}"


POOLINGS = ("pooled", "clients")  # a scope's score: pooled predictions, or the client mean


def pooled_value(metrics: dict[str, Any], scope: str, column: str, where: str) -> float:
    """The scope's score of one metrics.json from its pooled predictions (``pooled``): e.g. the
    global test accuracy, one ROC-AUC over every held-out client's samples, the MSE over all."""
    metric = column.removeprefix("test_")
    pooled = metrics.get("pooled")
    require(
        isinstance(pooled, dict),
        f"{where} records no pooled scores (metrics.json pooled); rerun the cell with this "
        "benchlib, or set the report's pooling: clients",
    )
    scores = pooled.get(scope)
    require(isinstance(scores, dict), f"{where} has no pooled {scope.upper()} scores")
    require(metric in scores, f"{where}: pooled {scope.upper()} scores lack {metric}")
    value = scores[metric]
    require(value is not None, f"{where}: the pooled {scope.upper()} {metric} is undefined")
    return float(value)


def cell_value(
    metrics: dict[str, Any], scope: str, column: str, where: str, pooling: str = "clients"
) -> float:
    """The scope's ``column`` of one metrics.json: with ``pooling: clients`` the mean over the
    scope's clients, with ``pooled`` the score of their pooled predictions
    (:func:`pooled_value`).

    Client mean: clients whose value is undefined (``null``: e.g. ROC-AUC of a test set holding
    one class, as small eICU hospitals have) are left out; at least one client must have a value.
    """
    require(pooling in POOLINGS, f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if pooling == "pooled":
        return pooled_value(metrics, scope, column, where)
    key = SCOPES[scope]
    clients = metrics.get(key) or []
    require(bool(clients), f"{where} has no {key}; an OOF row needs held-out clients (held_out)")
    require(all(column in c for c in clients), f"{where}: {column} is missing")
    values = [c[column] for c in clients if c[column] is not None]
    require(bool(values), f"{where}: {column} is undefined or not finite for every client")
    return float(sum(values) / len(values))


def round_means(metrics: dict[str, Any], scope: str, metric: str, where: str) -> list[float]:
    """Per round, the mean ``metric`` over the scope's clients (NaN when none is defined)."""
    rounds = metrics.get("history", {}).get("round_metrics") or []
    require(
        bool(rounds),
        f"{where} records no per-round test metrics; set training.round_metrics: [{metric}] in "
        "the dataset and rerun the cell",
    )
    out = []
    for index, entry in enumerate(rounds):
        clients = entry.get(SCOPES[scope]) or []
        require(bool(clients), f"{where}: round {index} has no {SCOPES[scope]}")
        require(
            all(metric in c for c in clients),
            f"{where}: round {index} lacks {metric}; add it to training.round_metrics",
        )
        defined = [c[metric] for c in clients if c[metric] is not None]
        out.append(sum(defined) / len(defined) if defined else float("nan"))
    return out
