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
    client_fractions,
    corrupt_image,
    corrupt_store,
    corrupted_clients,
    main,
    picked_rows,
    scenario_of,
    settings_key,
)
from benchlib.data.store import load_store, write_store
from benchlib.primitives.errors import BenchlibError

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

    from benchlib.configuration.config import load_config
    from benchlib.report.kinds.fedagain.fedagain_fig13 import scenario_label

    config = yaml.safe_load((REPO / "config" / "fedagain_demo.yaml").read_text())
    config["reports"] = {}
    train_only = {"ratio": 0.3, "severity": 3, "subsets": ["train"]}
    config["experiments"]["demo_corruption"]["axes"]["corruption"] = [train_only, "moderate"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    datasets = load_config(path).datasets
    variant = "mnist5k_ls__corruption_ratio0p3_severity3_subsetstrain"
    assert datasets[variant].corruption.to_dict() == {**train_only, "image_fraction": 1.0}  # filled
    assert scenario_of(train_only).subsets == ("train",)
    assert scenario_of("moderate").subsets == ("train", "val")
    assert scenario_label(train_only) == "30%, s3, train only"
    assert scenario_label("moderate") == "Moderate (30%, s4)"


def test_image_fraction_corrupts_a_seeded_share_of_each_subset(store):
    # paper Sec. 5.1.4: rho_k of a client's images; 4 train + 4 val images per client, rho 0.5
    # -> round(0.5 x 4) = 2 of each subset, the same rows on a second run
    root, pixels, split = store
    scenario = scenario_of({"ratio": 1.0, "severity": 2, "image_fraction": 0.5})
    assert scenario.image_fraction == 0.5 and scenario_of("moderate").image_fraction == 1.0
    record = corrupt_store(root / "store", root / "split.csv", root / "a", 4, scenario, seed=5)
    assert record["images"] == 4 * 2 * 2 and record["fractions"] == dict.fromkeys("0123", 0.5)
    changed = changed_subsets(root, "a", pixels, split)
    assert all(changed[(c, s)] == 2 for c in range(4) for s in ("train", "val"))
    assert all(changed[(c, "test")] == 0 for c in range(4))
    rows = split.index[(split["client"] == 1) & (split["subset"] == "val")].to_numpy()
    expected = picked_rows(rows, 0.5, 5, 1, "val")
    out = load_store(root / "a").pixels
    assert [i for i in rows if (out[i] != pixels[i]).any()] == expected.tolist()
    corrupt_store(root / "store", root / "split.csv", root / "b", 4, scenario, seed=5)
    assert np.array_equal(load_store(root / "b").pixels, out)


def test_paper_rho_k_scenario_draws_one_fraction_per_client(store):
    # "rho_k is randomly chosen in [0 %, 10 %, 30 %, 50 %] for each client k": every client,
    # severity 3; of 4 images per subset round(rho x 4) = 0, 0, 1, 2 are corrupted
    root, pixels, split = store
    scenario = SCENARIOS["image_fractions"]
    assert (scenario.ratio, scenario.severity) == (1.0, 3)
    assert scenario.image_fraction == (0.0, 0.1, 0.3, 0.5)
    record = corrupt_store(root / "store", root / "split.csv", root / "r", 4, scenario, seed=1)
    fractions = {int(c): f for c, f in record["fractions"].items()}
    assert set(fractions) == {0, 1, 2, 3} and set(fractions.values()) <= {0.0, 0.1, 0.3, 0.5}
    assert fractions == client_fractions([0, 1, 2, 3], scenario.image_fraction, 1)
    draws = {
        f
        for seed in range(20)
        for f in client_fractions([0, 1, 2, 3], (0.0, 0.1, 0.3, 0.5), seed).values()
    }
    assert draws == {0.0, 0.1, 0.3, 0.5}
    per_image = {0.0: 0, 0.1: 0, 0.3: 1, 0.5: 2}
    changed = changed_subsets(root, "r", pixels, split)
    for client, fraction in fractions.items():
        assert changed[(client, "train")] == per_image[fraction]
        assert changed[(client, "val")] == per_image[fraction]
    as_list = {"ratio": 1.0, "severity": 3, "image_fraction": [0, 0.1, 0.3, 0.5]}
    assert scenario_of(as_list).image_fraction == scenario.image_fraction
    for bad in (1.5, [], [0.2, -1], "half", True):
        with pytest.raises(BenchlibError, match="image_fraction"):
            scenario_of({"ratio": 1.0, "severity": 3, "image_fraction": bad})


def test_settings_key_names_resolved_settings_and_the_store_format(monkeypatch):
    import benchlib.data.corruptions as corruptions

    moderate = scenario_of("moderate")
    key = settings_key(moderate, 10, 0)
    explicit = {"ratio": 0.3, "severity": 4, "subsets": ["train", "val"], "image_fraction": 1}
    assert settings_key(scenario_of(explicit), 10, 0) == key  # defaults filled in
    others = [
        settings_key(scenario_of({**explicit, "subsets": ["train"]}), 10, 0),
        settings_key(scenario_of({**explicit, "image_fraction": 0.5}), 10, 0),
        settings_key(moderate, 20, 0),
        settings_key(moderate, 10, 1),
    ]
    assert len({key, *others}) == 5
    monkeypatch.setattr(corruptions, "STORE_FORMAT", corruptions.STORE_FORMAT + 1)
    assert settings_key(moderate, 10, 0) != key  # a code change that alters stores: new path
    monkeypatch.undo()
    with pytest.raises(SystemExit):
        main(["corrupt", "--store", "s", "--split", "s.csv", "--out", "o", "--clients", "10",
              "--scenario", "moderate", "--settings", "0123456789ab"])  # fmt: skip


def test_corruption_after_whitening_keeps_its_contrast_change():
    # paper order: patches are whitened when the dataset is prepared (Sec. 4.2.4), the clients'
    # training images are corrupted in the FL simulation (Sec. 5.1.4): corrupting the whitened
    # patch keeps the lowered contrast; whitening after it would normalise it away
    from benchlib.data.patches import whiten

    rng = np.random.default_rng(0)
    patch = whiten(rng.integers(30, 230, (64, 64, 3), dtype=np.uint8))
    assert abs(patch.astype(float).std() - 42.5) < 1.0
    after = corrupt_image(patch, "contrast", 5, 0).astype(float)
    assert after.std() < 0.3 * 42.5
    before = whiten(
        corrupt_image(rng.integers(30, 230, (64, 64, 3), dtype=np.uint8), "contrast", 5, 0)
    )
    assert abs(before.astype(float).std() - 42.5) < 1.5


def test_image_fraction_as_a_corruption_grid_axis_value(tmp_path):
    import yaml
    from conftest import REPO

    from benchlib.configuration.config import load_config
    from benchlib.report.kinds.fedagain.fedagain_fig13 import scenario_label

    config = yaml.safe_load((REPO / "config" / "fedagain_demo.yaml").read_text())
    config["reports"] = {}
    half = {"ratio": 0.3, "severity": 3, "image_fraction": 0.5}
    config["experiments"]["demo_corruption"]["axes"]["corruption"] = [half, "image_fractions"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    loaded = load_config(path)
    variant = loaded.datasets["mnist5k_ls__corruption_image_fraction0p5_ratio0p3_severity3"]
    assert variant.corruption.to_dict() == {**half, "subsets": ["train", "val"]}
    store, _ = loaded.cell_inputs("mnist5k_ls__corruption_imagefractions")
    key = settings_key(SCENARIOS["image_fractions"], 10, 0)
    assert store == f"results/corrupted/mnist5k_ls__corruption_imagefractions/{key}"
    assert scenario_label(half) == "30%, s3, rho 50% of images"
    assert scenario_label("image_fractions") == (
        "Per-client image fractions (100%, s3, rho 0/10/30/50% of images)"
    )
