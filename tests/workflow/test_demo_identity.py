"""The core reshaping must not change results: four demo cells (every demo method, every
malfunction kind) give exactly the numbers of the pre-refactor code.

The goldens in tests/golden/demo_cells/ are the numeric parts of metrics.json files written by
`make demo` at commit 3947592 (before the streamed store, the task registry and the cell-spec
type): per-client test accuracy and sizes, the per-round validation accuracy, selections,
agreement scores and malfunction schedule, the malfunctioning clients and the method summary.
New keys (further metrics, participants) are allowed; every golden value must match exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import REPO
from helpers.paths import GOLDEN

from benchlib.configuration.config import Cell, load_config
from benchlib.data.split import SplitSpec, make_split, write_split
from benchlib.data.store import load_store
from benchlib.facts.digest import cell_key, numbers_digest, read_digest
from benchlib.fl.engine import run_cell

pytestmark = pytest.mark.slow
GOLDEN_CELLS = GOLDEN / "demo_cells"


@pytest.fixture(scope="module")
def demo_split(mnist_store, tmp_path_factory) -> Path:
    config = load_config(REPO / "config" / "demo.yaml")
    path = tmp_path_factory.mktemp("demo") / "mnist5k.csv"
    write_split(
        make_split(load_store(mnist_store), SplitSpec.from_config(config.dataset_spec("mnist5k"))),
        path,
    )
    return path


@pytest.mark.parametrize("golden", sorted(p.name for p in GOLDEN_CELLS.glob("*.json")))
def test_demo_cell_numbers_are_unchanged(golden, mnist_store, demo_split, tmp_path):
    expected = json.loads((GOLDEN_CELLS / golden).read_text())
    cell = expected["cell"]
    spec = load_config(REPO / "config" / "demo.yaml").cell_spec(
        Cell(cell["experiment"], cell["malfunction"], cell["method_id"], cell["k"], cell["seed"])
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the demo's run_cell rule (threads: 1)
    try:
        metrics = run_cell(spec, mnist_store, demo_split, tmp_path / "m.json", tmp_path / "ck")
    finally:
        torch.set_num_threads(threads)
    assert metrics is not None
    assert metrics["cell"] == cell
    assert metrics["malicious_clients"] == expected["malicious_clients"]
    assert metrics["method_summary"] == expected["method_summary"]
    for ours, theirs in zip(metrics["clients"], expected["clients"], strict=True):
        assert {k: ours[k] for k in theirs} == theirs
    for key, value in expected["history"].items():
        assert metrics["history"][key] == value, key
    # The committed reference digest of the whole demo (benchlib verify) agrees with this run.
    reference = read_digest(REPO / "config" / "reference" / "demo_digest.json")
    assert numbers_digest(metrics) == reference["cells"][cell_key(metrics)]
