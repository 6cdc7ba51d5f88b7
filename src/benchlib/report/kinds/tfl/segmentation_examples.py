"""``segmentation_examples``: qualitative segmentation panels (TFL Figures 5 and 9), one row per
test sample: the image, the ground truth, then each method's prediction with its Dice.

The predictions are the ones the cells saved (``training.save_predictions``, see
:mod:`benchlib.facts.saved_predictions`): every method's cell of one seed predicted the same test
samples of each client. Per chosen client the figure shows the ``per_client`` saved samples with
the largest ground-truth foreground (ties: store order); ``scope: oof`` (default) draws from the
held-out clients, ``if`` from the federation. Dice is the task's: per foreground class, an
empty class predicted empty counts 1, averaged over the classes. Config entry::

    tfl_fig5:
      kind: segmentation_examples
      experiment: tfl_fets
      methods: [fedavg, drfa, tfl]
      clients: [18, 20]
      per_client: 2
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives import layout
from benchlib.primitives.errors import require
from benchlib.report.base import (
    ReportKind,
    check_experiments,
    check_outputs,
    derived_param,
    register_kind,
    required_param,
)
from benchlib.report.figures import pyplot, save_figure

if TYPE_CHECKING:
    import numpy as np

    from benchlib.report.base import ReportConfig

SCOPES = {"oof": "held_out_clients", "if": "clients"}
# class 1, 2, 3, ... (background is not drawn)
CLASS_COLOURS = ["#e41a1c", "#4daf4a", "#ffd92f", "#377eb8", "#984ea3", "#ff7f00"]


def dice(prediction: np.ndarray, truth: np.ndarray, num_classes: int) -> float:
    """Mean foreground Dice of one class map (empty class predicted empty: 1, else 0)."""
    import numpy as np

    scores = []
    for k in range(1, num_classes):
        p, t = prediction == k, truth == k
        total = int(p.sum()) + int(t.sum())
        scores.append(1.0 if total == 0 else 2.0 * int((p & t).sum()) / total)
    return float(np.mean(scores))


@dataclass(frozen=True)
class Panel:
    """One row of the figure: a sample, its ground truth and each method's prediction."""

    client: int
    row: int
    sample_id: str
    image: np.ndarray
    truth: np.ndarray
    predictions: dict[str, np.ndarray]
    dice: dict[str, float]


def saved_rows(metrics: dict[str, Any], where: str) -> dict[int, tuple[list[int], Any]]:
    """client -> (store rows, decoded class maps) of a metrics.json's saved predictions."""
    from benchlib.facts.saved_predictions import decode_array

    saved = metrics.get("predictions")
    require(
        bool(saved),
        f"{where} holds no saved predictions; set training.save_predictions in the dataset's "
        "config and run the cell again",
    )
    result = {}
    for client, entry in saved["clients"].items():
        masks = decode_array(entry["masks"], f"{where} predictions of client {client}")
        require(len(masks) == len(entry["rows"]), f"{where}: client {client} rows and masks differ")
        result[int(client)] = (list(entry["rows"]), masks)
    return result


def build_panels(spec: dict[str, Any], data: Any, metrics: dict[str, dict[str, Any]]) -> list:
    """The figure's panels from the store and each method's metrics.json (method id -> dict)."""
    import numpy as np

    saved = {m: saved_rows(metrics[m], f"metrics.json of {m}") for m, _ in spec["methods"]}
    first = spec["methods"][0][0]
    in_scope = sorted(c["client"] for c in metrics[first].get(SCOPES[spec["scope"]]) or [])
    clients = spec["clients"] or in_scope
    outside = sorted(set(clients) - set(in_scope))
    require(not outside, f"clients {outside} are not {spec['scope']} clients of the experiment "
            f"(those are {in_scope})")  # fmt: skip
    masks, pixels = data.arrays["masks"], data.pixels
    num_classes = data.num_classes
    panels = []
    for client in clients:
        rows = saved[first].get(client, ([], None))[0]
        require(bool(rows), f"no saved predictions of client {client}; it has no test samples")
        for method, _ in spec["methods"]:
            require(
                saved[method].get(client, ([], None))[0] == rows,
                f"{method} saved other samples of client {client} than {first}; run the cells "
                "of one split",
            )
        area = [int((masks[r] > 0).sum()) for r in rows]
        order = sorted(range(len(rows)), key=lambda i: (-area[i], i))[: spec["per_client"]]
        for i in order:
            row = rows[i]
            truth = np.asarray(masks[row])
            image = np.asarray(pixels[row])
            if image.ndim == 3:
                image = image[..., spec["channel"]]
            predictions = {m: saved[m][client][1][i] for m, _ in spec["methods"]}
            require(
                all(p.shape == truth.shape for p in predictions.values()),
                f"saved predictions of client {client} do not match the store's mask size; "
                "the store was prepared again after the run: rerun the cells",
            )
            panels.append(
                Panel(
                    client=client,
                    row=row,
                    sample_id=str(data.index["sample_id"].iloc[row]),
                    image=image,
                    truth=truth,
                    predictions=predictions,
                    dice={m: dice(p, truth, num_classes) for m, p in predictions.items()},
                )
            )
    return panels


