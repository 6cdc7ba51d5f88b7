"""The mnist5k source and the prepared store."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchlib.data.sources.mnist5k import SOURCE_SHA256, default_source_file
from benchlib.data.store import load_store, write_store
from benchlib.errors import BenchlibError


def test_mnist5k_store_matches_the_raw_csv(mnist_store):
    data = load_store(mnist_store)
    with gzip.open(default_source_file(), "rt") as handle:
        raw = np.array([[int(float(v)) for v in line.split(",")] for line in handle])
    assert data.pixels.shape == (5000, 28, 28) and data.pixels.dtype == np.uint8
    np.testing.assert_array_equal(data.pixels.reshape(5000, -1), raw[:, :784])
    np.testing.assert_array_equal(data.index["label"].to_numpy(), raw[:, 784])
    assert np.bincount(data.index["label"]).tolist() == [500] * 10
    assert data.index["sample_id"].is_unique
    assert data.manifest["sources"][0]["sha256"] == SOURCE_SHA256
    assert data.num_classes == 10


def _copy_store(source: Path, target: Path) -> Path:
    target.mkdir()
    for name in ("index.csv", "manifest.json", "pixels.npy"):
        (target / name).write_bytes((source / name).read_bytes())
    return target


def test_tampered_pixels_are_detected_by_the_full_check_only(mnist_store, tmp_path):
    """A cell checks sizes (cheap); the full check (benchlib verify-store) re-hashes."""
    copy = _copy_store(mnist_store, tmp_path / "copy")
    pixels = np.load(copy / "pixels.npy")
    pixels[0, 0, 0] ^= 1
    np.save(copy / "pixels.npy", pixels)
    assert load_store(copy).pixels[0, 0, 0] == pixels[0, 0, 0]  # same size: quick check passes
    with pytest.raises(BenchlibError, match="does not match its manifest checksum"):
        load_store(copy, verify="full")


def test_truncated_or_grown_store_files_fail_the_quick_check(mnist_store, tmp_path):
    copy = _copy_store(mnist_store, tmp_path / "copy")
    manifest = json.loads((copy / "manifest.json").read_text())
    assert manifest["sizes"]["pixels.npy"] == (copy / "pixels.npy").stat().st_size
    with open(copy / "pixels.npy", "ab") as handle:
        handle.write(b"x")
    with pytest.raises(BenchlibError, match=r"pixels.npy has \d+ bytes but its manifest records"):
        load_store(copy)


def test_a_store_of_every_task_round_trips(tmp_path):
    index = pd.DataFrame(
        {"sample_id": ["a", "b", "c"], "label": [0, 1, 0], "group": "", "source_split": ""}
    )
    images = np.arange(3 * 4 * 4, dtype=np.uint8).reshape(3, 4, 4)
    masks = (images % 2).astype(np.uint8)
    write_store(
        tmp_path / "seg", dataset="seg", index=index, pixels=images, masks=masks, num_classes=2,
        sources=[], task="segmentation",
    )  # fmt: skip
    seg = load_store(tmp_path / "seg", verify="full")
    assert seg.task == "segmentation" and np.array_equal(seg.arrays["masks"], masks)
    features = np.linspace(0, 1, 6, dtype=np.float32).reshape(3, 2)
    targets = np.array([[0.5], [1.5], [2.5]], dtype=np.float32)
    write_store(
        tmp_path / "tab", dataset="tab", index=index.assign(label=0), features=features,
        targets=targets, num_classes=1, sources=[], task="regression",
    )  # fmt: skip
    tab = load_store(tmp_path / "tab")
    assert tab.task == "regression" and tab.inputs.dtype == np.float32
    np.testing.assert_array_equal(tab.arrays["targets"], targets)
    with pytest.raises(BenchlibError, match="NaN/Inf"):
        write_store(
            tmp_path / "bad", dataset="bad", index=index, features=features * np.nan,
            targets=targets, num_classes=1, sources=[], task="regression",
        )  # fmt: skip


def test_wrong_source_checksum_is_refused(tmp_path):
    from benchlib.data.sources.mnist5k import prepare_mnist5k

    with pytest.raises(BenchlibError, match="checksum mismatch"):
        prepare_mnist5k(tmp_path / "out", {"sha256": "0" * 64})
    assert not (tmp_path / "out").exists()


def test_missing_store_names_the_fix(tmp_path):
    with pytest.raises(BenchlibError, match="run the prepare step"):
        load_store(tmp_path / "nothing")


def test_manifest_lists_file_checksums(mnist_store):
    manifest = json.loads((mnist_store / "manifest.json").read_text())
    assert set(manifest["files"]) == {"index.csv", "pixels.npy"}
    assert manifest["image_shape"] == [28, 28]
