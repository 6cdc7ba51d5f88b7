"""FedAgain's corrupted clients (issue 24.2): a corrupted client's local data, training and
validation, is corrupted (its benchmark error E_k sees the corruption); test data stays clean.
The train-only reading stays a declared option (``corruption: {..., subsets: [train]}``)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchlib.data.corruptions import (
    SCENARIOS,
    corrupt_store,
    corrupted_clients,
    main,
    scenario_of,
)
from benchlib.data.store import load_store, write_store
from benchlib.errors import BenchlibError

SUBSETS = ("train", "val", "test")


@pytest.fixture
def store(tmp_path):
    """12 images per client (4 train, 4 val, 4 test) of 4 clients."""
    rng = np.random.default_rng(2)
    n = 48
    index = pd.DataFrame(
        {"sample_id": [f"x{i:02d}" for i in range(n)], "label": rng.integers(0, 2, n),
         "group": "", "source_split": ""}
    )  # fmt: skip
    pixels = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    write_store(tmp_path / "store", dataset="tiny", index=index, pixels=pixels, num_classes=2,
                sources=[])  # fmt: skip
    subsets = np.array(SUBSETS)[(np.arange(n) // 4) % 3]
    split = pd.DataFrame(
        {"sample_id": index["sample_id"], "client": np.arange(n) // 12, "subset": subsets,
         "group": ""}
    )  # fmt: skip
    split.to_csv(tmp_path / "split.csv", index=False)
    return tmp_path, pixels, split


def changed_subsets(root, name, pixels, split) -> dict[tuple[int, str], int]:
    """(client, subset) -> how many of its images differ from the clean store."""
    out = load_store(root / name).pixels
    changed = [bool((out[i] != pixels[i]).any()) for i in range(len(pixels))]
    frame = split.assign(changed=changed)
    counts = frame.groupby(["client", "subset"])["changed"].sum()
    return {(int(c), str(s)): int(v) for (c, s), v in counts.items()}


def test_corrupted_clients_get_corrupted_training_and_validation_data(store):
    root, pixels, split = store
    scenario = scenario_of({"ratio": 0.5, "severity": 2})
    assert scenario.subsets == ("train", "val")
    assert all(s.subsets == ("train", "val") for s in SCENARIOS.values())
    record = corrupt_store(root / "store", root / "split.csv", root / "out", 4, scenario, seed=5)
    clients = corrupted_clients(4, 0.5, 5)
    assert record["subsets"] == ["train", "val"] and record["images"] == 2 * 8
    changed = changed_subsets(root, "out", pixels, split)
    for client in range(4):
        hit = client in clients
        assert changed[(client, "train")] == (4 if hit else 0)
        assert changed[(client, "val")] == (4 if hit else 0)  # E_k's data: corrupted too
        assert changed[(client, "test")] == 0  # the global model is scored on clean data


def test_train_only_corruption_is_a_declared_option(store):
    root, pixels, split = store
    value = {"ratio": 0.5, "severity": 2, "subsets": ["train"]}
    assert scenario_of(value).subsets == ("train",)
    assert scenario_of({**value, "subsets": ["val", "train"]}).subsets == ("train", "val")
    for bad in (["test"], ["val"], ["train", "test"], []):
        with pytest.raises(BenchlibError, match="subsets"):
            scenario_of({**value, "subsets": bad})
    with pytest.raises(BenchlibError):
        scenario_of({**value, "clients": 3})
    # the workflow's command line: the scenario as JSON
    main(["corrupt", "--store", str(root / "store"), "--split", str(root / "split.csv"),
          "--out", str(root / "old"), "--clients", "4", "--scenario", json.dumps(value),
          "--seed", "5"])  # fmt: skip
    assert load_store(root / "old").manifest["corruption"]["subsets"] == ["train"]
    changed = changed_subsets(root, "old", pixels, split)
    for client in corrupted_clients(4, 0.5, 5):
        assert changed[(client, "train")] == 4
        assert changed[(client, "val")] == 0 and changed[(client, "test")] == 0


def test_train_only_reading_as_a_corruption_grid_axis_value(tmp_path):
    import yaml
    from conftest import REPO

    from benchlib.config import load_config
    from benchlib.report.kinds.fedagain_fig13 import scenario_label

    config = yaml.safe_load((REPO / "config" / "fedagain_demo.yaml").read_text())
    config["reports"] = {}
    train_only = {"ratio": 0.3, "severity": 3, "subsets": ["train"]}
    config["experiments"]["demo_corruption"]["axes"]["corruption"] = [train_only, "moderate"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    datasets = load_config(path).datasets
    variant = "mnist5k_ls__corruption_ratio0p3_severity3_subsetstrain"
    assert datasets[variant]["corruption"] == train_only
    assert scenario_of(train_only).subsets == ("train",)
    assert scenario_of("moderate").subsets == ("train", "val")
    assert scenario_label(train_only) == "30%, s3, train only"
    assert scenario_label("moderate") == "Moderate (30%, s4)"