def draw_mask(ax: Any, image: np.ndarray, mask: np.ndarray | None, colours: Any) -> None:
    """The grey image with the mask's foreground classes overlaid in colour."""
    import numpy as np

    ax.imshow(image, cmap="gray", vmin=0, vmax=255, interpolation="nearest")
    if mask is not None and mask.any():
        ax.imshow(np.ma.masked_equal(mask, 0), cmap=colours, vmin=0.5, vmax=colours.N + 0.5,
                  alpha=0.55, interpolation="nearest")  # fmt: skip
    ax.set_xticks([])
    ax.set_yticks([])


@register_kind
class SegmentationExamples(ReportKind):
    name = "segmentation_examples"
    output = "figure"
    params = Params(
        {
            "experiment": required_param({"type": "string"}, "an experiment of the config"),
            "methods": required_param(
                {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "one column of predictions each",
            ),
            "seed": derived_param(
                {"type": "integer", "minimum": 0}, "the cells' seed", "the experiment's first seed"
            ),
            "scope": Param(
                {"enum": list(SCOPES)},
                "oof",
                "clients drawn: oof = held out, if = the federation's",
            ),
            "clients": Param(
                {"type": "array", "items": {"type": "integer", "minimum": 0}},
                [],
                "clients drawn (empty: every client of the scope)",
            ),
            "per_client": Param(
                {"type": "integer", "minimum": 1, "maximum": 20}, 1, "samples drawn per client"
            ),
            "channel": Param({"type": "integer", "minimum": 0}, 0, "image channel shown"),
            "channel_label": Param({"type": "string"}, "Image", "its name, e.g. FLAIR"),
            "title": Param({"type": "string"}, "", "figure title (empty: none)"),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiment = params["experiment"]
        check_experiments(config, [experiment])
        exp = config.experiments[experiment]
        dataset = config.datasets[exp["dataset"]]
        require(
            int(dataset["training"]["save_predictions"]) > 0,
            f"the cells of {experiment} save no predictions; set datasets.{exp['dataset']}."
            "training.save_predictions (e.g. 8)",
        )
        scope = params["scope"]
        require(
            scope != "oof" or bool(dataset.get("held_out")),
            f"{experiment} holds out no clients; use scope: if or set the dataset's held_out",
        )
        held = set(dataset["held_out"])
        in_scope = held if scope == "oof" else set(range(dataset["clients"])) - held
        outside = sorted(set(params["clients"]) - in_scope)
        require(not outside, f"clients {outside} are not {scope} clients of {experiment}")
        seed = params["seed"] if params["seed"] is not None else exp["seeds"][0]
        require(seed in exp["seeds"], f"{experiment} has no seed {seed}")
        metrics = []
        for method in params["methods"]:
            require(method in exp["methods"], f"{experiment} has no method {method}")
            cells = [c for c in config.cells(experiment) if c.method == method and c.seed == seed]
            require(len(cells) == 1, f"expected one cell of {method}, seed {seed}: {len(cells)}")
            metrics.append(cells[0].metrics_path)
        return {
            "name": name,
            "store": layout.store_manifest(config.store_name(exp["dataset"])),
            "metrics": metrics,
            "methods": [[m, config.method_label(m)] for m in params["methods"]],
            "scope": scope,
            "clients": list(params["clients"]),
            "per_client": int(params["per_client"]),
            "channel": int(params["channel"]),
            "channel_label": params["channel_label"],
            "title": params["title"],
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [spec["store"], *spec["metrics"]]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        from matplotlib.colors import ListedColormap

        from benchlib.data.store import load_store

        check_outputs(self, outputs)
        data = load_store(Path(inputs[0]).parent)
        require("masks" in data.arrays, f"{inputs[0]}: the store holds no segmentation masks")
        metrics = {
            method: json.loads(Path(path).read_text())
            for (method, _), path in zip(spec["methods"], inputs[1:], strict=True)
        }
        panels = build_panels(spec, data, metrics)
        plt = pyplot()
        colours = ListedColormap(CLASS_COLOURS[: max(data.num_classes - 1, 1)])
        columns = [spec["channel_label"], "Ground truth", *(label for _, label in spec["methods"])]
        figure, axes = plt.subplots(
            len(panels), len(columns), figsize=(1.6 * len(columns), 1.7 * len(panels) + 0.6),
            squeeze=False,
        )  # fmt: skip
        for panel, line in zip(panels, axes, strict=True):
            draw_mask(line[0], panel.image, None, colours)
            draw_mask(line[1], panel.image, panel.truth, colours)
            for ax, (method, _) in zip(line[2:], spec["methods"], strict=True):
                draw_mask(ax, panel.image, panel.predictions[method], colours)
                ax.set_xlabel(f"DSC {100 * panel.dice[method]:.1f}", fontsize=7)
            line[0].set_ylabel(f"client {panel.client}\n{panel.sample_id}", fontsize=6)
        for ax, label in zip(axes[0], columns, strict=True):
            ax.set_title(label, fontsize=8)
        names = data.manifest.get("classes") or [f"class {k}" for k in range(data.num_classes)]
        handles = [
            plt.Rectangle((0, 0), 1, 1, color=colours(k - 1), alpha=0.55)
            for k in range(1, data.num_classes)
        ]
        figure.legend(handles, names[1:], loc="lower center", ncol=len(handles), fontsize=7,
                      frameon=False)  # fmt: skip
        if spec["title"]:
            figure.suptitle(spec["title"], fontsize=10)
        figure.tight_layout(rect=(0, 0.04, 1, 1))
        save_figure(figure, outputs[0], outputs[1], tight=False)
