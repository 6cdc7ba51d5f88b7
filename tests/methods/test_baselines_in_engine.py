"""Every baseline (paper default and authors' variant) through the real engine on a tiny config:
mnist5k, 4 clients, 2 rounds, narrow CNN, client 0 malfunctioning (ANA). Plus resume equivalence:
a run stopped after one round and resumed writes the same metrics.json, byte for byte."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from helpers.paths import REPO

from benchlib.config import Cell, Config, load_config
from benchlib.data.registry import get_dataset
from benchlib.data.split import SplitSpec, make_split, write_split
from benchlib.data.store import load_store
from benchlib.fl.checkpoint import latest_checkpoint
from benchlib.fl.engine import run_cell
from benchlib.methods.base import P2PMethod, get_method_class

CONFIG = REPO / "config" / "methods_smoke.yaml"
EXPERIMENT = "baselines_smoke"
METHOD_IDS = yaml.safe_load(CONFIG.read_text())["experiments"][EXPERIMENT]["methods"]
STATEFUL = ["afa", "cfl_split", "ditto"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, Path]:
    torch.set_num_threads(1)
    config = load_config(CONFIG)
    root = tmp_path_factory.mktemp("baselines")
    dataset = config.dataset_spec(config.experiment_dataset(EXPERIMENT))
    source = get_dataset(dataset["source"])
    source.prepare(root / "store", dataset["params"])
    split = make_split(load_store(root / "store"), SplitSpec.from_config(dataset))
    write_split(split, root / "split.csv")
    return config, root


def run(prepared: tuple[Config, Path], method_id: str, tag: str, **kwargs: Any) -> Any:
    config, root = prepared
    spec = config.cell_spec(Cell(EXPERIMENT, "ana", method_id, 1, 0))
    out = root / tag / method_id / "metrics.json"
    ckpt = root / tag / method_id / "checkpoints"
    result = run_cell(spec, root / "store", root / "split.csv", out, ckpt, **kwargs)
    return result, out, ckpt


def test_config_lists_every_baseline_in_both_variants() -> None:
    config = load_config(CONFIG)
    names = {config.methods[m].get("method", m) for m in METHOD_IDS}
    assert {"fedprox", "krum", "afa", "asmr", "cfl", "ditto", "balance", "scclip"} <= names
    variants = {
        config.methods[m].get("method", m)
        for m in METHOD_IDS
        if config.methods[m].get("params", {}).get("variant") == "authors"
    }
    assert variants == {"krum", "afa", "asmr", "cfl", "ditto", "balance", "scclip"}


@pytest.mark.slow  # trains every baseline through the engine
@pytest.mark.parametrize("method_id", METHOD_IDS)
def test_method_runs_end_to_end(prepared: tuple[Config, Path], method_id: str) -> None:
    metrics, out, _ = run(prepared, method_id, "full")
    assert out.is_file()
    assert metrics["malicious_clients"] == [0]
    assert len(metrics["history"]["val_accuracy"]) == 2
    for client in metrics["clients"]:
        assert client["test_accuracy"] is not None and 0.0 <= client["test_accuracy"] <= 1.0
    method = get_method_class(metrics["config"]["method"])
    selections = metrics["history"]["selections"]
    if issubclass(method, P2PMethod):
        assert [len(s) for s in selections] == [4, 4]
    summary = metrics["method_summary"]
    if method_id in ("afa", "asmr"):
        assert summary["flagged"] == [[0], [0]]  # the ANA client, every round
    if method_id == "krum":
        assert all(0 not in chosen for chosen in summary["selected"])
    if method_id == "cfl_split":
        assert len(summary["clusters"]) == 2 and summary["splits"]
        first = summary["splits"][0]
        assert first["round"] == 0 and math.isfinite(first["max_cross_similarity"])


@pytest.mark.slow
@pytest.mark.parametrize("method_id", STATEFUL)
def test_resumed_run_writes_identical_metrics(
    prepared: tuple[Config, Path], method_id: str
) -> None:
    _, uninterrupted, _ = run(prepared, method_id, "uninterrupted")
    stopped, out, ckpt = run(prepared, method_id, "resumed", stop_after=1)
    assert stopped is None and not out.exists()
    assert latest_checkpoint(ckpt) is not None
    resumed, out, _ = run(prepared, method_id, "resumed")
    assert out.read_bytes() == uninterrupted.read_bytes()
    assert resumed["method_summary"] is not None
