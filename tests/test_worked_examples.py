"""The worked examples of docs/develop/architecture.md, run for real in this process.

- a new method inside the repository: one module (tests/examples/coordinate_median.py, quoted in
  the doc), one declaration, one config entry;
- a new dataset: one source module (benchlib/data/sources/tabular_csv.py) and one config entry.

Both train in a cell through the engine (``run_cell``), in this process: the method is declared
at run time here. A method from outside the repository, through the real workflow, is
tests/workflow/test_plugin_package.py (the worked plugin package).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import REPO
from helpers.builders import build_method

from benchlib.configuration.config import Cell, Config
from benchlib.data.registry import get_dataset
from benchlib.data.split import SplitSpec, make_split, write_split
from benchlib.data.store import load_store
from benchlib.declarations.params import Param
from benchlib.fl.engine import run_cell
from benchlib.methods.base import StarRound
from benchlib.methods.catalog import METHODS, declare_method

EXAMPLE = REPO / "tests" / "examples" / "coordinate_median.py"
DOC = REPO / "docs" / "develop" / "architecture.md"


def doc_block(title: str) -> str:
    """The first fenced code block after the heading ``title`` in docs/ARCHITECTURE.md."""
    text = DOC.read_text()
    start = text.index(title)
    match = re.search(r"```(?:python|yaml)\n(.*?)```", text[start:], re.S)
    assert match, f"no code block after {title!r}"
    return match.group(1)


@pytest.fixture(scope="module")
def median_method():
    """Touch point 2 of 3: the declaration (here added at run time; in the repo, one entry)."""
    if "coordinate_median" not in METHODS:
        declare_method(
            "coordinate_median",
            "examples.coordinate_median:CoordinateMedian",
            "star",
            {"trim": Param({"type": "integer", "minimum": 0}, 0, "trimmed models")},
        )
    return "coordinate_median"


def test_the_doc_quotes_the_example_method_verbatim():
    assert doc_block("### Adding a method") == EXAMPLE.read_text()


def test_the_example_method_aggregates_by_hand(median_method):
    method = build_method(median_method, {"trim": 1})
    received = torch.tensor([[0.0, 10.0], [1.0, -5.0], [2.0, 4.0], [100.0, 3.0], [3.0, 2.0]])
    info = StarRound(0, 1, torch.ones(5), torch.ones(5))
    # trim 1 per side: column 0 keeps 1, 2, 3 -> 2; column 1 keeps 2, 3, 4 -> 3
    assert method.aggregate(torch.zeros(2), received, info).tolist() == [2.0, 3.0]


@pytest.mark.slow
def test_a_new_method_and_a_new_dataset_run_in_a_cell(median_method, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(160, 3))
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(
        site=[f"s{i % 4}" for i in range(160)],
        y=x @ [1.0, -0.5, 0.25] + 0.01 * rng.normal(size=160),
    )
    frame.to_csv(tmp_path / "rows.csv", index=False)
    config = yaml.safe_load(doc_block("### Adding a dataset"))  # touch point 3 (config entries)
    config["datasets"]["rows"]["params"]["path"] = str(tmp_path / "rows.csv")
    cfg = Config(config)
    spec = cfg.dataset_spec("rows")
    store = tmp_path / "store"
    get_dataset(spec["source"]).prepare(store, spec["params"], task=spec["task"])
    data = load_store(store)
    assert data.task == "regression" and data.inputs.shape == (160, 3)
    split = tmp_path / "split.csv"
    write_split(make_split(data, SplitSpec.from_config(spec)), split)
    cell = cfg.cell_spec(Cell("rows", "sfa", "median", 1, 0))
    metrics = run_cell(cell, store, split, tmp_path / "m.json", tmp_path / "ck")
    assert metrics["cell"]["method"] == "coordinate_median"
    # one sign-flipped client of four cannot move the median far: the model learns y (the
    # zero predictor's MSE is var(y) ~ 1.3)
    mse = [c["test_mse"] for c in metrics["clients"]]
    assert np.mean(mse) < 0.25 * frame["y"].var(), mse


def test_the_doc_names_at_most_three_touch_points():
    text = DOC.read_text()
    for title in ("### Adding a method", "### Adding a dataset", "### Adding a model"):
        section = text[text.index(title) :].split("\n### ")[0]
        points = re.findall(r"^\d\. ", section, re.M)
        assert 1 <= len(points) <= 3, title


def test_example_files_exist():
    assert Path(EXAMPLE).is_file()
