"""TFF's fed_emnist.tar.bz2 for real: a small archive in the genuine format (two HDF5 files with
per-writer groups ``examples/<writer>/{pixels,label}``, bz2-compressed tar) is built here, served
from 127.0.0.1 and run through the download, prepare and split rules of the workflow; a wrong
checksum and a corrupt archive stop with a one-line benchlib error and leave no outputs."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, tool_env
from helpers.http_server import serve_directory

from benchlib.data.registry import get_dataset
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError

ARCHIVE = "fed_emnist.tar.bz2"
WRITERS = [f"f{i:04d}_{(7 * i) % 60:02d}" for i in range(18)]


def train_count(i: int) -> int:
    return 4 + i % 3


def build_tff_archive(
    path: Path, seed: int = 0
) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """Write a TFF-format archive; returns {(writer, split): (float pixels, labels)}."""
    rng = np.random.default_rng(seed)
    truth = {}
    folder = path.parent / "h5"
    folder.mkdir()
    for split in ("train", "test"):
        with h5py.File(folder / f"fed_emnist_{split}.h5", "w") as h5:
            examples = h5.create_group("examples")
            for i, writer in enumerate(WRITERS):
                n = train_count(i) if split == "train" else 3
                pixels = (rng.integers(0, 256, (n, 28, 28)) / 255.0).astype(np.float32)
                pixels[:, :4, :] = 1.0  # white background rows, as in LEAF/TFF
                labels = rng.integers(0, 62, n).astype(np.int32)
                group = examples.create_group(writer)
                group.create_dataset("pixels", data=pixels)
                group.create_dataset("label", data=labels)
                truth[(writer, split)] = (pixels, labels)
    with tarfile.open(path, "w:bz2") as tar:
        for split in ("train", "test"):
            tar.add(folder / f"fed_emnist_{split}.h5", arcname=f"fed_emnist_{split}.h5")
    shutil.rmtree(folder)
    return truth


@pytest.fixture(scope="module")
def tff(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    truth = build_tff_archive(root / ARCHIVE)
    data = (root / ARCHIVE).read_bytes()
    (root / "broken.tar.bz2").write_bytes(data[: len(data) // 2])
    return root, truth, hashlib.sha256(data).hexdigest()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_prepare_reads_the_archive_from_the_download_folder(tff, tmp_path):
    root, truth, digest = tff
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    shutil.copy(root / ARCHIVE, downloads / ARCHIVE)
    # the copy in place has the pinned hash, so no network is needed (the URL is a closed port)
    params = {"download_dir": str(downloads), "sha256": digest, "url": "http://127.0.0.1:9/x"}
    get_dataset("femnist_tff").prepare(tmp_path / "store", params)
    store = load_store(tmp_path / "store")
    index = store.index
    assert "shard" not in index.columns
    assert sorted(index["group"].unique()) == sorted(WRITERS)
    assert (index["source_split"] == "train").sum() == sum(train_count(i) for i in range(18))
    assert (index["source_split"] == "test").sum() == 3 * 18
    assert store.manifest["source_format"] == "tff-hdf5"
    assert store.manifest["sources"] == [{"name": "http://127.0.0.1:9/x", "sha256": digest}]
    row_of = {sid: i for i, sid in enumerate(index["sample_id"])}
    for (writer, split), (pixels, labels) in truth.items():
        for j in range(len(labels)):
            row = row_of[f"{writer}-{split}-{j:05d}"]
            expected = np.rint(pixels[j].astype(np.float64) * 255).astype(np.uint8)
            np.testing.assert_array_equal(store.pixels[row], expected)
            assert index.at[row, "label"] == labels[j]
            assert index.at[row, "group"] == writer
    assert (store.pixels[:, :4, :] == 255).all()
    assert list((tmp_path / "store").parent.glob(".store.h5.*")) == []  # extraction cleaned up


def test_prepare_rejects_a_corrupt_archive(tff, tmp_path):
    root, _, _ = tff
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    shutil.copy(root / "broken.tar.bz2", downloads / ARCHIVE)
    params = {"download_dir": str(downloads), "sha256": sha256(downloads / ARCHIVE)}
    with pytest.raises(
        BenchlibError, match=r"is not a readable tar archive .* truncated or corrupt"
    ):
        get_dataset("femnist_tff").prepare(tmp_path / "store", params)
    assert not (tmp_path / "store").exists()
    assert list(tmp_path.glob(".store*")) == []


# ---------------------------------------------------------------------------- the workflow
def write_config(path: Path, url: str, digest: str) -> Path:
    config = {
        "datasets": {
            "tff": {
                "label": "FEMNIST (TFF format test archive)",
                "source": "femnist_tff",
                "params": {"url": url, "sha256": digest, "retries": 0, "timeout": 20},
                "clients": 8,
                "partition": {"name": "writers", "writers_per_client": 2},
                "split": {"mode": "source", "val_from_test": "1/3", "seed": 0},
                "model": {"name": "femnist_cnn", "params": {"conv1": 2, "conv2": 4, "hidden": 8}},
                "training": {
                    "optimizer": "adam",
                    "lr": 0.001,
                    "batch_size": 32,
                    "local_epochs": 1,
                    "rounds": 1,
                },
            }
        },
        "methods": {"fedavg": {"label": "FedAvg"}},
        "experiments": {
            "tff": {
                "dataset": "tff",
                "methods": ["fedavg"],
                "malfunctions": ["ana"],
                "k": [0],
                "seeds": [0],
            }
        },
    }
    path.write_text(yaml.safe_dump(config))
    return path


def snakemake(workdir: Path, config: Path, *targets: str) -> subprocess.CompletedProcess:
    command = ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "1"]
    command += [*targets, "--configfile", str(config)]
    env = {**tool_env(), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def error_lines(log: Path) -> list[str]:
    text = log.read_text()
    assert "Traceback" not in text
    return [line for line in text.splitlines() if line.startswith("error:")]


@pytest.mark.workflow
@pytest.mark.slow
def test_download_prepare_split_and_train_through_snakemake(tff, tmp_path):
    root, truth, digest = tff
    with serve_directory(root) as (url, requests):
        config = write_config(tmp_path / "tff.yaml", f"{url}/{ARCHIVE}", digest)
        result = snakemake(
            tmp_path / "work",
            config,
            "results/splits/tff.csv",
            "results/runs/tff/none/fedavg/k0/seed0/metrics.json",
        )
    assert result.returncode == 0, result.stderr[-3000:]
    assert requests == [f"/{ARCHIVE}"]
    work = tmp_path / "work"
    assert sha256(work / "results/downloads/tff" / ARCHIVE) == digest
    assert load_store(work / "results/data/tff").manifest["num_samples"] == sum(
        len(v[1]) for v in truth.values()
    )
    split = pd.read_csv(work / "results/splits/tff.csv", dtype={"group": str})
    writers = split.groupby("client")["group"].agg(lambda g: frozenset(g))
    assert sorted(writers.index) == list(range(8))
    assert all(len(w) == 2 for w in writers) and len(frozenset().union(*writers)) == 16
    for client, names in writers.items():
        rows = split[split["client"] == client]
        counts = rows["subset"].value_counts()
        n_train = sum(train_count(WRITERS.index(w)) for w in names)
        assert (counts["train"], counts["val"], counts["test"]) == (
            n_train,
            2,
            4,
        )  # 6 test: 6 // 3 to val
        assert rows.loc[rows["subset"] == "train", "sample_id"].str.contains("-train-").all()
        assert rows.loc[rows["subset"] != "train", "sample_id"].str.contains("-test-").all()
    assert (work / "results/runs/tff/none/fedavg/k0/seed0/metrics.json").is_file()


@pytest.mark.workflow
@pytest.mark.slow
def test_checksum_mismatch_stops_the_workflow_with_no_outputs(tff, tmp_path):
    root, _, digest = tff
    wrong = hashlib.sha256(b"not the archive").hexdigest()
    with serve_directory(root) as (url, _):
        config = write_config(tmp_path / "tff.yaml", f"{url}/{ARCHIVE}", wrong)
        result = snakemake(tmp_path / "work", config, "results/splits/tff.csv")
    assert result.returncode != 0
    work = tmp_path / "work"
    (line,) = error_lines(work / "logs/download_data/tff" / f"{ARCHIVE}.log")
    assert line.startswith(
        f"error: checksum mismatch for {url}/{ARCHIVE}: expected sha256 {wrong}, got {digest}"
    )
    assert "datasets.tff.params.sha256" in line
    assert (
        not (work / "results/downloads/tff").exists()
        or list((work / "results/downloads/tff").iterdir()) == []
    )
    assert not (work / "results/data").exists()
    assert not (work / "results/splits").exists()


@pytest.mark.workflow
@pytest.mark.slow
def test_corrupt_archive_stops_the_prepare_step_with_no_store(tff, tmp_path):
    root, _, _ = tff
    with serve_directory(root) as (url, _):
        config = write_config(
            tmp_path / "tff.yaml", f"{url}/broken.tar.bz2", sha256(root / "broken.tar.bz2")
        )
        result = snakemake(tmp_path / "work", config, "results/splits/tff.csv")
    assert result.returncode != 0
    work = tmp_path / "work"
    (line,) = error_lines(work / "logs/prepare_data/tff.log")
    assert "is not a readable tar archive" in line and "truncated or corrupt" in line
    assert not (work / "results/data/tff").exists()
    assert list((work / "results/data").glob(".*")) == []
    assert not (work / "results/splits").exists()


def test_a_member_declaring_more_than_the_release_can_hold_is_refused_unread(tmp_path):
    """A tiny archive whose member declares terabytes (bz2 of zeros, or just a header) stops
    before a byte is extracted: the release's files have known sample counts."""
    import bz2

    from benchlib.data.sources.femnist import TFF_MAX_BYTES

    declared = TFF_MAX_BYTES["fed_emnist_train.h5"] + 1
    header = tarfile.TarInfo("fed_emnist_train.h5")
    header.size = declared
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    (downloads / ARCHIVE).write_bytes(bz2.compress(header.tobuf(tarfile.GNU_FORMAT) + bytes(4096)))
    assert (downloads / ARCHIVE).stat().st_size < 1000
    params = {"download_dir": str(downloads), "sha256": sha256(downloads / ARCHIVE)}
    with pytest.raises(BenchlibError, match=f"fed_emnist_train.h5 declares {declared:,} bytes"):
        get_dataset("femnist_tff").prepare(tmp_path / "store", params)
    assert not (tmp_path / "store").exists()
    assert list(tmp_path.glob(".store*")) == []


def test_the_size_bounds_hold_the_release_with_room():
    from benchlib.data.sources.femnist import TFF_MAX_BYTES

    pixels = {"fed_emnist_train.h5": 671_585 * 28 * 28 * 4, "fed_emnist_test.h5": 77_483 * 3136}
    for name, raw in pixels.items():
        assert 2 * raw < TFF_MAX_BYTES[name] < 3 * raw
