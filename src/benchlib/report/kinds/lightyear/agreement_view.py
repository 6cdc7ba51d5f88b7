"""Agreement-score view of one P2P cell (LIGHTYEAR; for users debugging peer selection): per
round a receiver x sender heatmap of the scores a client gave each peer (LIGHTYEAR: the
agreement score, Eq. 15; other P2P methods: their own peer scores), malfunctioning senders marked
with a red tick, the peers a client selected boxed, and the threshold tau (when the method has
one) on the colour bar. Config entry::

    reports:
      femnist_agreement_sfa_k4: {kind: agreement_view, experiment: femnist,
                                 malfunction: sfa, k: 4}

Reads the cell's metrics.json (history ``scores`` and ``selections``; ``malicious_clients``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require
from benchlib.report.base import (
    check_experiments,
    check_malfunctions,
    derived_param,
    register_kind,
    required_param,
    spec_value,
)
from benchlib.report.figures import pyplot
from benchlib.report.kinds.common.history import (
    RunsFigure,
    check_ks,
    check_methods,
    read_metrics,
    run_file,
)

if TYPE_CHECKING:
    import numpy as np

    from benchlib.report.base import ReportConfig


def score_matrices(metrics: dict[str, Any]) -> list[np.ndarray]:
    """Per round the [receiver, sender] score matrix (NaN where no score: own, missing)."""
    import numpy as np

    rounds = metrics["history"].get("scores") or []
    require(
        any(any(row) for row in rounds),
        "the cell recorded no peer scores; the agreement view needs a P2P method's cell",
    )
    return [
        np.array([[math.nan if s is None else s for s in row] for row in matrix], dtype=float)
        for matrix in rounds
    ]


def threshold(metrics: dict[str, Any]) -> float | None:
    """tau of the cell: its method summary's, else its method parameter; None if it has none."""
    summary = metrics.get("method_summary") or {}
    tau = summary.get("tau", metrics.get("config", {}).get("method_params", {}).get("tau"))
    return None if tau is None else float(tau)


@register_kind
class AgreementView(RunsFigure):
    name = "agreement_view"
    params = Params(
        {
            "experiment": required_param({"type": "string"}, "an experiment of the config"),
            "malfunction": required_param({"type": "string"}, "one of its malfunctions"),
            "k": required_param({"type": "integer", "minimum": 0}, "one of its k"),
            "method": Param(
                {"type": "string"}, "lightyear", "the P2P method whose peer scores are drawn"
            ),
            "seed": derived_param(
                {"type": "integer", "minimum": 0}, "the cell's seed", "the experiment's first seed"
            ),
            "title": derived_param(
                {"type": "string"},
                "figure title",
                "'<method label> peer scores: <experiment>, <MALFUNCTION>, k = <k>'",
            ),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiment, malfunction, k = params["experiment"], params["malfunction"], params["k"]
        check_experiments(config, [experiment])
        check_malfunctions(config, experiment, [malfunction])
        method = params["method"]
        check_methods(config, experiment, [method])
        check_ks(config, experiment, [k])
        seed = params["seed"]
        if seed is None:
            seed = config.experiments[experiment]["seeds"][0]
        title = params["title"]
        if title is None:
            label = config.method_label(method)
            title = f"{label} peer scores: {experiment}, {malfunction.upper()}, k = {k}"
        return {
            "name": name,
            "path": run_file(experiment, malfunction, method, k, seed),
            "title": title,
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [spec["path"]]

    def draw(self, spec: dict[str, Any], inputs: list[Path]) -> Any:
        """The matplotlib figure (tests read its lines and images back)."""
        require(len(inputs) == 1, "agreement_view reads one metrics.json; pass --collected FILE")
        metrics = read_metrics(inputs[0])
        matrices = score_matrices(metrics)
        selections = metrics["history"].get("selections") or [[] for _ in matrices]
        malicious = set(metrics.get("malicious_clients", []))
        tau = threshold(metrics)
        plt = pyplot()
        columns = min(4, len(matrices))
        rows = math.ceil(len(matrices) / columns)
        figure, axes = plt.subplots(
            rows, columns, figsize=(2.6 * columns, 2.5 * rows), squeeze=False
        )
        finite = [m[~_nan(m)] for m in matrices]
        values = [v for f in finite for v in f.tolist()]
        low, high = (min(values), max(values)) if values else (0.0, 1.0)
        if tau is not None:  # keep tau on the colour bar, off its ends
            low, high = min(low, tau), max(high, tau)
            pad = 0.05 * (high - low) or 0.01
            low, high = low - pad, high + pad
        image = None
        for index, ax in enumerate(axes.flat):
            if index >= len(matrices):
                ax.axis("off")
                continue
            matrix = matrices[index]
            image = ax.imshow(matrix, vmin=low, vmax=high, cmap="viridis")
            n = matrix.shape[0]
            ax.set_xticks(range(n), [str(c) for c in range(n)])
            ax.set_yticks(range(n), [str(c) for c in range(n)])
            ax.tick_params(labelsize=6)
            for client, tick in enumerate(ax.get_xticklabels()):
                if client in malicious:
                    tick.set_color("red")
            for receiver, chosen in enumerate(selections[index] if index < len(selections) else []):
                for sender in chosen:
                    ax.add_patch(
                        plt.Rectangle(
                            (sender - 0.5, receiver - 0.5), 1, 1, fill=False, ec="white", lw=1
                        )
                    )
            ax.set_title(f"round {index}", fontsize=8)
            if index >= len(matrices) - columns:  # the lowest panel of its column
                ax.set_xlabel("sender", fontsize=7)
            if index % columns == 0:  # the first column
                ax.set_ylabel("receiver", fontsize=7)
        if image is not None:
            bar = figure.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8)
            if tau is not None:
                bar.ax.axhline(tau, color="red", lw=1.5)
                bar.set_label(f"score (tau = {tau:g}, red)")
        figure.suptitle(
            spec_value(spec, "title") + f"\nmalfunctioning senders (red): {sorted(malicious)}",
            y=1.0 + 0.06 / rows,
        )
        return figure


def _nan(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.isnan(matrix)
