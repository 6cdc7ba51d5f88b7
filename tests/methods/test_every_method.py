"""Every registered method, driven by the registry (never a hand-kept list): each variant trains
2 rounds through the real engine, and (once per method) a run stopped after round 1 and resumed
from its checkpoint writes the same metrics.json, byte for byte. A plugin's methods are registered
methods too: the plugin test runs this module where the example plugin is installed."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from helpers.tiny_cells import TINY_CELL, tiny_config

from benchlib.data.split import SplitSpec, make_split, write_split
from benchlib.data.store import load_store
from benchlib.fl.engine import run_cell
from benchlib.methods.base import P2PMethod, get_method_class
from benchlib.methods.catalog import METHODS

pytestmark = pytest.mark.slow  # trains every method through the engine

CASES = [
    (name, variant)
    for name in METHODS.names()
    for variant in (METHODS.get(name).variants or ("paper",))
]
CASES_BY_NAME = {name: METHODS.get(name).variants or ("paper",) for name in METHODS.names()}
NUMBERS = ("clients", "history", "malicious_clients", "method_summary")


@pytest.fixture(scope="module")
def prepared(mnist_store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    torch.set_num_threads(1)
    config = tiny_config("fedavg", "paper")
    split = tmp_path_factory.mktemp("every_method") / "split.csv"
    spec = SplitSpec.from_config(config.dataset_spec("mnist5k"))
    write_split(make_split(load_store(mnist_store), spec), split)
    return mnist_store, split


@pytest.mark.parametrize(("name", "variant"), CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_method_trains_and_resumes(prepared, tmp_path: Path, name: str, variant: str) -> None:
    store, split = prepared
    spec = tiny_config(name, variant).cell_spec(TINY_CELL)
    full = run_cell(spec, store, split, tmp_path / "full.json", tmp_path / "full_ckpt")
    assert len(full["history"]["val_accuracy"]) == 2
    assert full["malicious_clients"] == [0]
    for client in full["clients"]:
        accuracy = client["test_accuracy"]
        assert accuracy is not None and 0.0 <= accuracy <= 1.0 and math.isfinite(accuracy)
    assert full["config"]["method"] == name
    assert None not in full["config"]["method_params"].values() or name in NULL_RULES, (
        f"{name}: a declared default is null; declare the value the method uses"
    )
    if issubclass(get_method_class(name), P2PMethod):
        assert [len(s) for s in full["history"]["selections"]] == [4, 4]  # every client, each round
    if variant == "paper" and name in PAPER_CHECKS:
        PAPER_CHECKS[name](full["method_summary"])

    if variant != CASES_BY_NAME[name][0]:
        return  # resume is the class's contract: checked once per method
    ckpt = tmp_path / "resumed_ckpt"
    stopped = run_cell(spec, store, split, tmp_path / "resumed.json", ckpt, stop_after=1)
    assert stopped is None and not (tmp_path / "resumed.json").exists()
    resumed = run_cell(spec, store, split, tmp_path / "resumed.json", ckpt)
    assert json.dumps(pick(resumed), sort_keys=True) == json.dumps(pick(full), sort_keys=True)
    assert (tmp_path / "resumed.json").read_bytes() == (tmp_path / "full.json").read_bytes()


def flags_the_ana_client(summary: dict) -> None:
    assert summary["flagged"] == [[0], [0]]  # the ANA client, every round


def never_selects_the_ana_client(summary: dict) -> None:
    assert all(0 not in chosen for chosen in summary["selected"])


# What a method's paper variant must do to the ANA client (client 0) in the tiny cell.
PAPER_CHECKS = {
    "afa": flags_the_ana_client,
    "asmr": flags_the_ana_client,
    "krum": never_selects_the_ana_client,
}


# Parameters still declared null because the value is a per-round rule (of the clients that
# take part, or of the model's feature width), not one number: krum/bulyan f, scclip b and tau
# (adaptive radius), fedsr z_dim and dense (from the model and task).
NULL_RULES = {"krum", "bulyan", "scclip", "fedsr"}


def pick(metrics: dict) -> dict:
    return copy.deepcopy({key: metrics[key] for key in NUMBERS if key in metrics})
