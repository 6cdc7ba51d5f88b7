"""The learned client topology of one TFL cell (TFL Figure 6 style), from its metrics.json.

Left: the epsilon-graph of one topology update (default the last): clients as nodes on a circle
(grouped by ``node_groups``, e.g. domains or regions, one colour each), node area proportional to
the client's topological prior p. Right: the client weights lambda per round. Config entry::

    reports:
      tfl_pacs_sample_topology:
        kind: tfl_topology_figure
        experiment: pacs_lodo__held_out_15_16_17_18_19
        method: tfl_f2
        seed: 0
        node_groups: {art_painting: [0, 1, 2, 3, 4], cartoon: [5, 6, 7, 8, 9]}
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require
from benchlib.report.base import derived_param, register_kind
from benchlib.report.figures import pyplot
from benchlib.report.kinds.common.history import RunsFigure
from benchlib.report.kinds.tfl.runs import CELL_PARAMS, read_json, single_cell

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig


def group_of(node_groups: dict[str, list[int]], client: int) -> str:
    for name, members in node_groups.items():
        if client in members:
            return name
    return "other"


def circle_layout(nodes: list[int], node_groups: dict[str, list[int]]) -> dict[int, tuple]:
    """Nodes on a unit circle, grouped (groups in config order, clients ascending)."""
    order = sorted(nodes, key=lambda c: (list(node_groups).index(g) if (g := group_of(
        node_groups, c)) in node_groups else len(node_groups), c))  # fmt: skip
    step = 2 * math.pi / max(len(order), 1)
    return {c: (math.cos(i * step), math.sin(i * step)) for i, c in enumerate(order)}


@register_kind
class TflTopologyFigure(RunsFigure):
    name = "tfl_topology_figure"
    params = Params(
        {
            **CELL_PARAMS,
            "update": Param({"type": "integer"}, -1, "topology update index (-1: the last)"),
            "node_groups": Param(
                {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "integer"}},
                },
                {},
                "group name -> client indices, coloured alike",
            ),
            "title": derived_param(
                {"type": "string"}, "figure title", "'<method label>, <experiment>'"
            ),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        path, title = single_cell(config, name, params)
        return {
            "name": name,
            "metrics": path,
            "update": params["update"],
            "node_groups": params["node_groups"],
            "title": params["title"] if params["title"] is not None else title,
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [spec["metrics"]]

    def draw(self, spec: dict[str, Any], inputs: list[Path]) -> Any:
        from matplotlib.ticker import MaxNLocator

        plt = pyplot()
        metrics = read_json(inputs[0], "metrics file")
        summary = metrics.get("method_summary", {})
        updates = summary.get("topology") or []
        require(
            bool(updates),
            f"{inputs[0]} records no topology updates; the cell's method must be tfl and run at "
            "least update_every rounds",
        )
        update = updates[spec["update"]]
        groups = spec["node_groups"]
        federation = summary["federation"]
        nodes = update["nodes"] if "clusters" not in update else federation
        pos = circle_layout(nodes, groups)
        names = list(groups) + (["other"] if any(group_of(groups, c) == "other" for c in nodes)
                                else [])  # fmt: skip
        colours = {g: plt.get_cmap("tab10")(i % 10) for i, g in enumerate(names)}
        prior = dict(zip(federation, update["prior_all"], strict=True))
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
        if "clusters" not in update:
            for i, j in update["edges"]:
                (x0, y0), (x1, y1) = pos[i], pos[j]
                left.plot([x0, x1], [y0, y1], color="0.6", lw=0.8, zorder=1)
        for c in nodes:
            x, y = pos[c]
            left.scatter(x, y, s=3000 * prior[c], color=colours[group_of(groups, c)], zorder=2,
                         edgecolors="black", linewidths=0.5, clip_on=False)  # fmt: skip
            left.annotate(str(c), (x, y), ha="center", va="center", fontsize=7, zorder=3)
        for g in names:
            left.scatter([], [], color=colours[g], label=g)
        left.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
        left.set_title(f"round {update['round']}: {len(update['edges'])} edges", fontsize=9)
        left.set_aspect("equal")
        left.margins(0.15)  # room for a node whose prior is near 1 (its disc is the largest)
        left.axis("off")
        lam = summary.get("lambda") or []
        for k, client in enumerate(federation):
            right.plot(range(len(lam)), [row[k] for row in lam],
                       color=colours[group_of(groups, client)], lw=0.9)  # fmt: skip
        right.set_xlabel("round")
        right.xaxis.set_major_locator(MaxNLocator(integer=True))
        right.set_ylabel(r"client weight $\lambda_k$")
        fig.suptitle(spec["title"], fontsize=10)
        fig.tight_layout()
        return fig
