"""The LEAF JSON importer (source femnist_leaf) on the real FEMNIST sample beside the project
(../shared/data/femnist_leaf_sample), checked against an independent reading of the JSON files,
plus its errors on damaged LEAF directories."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers.femnist_sample import LEAF_SAMPLE, SHARDS, TEST_PER_SHARD, TRAIN_PER_SHARD

from benchlib.data.registry import get_dataset
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError

WRITERS_PER_SHARD = [6, 6, 6, 6, 5, 6, 6, 6]


def read_json(split: str, shard: str) -> dict:
    return json.loads((LEAF_SAMPLE / split / f"{shard}_{split}_9.json").read_text())


@pytest.fixture(scope="module")
def leaf_store(tmp_path_factory):
    out = tmp_path_factory.mktemp("leaf") / "femnist_sample"
    get_dataset("femnist_leaf").prepare(out, {"path": str(LEAF_SAMPLE)})
    return load_store(out)


def test_sample_counts_writers_and_shards(leaf_store):
    index = leaf_store.index
    assert len(index) == len(leaf_store.pixels) == 6184
    assert (index["source_split"] == "train").sum() == 5540
    assert (index["source_split"] == "test").sum() == 644
    assert index["group"].nunique() == 47
    assert sorted(index["shard"].unique()) == SHARDS
    for shard, n_train, n_test, n_writers in zip(
        SHARDS, TRAIN_PER_SHARD, TEST_PER_SHARD, WRITERS_PER_SHARD, strict=True
    ):
        rows = index[index["shard"] == shard]
        assert (rows["source_split"] == "train").sum() == n_train
        assert (rows["source_split"] == "test").sum() == n_test
        assert rows["group"].nunique() == n_writers
        assert set(rows["group"]) == set(read_json("train", shard)["users"])
    # every writer belongs to exactly one shard
    assert (index.groupby("group")["shard"].nunique() == 1).all()
    manifest = leaf_store.manifest
    assert manifest["num_classes"] == 62 and manifest["image_shape"] == [28, 28]
    assert manifest["writers"] == 47
    assert manifest["samples_by_split"] == {"train": 5540, "test": 644}
    assert manifest["shards"]["all_data_4_niid_05_keep_0"] == {
        "writers": 5,
        "train": 685,
        "test": 79,
    }


def test_labels_and_pixels_match_the_json(leaf_store):
    index, pixels = leaf_store.index, leaf_store.pixels
    assert pixels.dtype == np.uint8 and pixels.shape == (6184, 28, 28)
    labels = index["label"].to_numpy()
    assert labels.min() == 0 and labels.max() == 61
    assert set(labels[index["source_split"].to_numpy() == "train"]) == set(range(62))
    row_of = {sid: i for i, sid in enumerate(index["sample_id"])}
    for split in ("train", "test"):
        data = read_json(split, SHARDS[3])
        for writer in data["users"]:
            entry = data["user_data"][writer]
            for i, (x, y) in enumerate(zip(entry["x"], entry["y"], strict=True)):
                row = row_of[f"{writer}-{split}-{i:05d}"]
                expected = np.rint(np.asarray(x) * 255).astype(np.uint8).reshape(28, 28)
                np.testing.assert_array_equal(pixels[row], expected)
                assert labels[row] == y
                assert index.at[row, "group"] == writer
                assert index.at[row, "shard"] == SHARDS[3]
    # LEAF convention kept: white background (255), dark ink; not inverted
    assert np.median(pixels) == 255
    assert (pixels.reshape(len(pixels), -1).min(axis=1) < 128).mean() > 0.99


def test_manifest_records_the_checksums_of_every_json_file(leaf_store):
    listed = {}
    for line in (LEAF_SAMPLE / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        listed[name] = digest
    recorded = {s["name"]: s["sha256"] for s in leaf_store.manifest["sources"]}
    assert recorded == listed
    assert len(recorded) == 16


def test_store_is_deterministic(leaf_store, tmp_path):
    again = tmp_path / "again"
    get_dataset("femnist_leaf").prepare(again, {"path": str(LEAF_SAMPLE)})
    second = load_store(again)
    assert second.manifest["files"] == leaf_store.manifest["files"]


def test_relative_path_resolves_against_the_project_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # ../shared/... does not exist from here
    out = tmp_path / "store"
    get_dataset("femnist_leaf").prepare(out, {"path": "../shared/data/femnist_leaf_sample"})
    assert load_store(out).manifest["num_samples"] == 6184


# ------------------------------------------------------------------------- damaged directories
def write_leaf(root: Path, shard: str, split: str, writers: dict[str, tuple[list, list]]) -> Path:
    folder = root / split
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "users": list(writers),
        "num_samples": [len(y) for _, y in writers.values()],
        "user_data": {w: {"x": x, "y": y} for w, (x, y) in writers.items()},
    }
    path = folder / f"{shard}_{split}_9.json"
    path.write_text(json.dumps(data))
    return path


def image(value: float = 1.0) -> list[float]:
    return [value] * 784


@pytest.fixture
def tiny_leaf(tmp_path):
    root = tmp_path / "leaf"
    for s in range(2):
        write_leaf(root, f"all_data_{s}", "train", {f"w{s}a": ([image(), image(0.0)], [1, 2])})
        write_leaf(root, f"all_data_{s}", "test", {f"w{s}a": ([image(0.5)], [61])})
    return root


def prepare(root: Path, out: Path) -> None:
    get_dataset("femnist_leaf").prepare(out, {"path": str(root)})


def test_tiny_leaf_directory_imports(tiny_leaf, tmp_path):
    prepare(tiny_leaf, tmp_path / "out")
    store = load_store(tmp_path / "out")
    assert store.index["sample_id"].tolist() == [
        "w0a-test-00000",
        "w0a-train-00000",
        "w0a-train-00001",
        "w1a-test-00000",
        "w1a-train-00000",
        "w1a-train-00001",
    ]
    assert store.pixels[:, 0, 0].tolist() == [128, 255, 0, 128, 255, 0]


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda r: (r / "test" / "all_data_1_test_9.json").unlink(), "shard all_data_1 .* no test"),
        (lambda r: shutil.rmtree(r / "test"), "has no test/ folder"),
        (
            lambda r: write_leaf(r, "all_data_1", "train", {"w1a": ([image(1.5)], [1])}),
            r"pixel values outside \[0, 1\]",
        ),
        (
            lambda r: write_leaf(r, "all_data_1", "train", {"w1a": ([image()], [62])}),
            r"labels outside 0..61",
        ),
        (
            lambda r: write_leaf(r, "all_data_1", "train", {"w0a": ([image()], [3])}),
            "writer w0a appears in LEAF shards all_data_0 and all_data_1",
        ),
        (
            lambda r: (r / "train" / "all_data_0_train_9.json").write_text('{"users": ["w"]}'),
            "lacks LEAF's users / num_samples / user_data",
        ),
        (
            lambda r: (r / "train" / "notes.json").write_text("{}"),
            "not a LEAF train shard name",
        ),
    ],
)
def test_damaged_leaf_directory_gives_a_clear_error_and_no_store(
    tiny_leaf, tmp_path, damage, message
):
    damage(tiny_leaf)
    with pytest.raises(BenchlibError, match=message):
        prepare(tiny_leaf, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_sha256sums_mismatch_is_detected(tiny_leaf, tmp_path):
    name = "train/all_data_0_train_9.json"
    digest = hashlib.sha256((tiny_leaf / name).read_bytes()).hexdigest()
    (tiny_leaf / "SHA256SUMS").write_text(f"{digest}  {name}\n")
    prepare(tiny_leaf, tmp_path / "ok")  # matching list passes
    (tiny_leaf / "SHA256SUMS").write_text(f"{'0' * 64}  {name}\n")
    with pytest.raises(BenchlibError, match=r"does not match .*SHA256SUMS"):
        prepare(tiny_leaf, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_missing_path_setting_and_missing_directory(tmp_path):
    with pytest.raises(BenchlibError, match=r"source 'femnist_leaf' params: path must be given"):
        get_dataset("femnist_leaf").prepare(tmp_path / "out", {})
    with pytest.raises(BenchlibError, match=r"params.path: .*nowhere not found"):
        prepare(tmp_path / "nowhere", tmp_path / "out")
