"""Model similarity under several measures (TFL Figure 4), from one TFL cell's metrics.json.

TFL records the raw pairwise similarities of the clients' final transmitted models under every
measure (``method_summary.similarities``: dot, cosine, and l1 / l2 as negated distances). With
``reference`` (a client id; the paper uses its client 10, here 0-based 9) the figure is one
heatmap, a row per measure, of the reference client's similarity to every client, min-max scaled
to [0, 1] over the other clients (the paper: "normalized all scores into [0, 1]"; the reference's
own cell is blank). Without it, one K x K heatmap per measure, min-max scaled over the
off-diagonal entries as TFL scales them for its graph. Config entry::

    reports:
      tfl_fig4:
        kind: tfl_similarity_figure
        experiment: tfl_pacs__held_out_15_16_17_18_19
        method: tfl
        reference: 9
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require
from benchlib.report.base import derived_param, register_kind
from benchlib.report.figures import pyplot
from benchlib.report.kinds.common.history import RunsFigure
from benchlib.report.kinds.tfl.runs import CELL_PARAMS, read_json, single_cell

if TYPE_CHECKING:
    import numpy as np

    from benchlib.report.base import ReportConfig

MEASURES = ("l1", "l2", "dot", "cosine")
MEASURE_LABELS = {"l1": r"$\ell_1$", "l2": r"$\ell_2$", "dot": "dot product", "cosine": "cosine"}


def scale_row(values: np.ndarray, skip: int) -> np.ndarray:
    """Min-max scaling to [0, 1] over every entry but ``skip`` (set to NaN); constant -> 1."""
    import numpy as np

    out = np.asarray(values, dtype=float).copy()
    keep = np.arange(len(out)) != skip
    low, high = out[keep].min(), out[keep].max()
    out[keep] = (out[keep] - low) / (high - low) if high > low else 1.0
    out[skip] = np.nan
    return out


def scale_matrix(matrix: np.ndarray) -> np.ndarray:
    """Min-max scaling of the off-diagonal entries to [0, 1]; the diagonal NaN."""
    import numpy as np

    out = np.asarray(matrix, dtype=float).copy()
    off = ~np.eye(len(out), dtype=bool)
    low, high = out[off].min(), out[off].max()
    out[off] = (out[off] - low) / (high - low) if high > low else 1.0
    out[~off] = np.nan
    return out


def similarity_panels(
    summary: dict[str, Any], measures: list[str], reference: int | None, where: str
) -> tuple[list[int], dict[str, np.ndarray]]:
    """(clients, measure -> scaled row or matrix) from a TFL method summary."""
    import numpy as np

    recorded = summary.get("similarities") or {}
    require(
        bool(recorded),
        f"{where} records no model similarities; the cell's method must be tfl (and at least "
        "two clients must have trained)",
    )
    clients = list(recorded["clients"])
    missing = [m for m in measures if m not in recorded]
    require(not missing, f"{where}: no similarities {missing} recorded")
    if reference is None:
        return clients, {m: scale_matrix(np.asarray(recorded[m])) for m in measures}
    require(
        reference in clients,
        f"{where}: reference client {reference} is not among the recorded clients {clients}",
    )
    row = clients.index(reference)
    return clients, {m: scale_row(np.asarray(recorded[m])[row], row) for m in measures}


@register_kind
class TflSimilarityFigure(RunsFigure):
    name = "tfl_similarity_figure"
    params = Params(
        {
            **CELL_PARAMS,
            "reference": derived_param(
                {"type": "integer", "minimum": 0},
                "the client whose row of similarities is drawn",
                "the whole matrix",
            ),
            "measures": Param(
                {
                    "type": "array",
                    "minItems": 1,
                    "uniqueItems": True,
                    "items": {"enum": list(MEASURES)},
                },
                list(MEASURES),
                "one panel each",
            ),
            "title": derived_param(
                {"type": "string"}, "figure title", "'<method label>, <experiment>'"
            ),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        path, title = single_cell(config, name, params)
        method = params["method"]
        require(
            config.methods[method]["method"] == "tfl",
            f"reports.{name}: method {method} is not TFL; only tfl cells record model similarities",
        )
        return {
            "name": name,
            "runs": [{"path": path}],
            "reference": params["reference"],
            "measures": list(params["measures"]),
            "title": params["title"] if params["title"] is not None else title,
        }

    def draw(self, spec: dict[str, Any], inputs: list[Path]) -> Any:
        import numpy as np

        plt = pyplot()
        metrics = read_json(inputs[0], "metrics file")
        summary = metrics.get("method_summary", {})
        measures, reference = spec["measures"], spec["reference"]
        clients, panels = similarity_panels(summary, measures, reference, str(inputs[0]))
        ticks = np.arange(len(clients))
        names = [str(c) for c in clients]
        if reference is not None:
            data = np.vstack([panels[m] for m in measures])
            fig, ax = plt.subplots(figsize=(1.5 + 0.35 * len(clients), 0.9 + 0.45 * len(measures)))
            image = ax.imshow(data, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(ticks, names, fontsize=7)
            ax.set_yticks(np.arange(len(measures)), [MEASURE_LABELS[m] for m in measures])
            ax.set_xlabel(f"client (similarity to client {reference})")
            fig.colorbar(image, ax=ax, label="scaled similarity")
        else:
            fig, axes = plt.subplots(1, len(measures), figsize=(3.2 * len(measures), 3.2),
                                     squeeze=False)  # fmt: skip
            for ax, measure in zip(axes[0], measures, strict=True):
                image = ax.imshow(panels[measure], cmap="viridis", vmin=0.0, vmax=1.0)
                ax.set_xticks(ticks, names, fontsize=6)
                ax.set_yticks(ticks, names, fontsize=6)
                ax.set_title(MEASURE_LABELS[measure], fontsize=9)
            fig.colorbar(image, ax=list(axes[0]), label="scaled similarity", shrink=0.8)
        fig.suptitle(spec["title"], fontsize=10)
        return fig
