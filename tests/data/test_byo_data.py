"""Bring-your-own data: a missing local copy stops the prepare step, never the config check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from conftest import REPO

from benchlib.commands.cli import main
from benchlib.configuration.config import Config
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.store import load_store, write_store
from benchlib.declarations.params import Param, Params

PREPARED: list[str] = []


def build_from_local_copy(out: Path, params: dict[str, Any]) -> None:
    """Note the local copy it was given and write a 4-image store (as a real source would)."""
    PREPARED.append(str(params["path"]))
    index = pd.DataFrame(
        {
            "sample_id": [f"s{i}" for i in range(4)],
            "label": [0, 1, 0, 1],
            "group": "g",
            "source_split": "",
        }
    )
    pixels = np.zeros((4, 8, 8), dtype=np.uint8)
    write_store(out, dataset="mimic", index=index, pixels=pixels, num_classes=2, sources=[])


BYO = register_dataset(
    DatasetSource(
        name="test_byo_credentialed",
        build=build_from_local_copy,
        num_classes=2,
        image_shape=(1, 8, 8),
        access_page="https://physionet.org/content/example/",
        params=Params({"path": Param({"type": "string"}, description="your local copy")}),
    )
)


def byo_config() -> dict:
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["datasets"]["mnist5k"]["source"] = BYO.name
    return config


def test_config_with_a_missing_local_copy_loads(tmp_path):
    config = Config(byo_config())  # no params.path: still a valid config (the DAG resolves)
    assert config.dataset_spec("mnist5k")["source"] == BYO.name


def test_prepare_names_the_config_key_and_the_access_page(tmp_path, capsys):
    out = tmp_path / "store"
    spec = {"dataset": "mimic", "source": BYO.name, "params": {}}
    assert main(["prepare", "--spec", json.dumps(spec), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "datasets.mimic.params.path" in error
    assert "https://physionet.org/content/example/" in error and not out.exists()
    spec["params"] = {"path": str(tmp_path / "nowhere")}
    assert main(["prepare", "--spec", json.dumps(spec), "--out", str(out)]) == 2
    assert "nowhere' does not exist" in capsys.readouterr().err
    spec["params"] = {"path": str(tmp_path)}
    assert main(["prepare", "--spec", json.dumps(spec), "--out", str(out)]) == 0
    assert [str(tmp_path)] == PREPARED
    assert load_store(out).dataset_source == BYO.name
