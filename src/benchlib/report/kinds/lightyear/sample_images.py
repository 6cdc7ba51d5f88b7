"""``sample_images``: a grid of images drawn from a prepared store, one row per client group
(``by: group``: hospitals, centres; LIGHTYEAR Figure 9) or per class (``by: label``: Figure 10),
with the outline of the segmentation mask drawn over each image when the store has masks
(Figures 11-12).

The images are chosen reproducibly: per row, the sample ids of that group or class in sorted
order, shuffled by ``seed``, the first ``per_row`` kept. Pixels are shown as stored (uint8, grey
images on a fixed 0-255 grey scale), so the figure is the store's data and nothing else.

Config entry::

    lightyear_fig9: {kind: sample_images, dataset: camelyon17, by: group, per_row: 6}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives import layout
from benchlib.primitives.errors import require
from benchlib.report.base import (
    ReportKind,
    check_outputs,
    derived_param,
    register_kind,
    required_param,
    spec_value,
)
from benchlib.report.figures import pyplot, save_figure


def choose_samples(index: Any, by: str, per_row: int, seed: int) -> list[tuple[str, list[int]]]:
    """[(row value, store rows)] per group or class, in sorted value order (seeded choice)."""
    import numpy as np

    rows = []
    values = index[by].astype(str)
    for value in sorted(values.unique(), key=lambda v: (len(v), v)):  # "2" before "10"
        members = index.index[values == value].to_numpy()
        members = members[np.argsort(index["sample_id"].to_numpy()[members], kind="stable")]
        rng = np.random.default_rng([seed, len(rows)])
        chosen = members[rng.permutation(len(members))[:per_row]]
        rows.append((value, sorted(int(r) for r in chosen)))
    return rows


def outline(ax: Any, mask: Any) -> None:
    """Draw the boundary of a mask's foreground (closed also where it touches the border)."""
    import numpy as np

    height, width = mask.shape
    padded = np.pad(mask > 0, 1).astype(float)  # a zero frame closes the contour at the border
    ax.contour(
        np.arange(-1, width + 1), np.arange(-1, height + 1), padded,
        levels=[0.5], colors="red", linewidths=0.8,
    )  # fmt: skip
    ax.set_xlim(-0.5, width - 0.5)
    ax.set_ylim(height - 0.5, -0.5)


def draw_samples(spec: dict[str, Any], data: Any) -> tuple[Any, list[tuple[str, list[int]]]]:
    """The matplotlib figure of a spec and a loaded store, and the rows it shows."""
    plt = pyplot()
    by, per_row = spec_value(spec, "by"), int(spec_value(spec, "per_row"))
    chosen = choose_samples(data.index, by, per_row, int(spec["seed"]))
    names = spec.get("row_labels") or {}
    masks = data.arrays.get("masks") if spec["masks"] else None
    figure, axes = plt.subplots(
        len(chosen), per_row, figsize=(1.3 * per_row + 1.2, 1.3 * len(chosen)), squeeze=False
    )
    for (value, rows), line in zip(chosen, axes, strict=True):
        for column, ax in enumerate(line):
            ax.set_xticks([])
            ax.set_yticks([])
            for side in ax.spines.values():
                side.set_visible(False)
            if column >= len(rows):
                continue
            image = data.pixels[rows[column]]
            if image.ndim == 2:
                ax.imshow(image, cmap="gray", vmin=0, vmax=255, interpolation="nearest")
            else:
                ax.imshow(image, interpolation="nearest")
            if masks is not None and masks[rows[column]].any():
                outline(ax, masks[rows[column]])
        line[0].set_ylabel(names.get(value, f"{spec['row_title']} {value}"), fontsize=8)
    if spec["title"]:
        figure.suptitle(spec["title"], fontsize=10)
    figure.tight_layout()
    return figure, chosen


@register_kind
class SampleImages(ReportKind):
    name = "sample_images"
    output = "figure"
    params = Params(
        {
            "dataset": required_param({"type": "string"}, "a dataset id of the config"),
            "by": Param({"enum": ["group", "label"]}, "group", "one row per group or per class"),
            "per_row": Param(
                {"type": "integer", "minimum": 1, "maximum": 20}, 6, "images in each row"
            ),
            "seed": Param(
                {"type": "integer", "minimum": 0}, 0, "seed of the random choice of images"
            ),
            "title": Param({"type": "string"}, "", "figure title (empty: none)"),
            "row_title": derived_param({"type": "string"}, "row label prefix", "the value of by"),
            "row_labels": Param(
                {"type": "object", "additionalProperties": {"type": "string"}},
                {},
                "group or class value -> row label (e.g. class names)",
            ),
            "masks": Param({"type": "boolean"}, True, "outline masks when the store has them"),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: Any) -> dict[str, Any]:
        dataset = params["dataset"]
        require(
            dataset in config.datasets,
            f"dataset {dataset!r} is not defined under datasets; choose one of: "
            f"{', '.join(config.datasets)}",
        )
        return {
            "name": name,
            "store": layout.store_dir(config.store_name(dataset)),
            "by": params["by"],
            "per_row": int(params["per_row"]),
            "seed": int(params["seed"]),
            "title": params["title"],
            "row_title": params["row_title"] if params["row_title"] is not None else params["by"],
            "row_labels": {str(k): v for k, v in params["row_labels"].items()},
            "masks": bool(params["masks"]),
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [f"{spec['store']}/manifest.json"]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        from benchlib.data.store import load_store

        check_outputs(self, outputs)
        data = load_store(Path(inputs[0]).parent)
        require("pixels" in data.arrays, f"{inputs[0]}: the store holds no images to show")
        figure, _ = draw_samples(spec, data)
        save_figure(figure, outputs[0], outputs[1], tight=False)
