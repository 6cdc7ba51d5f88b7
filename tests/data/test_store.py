"""The mnist5k source and the prepared store."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.store_edits import copy_store, edit_manifest, reseal

from benchlib.data.sources.mnist5k import SOURCE_SHA256, default_source_file
from benchlib.data.store import load_store, record_source, write_store
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.io import sha256_file


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


# ------------------------------------------------------------------ validity of a loaded store
def _patch_header(store: Path, old: bytes, new: bytes) -> None:
    raw = (store / "pixels.npy").read_bytes()
    assert raw[:128].count(old) == 1 and len(old) == len(new)
    (store / "pixels.npy").write_bytes(raw.replace(old, new, 1))


def _edit_index(store: Path, edit) -> None:
    index = pd.read_csv(store / "index.csv", dtype=str, keep_default_na=False)
    edit(index)
    index.to_csv(store / "index.csv", index=False)


def _save_pixels(store: Path, pixels: np.ndarray, **kwargs) -> None:
    np.save(store / "pixels.npy", pixels, **kwargs)


def _set(key, value):
    return lambda m: m.__setitem__(key, value)


# (edit of the store, reseal the checksums after it?, phrase of the error)
def _unsigned(manifest):
    return {k: v for k, v in manifest.items() if k != "manifest_sha256"}


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-1000])


def _unsigned_with_sizes(store: Path):
    """An unsigned manifest whose sizes and checksums match the (damaged) files, as an older
    benchlib's could."""

    def edit(manifest):
        for name in manifest["files"]:
            manifest["files"][name] = sha256_file(store / name)
            manifest["sizes"][name] = (store / name).stat().st_size
        return _unsigned(manifest)

    return edit


DAMAGED_STORES = {
    # same byte size: only the header check sees it (it trained at 9.7 % instead of 33.6 %)
    "header_shape": (
        lambda s: _patch_header(s, b"(5000, 28, 28)", b"(5000, 28, 27)"),
        False,
        "pixels.npy has rows of shape [28, 27] but the manifest records [28, 28]",
    ),
    "header_dtype": (
        lambda s: _patch_header(s, b"'|u1'", b"'<i1'"),
        False,
        "pixels.npy holds int8 values, not uint8",
    ),
    # same byte size: every label 0 (it reached 100 % accuracy)
    "labels_zeroed": (
        lambda s: _edit_index(s, lambda t: t.__setitem__("label", "0")),
        False,
        "index.csv does not match its manifest checksum",
    ),
    "num_classes_edited": (
        lambda s: edit_manifest(s, _set("num_classes", 100)),
        False,
        "manifest.json was changed after the store was written",
    ),
    "labels_beyond_num_classes": (
        lambda s: edit_manifest(s, _set("num_classes", 5)),
        True,
        "index.csv has the label 5, outside 0..4 (the manifest's num_classes is 5)",
    ),
    "float_pixels": (
        lambda s: _save_pixels(s, np.load(s / "pixels.npy").astype(np.float64)),
        True,
        "pixels.npy holds float64 values, not uint8",
    ),
    "object_pixels": (
        lambda s: _save_pixels(s, np.empty(5000, dtype=object), allow_pickle=True),
        True,
        "pixels.npy holds object values, not uint8",
    ),
    "fewer_pixel_rows": (
        lambda s: _save_pixels(s, np.load(s / "pixels.npy")[:4000]),
        True,
        "pixels.npy has shape (4000, 28, 28): 4000 rows for the 5000 rows of index.csv",
    ),
    "non_integer_label": (
        lambda s: _edit_index(s, lambda t: t.__setitem__("label", "1.5")),
        True,
        "index.csv has labels that are not integers",
    ),
    "duplicate_sample_id": (
        lambda s: _edit_index(
            s,
            lambda t: t.__setitem__(
                "sample_id", t["sample_id"].where(t.index != 7, t["sample_id"][3])
            ),
        ),
        True,
        "index.csv lists the sample id",
    ),
    "index_rows_vs_manifest": (
        lambda s: edit_manifest(s, _set("num_samples", 4999)),
        True,
        "index.csv has 5000 rows but the manifest records 4999",
    ),
    "bogus_array": (
        lambda s: edit_manifest(s, _set("arrays", ["bogus"])),
        True,
        "manifest names unknown arrays ['bogus']",
    ),
    "source_not_a_string": (
        lambda s: edit_manifest(s, _set("dataset_source", ["mnist5k"])),
        True,
        "manifest dataset_source is not a string",
    ),
    "manifest_is_a_list": (
        lambda s: (s / "manifest.json").write_text("[]"),
        False,
        "manifest.json holds a list, not an object",
    ),
    "manifest_without_sizes": (
        lambda s: edit_manifest(
            s,
            lambda m: {
                k: v for k, v in m.items() if k not in ("sizes", "files", "manifest_sha256")
            },
        ),
        False,
        "manifest.json records no manifest_sha256 (prepared by an older benchlib)",
    ),
    # a store prepared before manifests were checksummed: its fields and sizes are not trusted
    "unsigned_manifest_with_another_class_count": (
        lambda s: edit_manifest(s, lambda m: {**_unsigned(m), "num_classes": 100}),
        False,
        "manifest.json records no manifest_sha256 (prepared by an older benchlib), so nothing",
    ),
    "unsigned_manifest_with_truncated_pixels": (
        lambda s: (_truncate(s / "pixels.npy"), edit_manifest(s, _unsigned_with_sizes(s))),
        False,
        f"`rm -r {{store}}`, then `snakemake {{store}}{os.sep}manifest.json` with your config",
    ),
    "manifest_not_utf8": (
        lambda s: (s / "manifest.json").write_bytes(b'{"dataset": "\xff"}'),
        False,
        "manifest.json is not valid JSON (not UTF-8)",
    ),
}


