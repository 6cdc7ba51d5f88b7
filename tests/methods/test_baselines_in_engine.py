"""The baselines config (config/methods_smoke.yaml) through the real engine on a tiny config:
mnist5k, 4 clients, 2 rounds, narrow CNN, client 0 malfunctioning (ANA). A method id that only
names a registered method's variant at its defaults is the very cell tests/methods/
test_every_method.py trains (with the method-specific checks and resume); this module trains the
ids the config sets parameters for (Multi-Krum, CFL with forced splits, SCCLIP's b), plus resume
equivalence of the forced-split CFL: a run stopped after one round and resumed writes the same
metrics.json, byte for byte."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from helpers.paths import REPO
from helpers.tiny_cells import TINY_CELL, tiny_config

from benchlib.configuration.config import Cell, Config, load_config
from benchlib.data.split import SplitSpec, make_split, write_split
from benchlib.data.store import load_store
from benchlib.fl.checkpoint import latest_checkpoint
from benchlib.fl.engine import run_cell
from benchlib.methods.base import P2PMethod, get_method_class

CONFIG = REPO / "config" / "methods_smoke.yaml"
EXPERIMENT = "baselines_smoke"
METHOD_IDS = yaml.safe_load(CONFIG.read_text())["experiments"][EXPERIMENT]["methods"]
STATEFUL = ["afa", "cfl_split", "ditto"]


def cell_spec(config: Config, method_id: str) -> dict:
    return config.cell_spec(Cell(EXPERIMENT, "ana", method_id, 1, 0))


def registry_twin(config: Config, method_id: str) -> bool:
    """Whether ``method_id`` resolves to the cell test_every_method trains: the same method, model,
    training and malfunction, at the variant's default parameters."""
    spec = cell_spec(config, method_id)
    variant = spec["method_params"].get("variant", "paper")
    twin = tiny_config(spec["method"], variant).cell_spec(TINY_CELL)
    same = ("method", "method_params", "model", "training", "malfunction_params", "clients")
    return all(spec[key] == twin[key] for key in same)


CONFIGURED = [m for m in METHOD_IDS if not registry_twin(load_config(CONFIG), m)]


@pytest.fixture(scope="module")
def prepared(mnist_store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, Path]:
    torch.set_num_threads(1)
    config = load_config(CONFIG)
    root = tmp_path_factory.mktemp("baselines")
    dataset = config.dataset_spec(config.experiment_dataset(EXPERIMENT))
    (root / "store").symlink_to(mnist_store)
    split = make_split(load_store(mnist_store), SplitSpec.from_config(dataset))
    write_split(split, root / "split.csv")
    return config, root


def run(prepared: tuple[Config, Path], method_id: str, tag: str, **kwargs: Any) -> Any:
    config, root = prepared
    spec = cell_spec(config, method_id)
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


def test_only_the_configured_ids_differ_from_the_registry_cells() -> None:
    # the others (e.g. fedprox's mu 0.01, ditto's lam 0.5) are the defaults test_every_method runs
    assert CONFIGURED == ["multikrum", "cfl_split", "scclip"]


@pytest.mark.slow  # trains through the engine
@pytest.mark.parametrize("method_id", CONFIGURED)
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
    if method_id == "multikrum":
        assert all(len(chosen) == 2 and 0 not in chosen for chosen in summary["selected"])
    if method_id == "cfl_split":
        assert len(summary["clusters"]) == 2 and summary["splits"]
        first = summary["splits"][0]
        assert first["round"] == 0 and math.isfinite(first["max_cross_similarity"])


@pytest.mark.slow
@pytest.mark.parametrize("method_id", [m for m in STATEFUL if m in CONFIGURED])
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
