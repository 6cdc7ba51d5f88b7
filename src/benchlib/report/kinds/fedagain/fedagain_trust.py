"""FedAgain's mechanism: the aggregation weight w_k = T_k / sum T of corrupted and clean clients
per round (from ``method_summary.trust`` of the cells' metrics.json), one panel per experiment.

Statistic: per round, each client's weight (thin lines) and the mean weight of the corrupted and
of the clean clients (thick lines); one seed (the first of the experiment). The corrupted clients
are recomputed from the config (:func:`benchlib.data.corruptions.corrupted_clients`), exactly as
the ``corrupt_store`` step chose them.

Config entry::

    reports:
      demo_trust: {kind: fedagain_trust, experiments: [demo_corruption__corruption_heavy]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require
from benchlib.report.base import (
    ReportKind,
    check_experiments,
    check_outputs,
    experiment_title,
    register_kind,
    required_param,
)
from benchlib.report.figures import pyplot, save_figure

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig

STATISTIC = "per round: each client's FedAgain weight; thick: mean over corrupted / clean clients"


def trust_by_group(metrics: dict[str, Any], corrupted: list[int]) -> list[dict[str, Any]]:
    """Per round: the mean weight (and E, D) of the corrupted and of the clean clients."""
    out = []
    for entry in metrics["method_summary"]["trust"]:
        groups: dict[str, list[int]] = {"corrupted": [], "clean": []}
        for i, client in enumerate(entry["clients"]):
            groups["corrupted" if client in corrupted else "clean"].append(i)
        row: dict[str, Any] = {"round": entry["round"]}
        for name, idx in groups.items():
            for key in ("w", "E", "D"):
                values = [entry[key][i] for i in idx if entry[key][i] is not None]
                row[f"{key}_{name}"] = sum(values) / len(values) if values else None
        out.append(row)
    return out


@register_kind
class FedAgainTrust(ReportKind):
    name = "fedagain_trust"
    output = "figure"
    params = Params(
        {
            "experiments": required_param(
                {"type": "array", "minItems": 1, "items": {"type": "string"}}, "one panel each"
            ),
            "method": Param(
                {"type": "string"}, "fedagain", "the method whose trust weights are drawn"
            ),
            "title": Param({"type": "string"}, "FedAgain trust weights per round", "figure title"),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        from benchlib.data.corruptions import corrupted_clients, scenario_of
        from benchlib.grid.spec import Cell

        experiments = list(params["experiments"])
        check_experiments(config, experiments)
        method = params["method"]
        panels = []
        for experiment in experiments:
            exp = config.experiments[experiment]
            require(method in exp["methods"], f"experiment {experiment} does not run {method}")
            dataset = config.datasets[exp["dataset"]]
            scenario = scenario_of(dataset["corruption"])
            corrupted = corrupted_clients(
                int(dataset["clients"]), scenario.ratio, int(dataset["split"]["seed"])
            )
            cell = Cell(experiment, "none", method, 0, int(exp["seeds"][0]))
            panels.append(
                {"experiment": experiment,
                 "title": f"{experiment_title(config, experiment)}: {scenario.ratio * 100:g} % "
                 f"corrupted, severity {scenario.severity}",
                 "corrupted": corrupted, "metrics": cell.metrics_path}
            )  # fmt: skip
        return {
            "name": name,
            "panels": panels,
            "title": params["title"],
            "statistic": STATISTIC,
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [p["metrics"] for p in spec["panels"]]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        plt = pyplot()

        check_outputs(self, outputs)
        panels = spec["panels"]
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.2), squeeze=False)
        for ax, panel, path in zip(axes[0], panels, inputs, strict=True):
            metrics = json.loads(Path(path).read_text())
            trust = metrics["method_summary"]["trust"]
            for position, client in enumerate(trust[0]["clients"]):
                bad = client in panel["corrupted"]
                ax.plot([e["round"] + 1 for e in trust], [e["w"][position] for e in trust],
                        color="tab:red" if bad else "tab:grey", lw=0.6, alpha=0.6)  # fmt: skip
            groups = trust_by_group(metrics, panel["corrupted"])
            for name, colour in (("corrupted", "tab:red"), ("clean", "black")):
                xs = [g["round"] + 1 for g in groups if g[f"w_{name}"] is not None]
                ys = [g[f"w_{name}"] for g in groups if g[f"w_{name}"] is not None]
                if xs:
                    ax.plot(xs, ys, color=colour, lw=2.2, label=f"mean, {name}")
            ax.set_title(panel["title"], fontsize=9)
            ax.set_xlabel("round")
            ax.set_ylabel("aggregation weight w_k")
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.suptitle(spec["title"])
        fig.text(0.5, -0.02, f"Statistic: {spec['statistic']}.", ha="center", va="top", fontsize=8)
        fig.tight_layout()
        save_figure(fig, outputs[0], outputs[1])
