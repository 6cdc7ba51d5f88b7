"""The sample_images report kind (LIGHTYEAR Figures 9-12): the images drawn in the figure are the
store's pixels of the chosen samples, one row per group or class, chosen reproducibly; mask
outlines follow the store's masks; the config entry resolves to the store as its input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.paths import REPO
from helpers.task_stores import segmentation_store

from benchlib.configuration.config import Config
from benchlib.data.store import load_store, write_store
from benchlib.primitives.errors import BenchlibError
from benchlib.report.base import get_kind
from benchlib.report.kinds.lightyear.sample_images import choose_samples, draw_samples


def rgb_store(out: Path) -> Path:
    """15 RGB 8x8 images, 3 hospitals x 5, two classes; every image a different colour."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(15, 8, 8, 3), dtype=np.uint8)
    index = pd.DataFrame(
        {
            "sample_id": [f"p{i:02d}" for i in range(15)],
            "label": [i % 2 for i in range(15)],
            "group": [str(i % 3) for i in range(15)],
            "source_split": "",
        }
    )
    write_store(out, dataset="tiny", index=index, pixels=pixels, num_classes=2, sources=[])
    return out


def spec(**extra) -> dict:
    return {
        "name": "fig",
        "store": "",
        "by": "group",
        "per_row": 4,
        "seed": 0,
        "masks": True,
        "row_title": "group",
        "title": "",
        **extra,
    }


def shown(figure) -> list[list[np.ndarray]]:
    """The image data of each axes, row by row (empty cells skipped)."""
    axes = np.array(figure.axes).reshape(-1, 4)
    return [[np.asarray(ax.images[0].get_array()) for ax in row if ax.images] for row in axes]


def test_the_figure_shows_the_stores_pixels_per_group(tmp_path):
    data = load_store(rgb_store(tmp_path / "store"))
    figure, chosen = draw_samples(spec(), data)
    assert [value for value, _ in chosen] == ["0", "1", "2"]
    for (value, rows), images in zip(chosen, shown(figure), strict=True):
        assert len(rows) == 4 and all(data.index.at[r, "group"] == value for r in rows)
        for row, image in zip(rows, images, strict=True):
            np.testing.assert_array_equal(image, data.pixels[row])
    assert figure.axes[0].get_ylabel() == "group 0"


def test_per_class_rows_with_names_and_a_reproducible_choice(tmp_path):
    data = load_store(rgb_store(tmp_path / "store"))
    labels = {"0": "normal", "1": "tumour"}
    figure, chosen = draw_samples(spec(by="label", per_row=4, row_labels=labels), data)
    assert [v for v, _ in chosen] == ["0", "1"]
    assert all(data.index.at[r, "label"] == int(v) for v, rows in chosen for r in rows)
    assert [figure.axes[0].get_ylabel(), figure.axes[4].get_ylabel()] == ["normal", "tumour"]
    again = choose_samples(data.index, "label", 4, seed=0)
    other = choose_samples(data.index, "label", 4, seed=5)
    assert again == chosen and other != chosen
    # a class with fewer images than per_row leaves the rest of its row empty
    _, few = draw_samples(spec(by="label", per_row=9), data)
    assert [len(rows) for _, rows in few] == [8, 7]


def test_mask_outlines_follow_the_store_masks(tmp_path):
    data = load_store(segmentation_store(tmp_path / "seg", n=8, size=16, groups=2))
    figure, chosen = draw_samples(spec(per_row=4), data)
    axes = np.array(figure.axes).reshape(-1, 4)
    for (_, rows), line in zip(chosen, axes, strict=True):
        for row, ax in zip(rows, line, strict=True):
            np.testing.assert_array_equal(np.asarray(ax.images[0].get_array()), data.pixels[row])
            ys, xs = np.nonzero(data.arrays["masks"][row])
            vertices = np.concatenate([p.vertices for c in ax.collections for p in c.get_paths()])
            # the 0.5 level of a square mask runs half a pixel outside its pixel centres
            assert vertices[:, 0].min() == pytest.approx(xs.min() - 0.5)
            assert vertices[:, 0].max() == pytest.approx(xs.max() + 0.5)
            assert vertices[:, 1].min() == pytest.approx(ys.min() - 0.5)
            assert vertices[:, 1].max() == pytest.approx(ys.max() + 0.5)
    no_masks, _ = draw_samples(spec(per_row=4, masks=False), data)
    assert all(not ax.collections for ax in no_masks.axes)


def test_render_writes_pdf_and_png_from_the_store(tmp_path):
    store = rgb_store(tmp_path / "store")
    outputs = [tmp_path / "fig.pdf", tmp_path / "fig.png"]
    get_kind("sample_images").render(spec(), [store / "manifest.json"], outputs)
    assert outputs[0].read_bytes()[:4] == b"%PDF"
    assert outputs[1].read_bytes()[:4] == b"\x89PNG"


def test_config_entry_resolves_to_the_store(tmp_path):
    from benchlib.configuration.config import load_config_file

    raw = load_config_file(REPO / "config" / "smoke.yaml")
    dataset = next(iter(raw["datasets"]))
    raw["reports"] = {"samples": {"kind": "sample_images", "dataset": dataset, "per_row": 3}}
    report = Config(raw).reports["samples"]
    assert report.inputs == (f"results/data/{dataset}/manifest.json",)
    assert report.targets == ["figures/samples.pdf", "figures/samples.png"]
    raw["reports"] = {"samples": {"kind": "sample_images", "dataset": "nope"}}
    with pytest.raises(BenchlibError, match=r"reports.samples: dataset 'nope' is not defined"):
        Config(raw)
