"""Bring-your-own data: a missing local copy stops the prepare step, never the config check."""

from __future__ import annotations

import json

import yaml
from conftest import REPO

from benchlib.cli import main
from benchlib.config import Config
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.params import Param, Params

PREPARED: list[str] = []
BYO = register_dataset(
    DatasetSource(
        name="test_byo_credentialed",
        build=lambda out, params: PREPARED.append(str(params["path"])),
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
