"""Score vs measured wall-clock time, one point per method (TFL Figure 2: PACS OOF accuracy vs
wall-clock time).

y: the mean test metric over the scope's clients (default OOF), averaged over seeds per
experiment, then over the experiments (for a leave-one-domain-out grid: the average over the
held-out domains, Table 1's "Avg." column). x: the cells' wall-clock time (sum of their round
times, :mod:`tfl_runs`), averaged over all the method's cells. Config entry::

    reports:
      tfl_fig2:
        kind: tfl_time_figure
        experiments: [tfl_pacs__held_out_0_1_2_3_4, tfl_pacs__held_out_5_6_7_8_9]
        methods: [fedavg, fedprox, drfa, fedsr, tfl]
        metric: accuracy
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from benchlib.errors import require
from benchlib.report.base import register_kind
from benchlib.report.figures import pyplot
from benchlib.report.kinds.history import RunsFigure
from benchlib.report.kinds.tfl_runs import (
    cell_runs,
    check_scope,
    read_json,
    rounds_of,
    scope_mean,
    scope_schema,
    total_seconds,
)
from benchlib.report.stats import METRIC_PATTERN, MetricDisplay

if TYPE_CHECKING:
    from benchlib.config import Config


@register_kind
class TflTimeFigure(RunsFigure):
    name = "tfl_time_figure"
    required = ("experiments", "methods")
    params: ClassVar[dict[str, Any]] = {
        "experiments": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "methods": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "metric": {"type": "string", "pattern": METRIC_PATTERN},
        "scope": scope_schema(),
        "title": {"type": "string"},
    }

    def spec(self, name: str, params: dict[str, Any], config: Config) -> dict[str, Any]:
        runs = cell_runs(config, name, params["experiments"], params["methods"])
        scope = params.get("scope", "oof")
        for experiment in params["experiments"]:
            check_scope(config, name, experiment, scope)
        return {
            "name": name,
            **MetricDisplay.resolve(params.get("metric", "accuracy")).as_spec(),
            "scope": scope,
            "methods": [[m, config.method_label(m)] for m in params["methods"]],
            "runs": runs,
            "title": params.get("title", name),
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [p for run in spec["runs"] for p in (run["path"], run["timing"])]

    def points(self, spec: dict[str, Any], inputs: list[Path]) -> dict[str, tuple[float, float]]:
        """method id -> (mean wall-clock seconds, score averaged as described above; unscaled)."""
        import numpy as np

        require(
            len(inputs) == 2 * len(spec["runs"]),
            f"{spec['name']}: expected a metrics.json and a timing.json per run, in spec order",
        )
        scores: dict[str, dict[str, list[float]]] = {m: {} for m, _ in spec["methods"]}
        seconds: dict[str, list[float]] = {m: [] for m, _ in spec["methods"]}
        for i, run in enumerate(spec["runs"]):
            metrics_path, timing_path = Path(inputs[2 * i]), Path(inputs[2 * i + 1])
            metrics = read_json(metrics_path, "metrics file")
            timing = read_json(timing_path, "timing file")
            value = scope_mean(metrics, spec["scope"], spec["metric"], str(metrics_path))
            scores[run["method"]].setdefault(run["experiment"], []).append(value)
            seconds[run["method"]].append(
                total_seconds(timing, rounds_of(metrics), str(timing_path))[0]
            )
        out = {}
        for method_id, per_experiment in scores.items():
            require(bool(per_experiment), f"figure {spec['name']}: no cells of {method_id}")
            score = float(np.mean([np.mean(v) for v in per_experiment.values()]))
            out[method_id] = (float(np.mean(seconds[method_id])), score)
        return out

    def draw(self, spec: dict[str, Any], inputs: list[Path]) -> Any:
        plt = pyplot()
        display = MetricDisplay.from_spec(spec)
        points = self.points(spec, inputs)
        fig, ax = plt.subplots(figsize=(5.0, 3.6))
        for method_id, label in spec["methods"]:
            x, y = points[method_id]
            ax.scatter([x], [display.scale(y)], s=60, label=label, zorder=2)
            ax.annotate(label, (x, display.scale(y)), textcoords="offset points", xytext=(5, 4),
                        fontsize=8)  # fmt: skip
        scope = "OOF" if spec["scope"] == "oof" else "IF"
        ax.set_xlabel("wall-clock time per run (s)")
        ax.set_ylabel(f"{scope} test {display.label}{' (%)' if display.percent else ''}")
        ax.grid(alpha=0.3)
        ax.set_title(spec["title"], fontsize=10)
        fig.tight_layout()
        return fig