@pytest.mark.parametrize("name", sorted(DAMAGED_STORES))
def test_a_damaged_or_hand_edited_store_is_refused_on_load(name, mnist_store, tmp_path):
    damage, seal, phrase = DAMAGED_STORES[name]
    store = copy_store(mnist_store, tmp_path / "store")
    damage(store)
    if seal:
        reseal(store)
    phrase = phrase.format(store=store)
    with pytest.raises(BenchlibError, match=re.escape(phrase)):
        load_store(store)
    # the full check (verify-store) may see a checksum mismatch first
    full = re.escape(phrase) if seal else f"{re.escape(phrase)}|does not match its manifest"
    with pytest.raises(BenchlibError, match=full):
        load_store(store, verify="full")


def test_verify_store_reads_the_contents(tmp_path):
    """What only the full check sees: NaN in float arrays, mask classes beyond the count."""
    index = pd.DataFrame({"sample_id": ["a", "b"], "label": 0, "group": "", "source_split": ""})
    images = np.zeros((2, 4, 4), dtype=np.uint8)
    write_store(
        tmp_path / "seg", dataset="seg", index=index, pixels=images, masks=images.copy(),
        num_classes=2, sources=[], task="segmentation",
    )  # fmt: skip
    masks = images.copy()
    masks[1, 2, 2] = 7
    np.save(tmp_path / "seg" / "masks.npy", masks)
    reseal(tmp_path / "seg")
    assert load_store(tmp_path / "seg").arrays["masks"].max() == 7  # quick: headers only
    with pytest.raises(BenchlibError, match=r"masks hold the class 7, outside 0\.\.1"):
        load_store(tmp_path / "seg", verify="full")
    write_store(
        tmp_path / "tab", dataset="tab", index=index, features=np.zeros((2, 3), np.float32),
        targets=np.zeros((2, 1), np.float32), num_classes=1, sources=[], task="regression",
    )  # fmt: skip
    np.save(tmp_path / "tab" / "targets.npy", np.array([[0.0], [np.nan]], dtype=np.float32))
    reseal(tmp_path / "tab")
    with pytest.raises(BenchlibError, match="targets hold NaN/Inf"):
        load_store(tmp_path / "tab", verify="full")


def test_verify_store_on_the_command_line(mnist_store, tmp_path, capsys):
    from benchlib.commands.cli import main

    assert main(["verify-store", str(mnist_store)]) == 0
    assert "every file matches its manifest and the store is valid" in capsys.readouterr().out
    store = copy_store(mnist_store, tmp_path / "store")
    edit_manifest(store, _set("num_classes", 5))
    reseal(store)
    assert main(["verify-store", str(store)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        f"error: store {store}: index.csv has the label 5, outside 0..4 (the manifest's "
        "num_classes is 5); delete it and prepare it again"
    ]


def test_the_manifest_records_the_source_that_prepared_the_store(mnist_store, tmp_path):
    """Every prepare records the registered source (for the cell's provenance) and renews the
    manifest's own checksum; a store written before it was recorded still loads."""
    assert load_store(mnist_store).dataset_source == "mnist5k"  # prepared by the fixture
    store = copy_store(mnist_store, tmp_path / "store")
    edit_manifest(store, lambda m: m.pop("dataset_source") and None)
    reseal(store)
    assert load_store(store).dataset_source is None
    before = json.loads((store / "manifest.json").read_text())
    record_source(store, "mnist5k")
    data = load_store(store, verify="full")
    assert data.dataset_source == "mnist5k"
    after = dict(data.manifest)
    assert after.pop("dataset_source") == "mnist5k"
    assert after.pop("manifest_sha256") != before.pop("manifest_sha256")
    assert after == before  # nothing else changed
    edit_manifest(store, _set("num_classes", 11))  # a hand edit is never re-sealed
    with pytest.raises(BenchlibError, match=r"manifest\.json was changed after the store"):
        record_source(store, "mnist5k")
    with pytest.raises(BenchlibError, match=r"wrote no .*manifest\.json"):
        record_source(tmp_path / "empty", "mnist5k")
