"""Camelyon17-WILDS v1.0 for real: a tiny tar.gz in the WILDS layout (camelyon17_v1.0/ with
metadata.csv and patches/patient_<P>_node_<N>/patch_..._x_<X>_y_<Y>.png, 96x96 RGB PNGs) is
served from 127.0.0.1, downloaded (byte size checked), decoded into the store and split per
hospital; a wrong size, a wrong row count, a truncated archive and a missing patch each stop
with one clear error and leave no store; the same chain runs through Snakemake to a cell."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, tool_env
from helpers.http_server import serve_directory
from PIL import Image

from benchlib.data.registry import get_dataset
from benchlib.data.sources import camelyon17, isic2019
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError

# (patient, node, x, y, tumor, slide, center, split): 3 patches in each of the 5 hospitals
ROWS = [
    (f"{10 * c + p:03d}", p % 2, 100 * p, 200 + c, (c + p) % 2, 10 * c + p, c, int(p == 2))
    for c in range(5)
    for p in range(3)
]


def colour(i: int) -> tuple[int, int, int]:
    return (10 * i, 255 - 10 * i, (37 * i) % 256)


def png(i: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (96, 96), colour(i)).save(buffer, format="PNG")
    return buffer.getvalue()


def build_archive(path: Path, *, drop: int | None = None) -> None:
    """A WILDS-layout tar.gz; patches first, metadata.csv last (as a streamed archive may be)."""
    meta = pd.DataFrame(
        ROWS, columns=["patient", "node", "x_coord", "y_coord", "tumor", "slide", "center", "split"]
    )
    with tarfile.open(path, "w:gz") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"camelyon17_v1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add("RELEASE_v1.0.txt", b"WILDS Camelyon17 v1.0\n")
        for i, (patient, node, x, y, *_) in enumerate(ROWS):
            if i != drop:
                add(camelyon17.patch_path(patient, node, x, y), png(i))
        add("metadata.csv", meta.to_csv().encode())


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def params_for(url: str, archive: Path, downloads: Path) -> dict:
    return {
        "download_dir": str(downloads),
        "url": f"{url}/{archive.name}",
        "size": archive.stat().st_size,
        "num_patches": len(ROWS),
        "retries": 0,
        "timeout": 20,
    }


def test_download_and_prepare_from_loopback(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    build_archive(root / camelyon17.ARCHIVE)
    with serve_directory(root) as (url, requests):
        params = params_for(url, root / camelyon17.ARCHIVE, tmp_path / "downloads")
        get_dataset("camelyon17").prepare(tmp_path / "store", params)
    assert requests == [f"/{camelyon17.ARCHIVE}"]
    store = load_store(tmp_path / "store")
    index = store.index.set_index("sample_id")
    assert len(index) == 15 and store.pixels.shape == (15, 96, 96, 3)
    for i, (patient, node, x, y, tumor, _, center, split) in enumerate(ROWS):
        sid = f"patch_patient_{patient}_node_{node}_x_{x}_y_{y}"
        row = index.index.get_loc(sid)
        assert (index.at[sid, "label"], index.at[sid, "group"]) == (tumor, str(center))
        wilds = {1: "val", 2: "test"}.get(center, "id_val" if split else "train")
        assert index.at[sid, "source_split"] == wilds
        assert (store.pixels[row] == np.array(colour(i), np.uint8)).all()
    assert store.manifest["centre_sizes"] == {str(c): 3 for c in range(5)}


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("size", r"gave \d+ bytes, expected \d+; the download is truncated"),
        ("count", r"metadata.csv has 15 rows, expected 16"),
        ("truncated", r"not a readable tar.gz archive .* truncated or corrupt"),
        ("missing", r"lacks 1 listed patches .*patch_patient_011_node_1_x_100_y_201.png"),
    ],
)
def test_a_damaged_release_gives_one_clear_error_and_no_store(tmp_path, damage, message):
    root = tmp_path / "www"
    root.mkdir()
    archive = root / camelyon17.ARCHIVE
    build_archive(archive, drop=4 if damage == "missing" else None)
    if damage == "truncated":
        archive.write_bytes(archive.read_bytes()[: archive.stat().st_size * 2 // 3])
    with serve_directory(root) as (url, _):
        params = params_for(url, archive, tmp_path / "downloads")
        params["size"] += damage == "size"
        params["num_patches"] += damage == "count"
        with pytest.raises(BenchlibError, match=message):
            get_dataset("camelyon17").prepare(tmp_path / "store", params)
    assert not (tmp_path / "store").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".store")] == []
    if damage == "size":  # the wrong-size download is not kept
        assert not (tmp_path / "downloads" / camelyon17.ARCHIVE).exists()


def test_local_folder_and_a_missing_patch(tmp_path):
    build_archive(tmp_path / "a.tar.gz")
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        tar.extractall(tmp_path / "data", filter="data")
    params = {"path": str(tmp_path / "data"), "num_patches": 15}
    get_dataset("camelyon17_local").prepare(tmp_path / "store", params)
    assert load_store(tmp_path / "store").index["label"].sum() == sum(r[4] for r in ROWS)
    next((tmp_path / "data").rglob("*.png")).unlink()
    with pytest.raises(BenchlibError, match=r"listed in metadata.csv but missing"):
        get_dataset("camelyon17_local").prepare(tmp_path / "store2", params)
    assert not (tmp_path / "store2").exists()


@pytest.mark.workflow
@pytest.mark.slow
def test_download_prepare_split_cell_and_table_through_snakemake(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    archive = root / camelyon17.ARCHIVE
    build_archive(archive)
    with serve_directory(root) as (url, requests):
        config = {
            "datasets": {
                "cam": {
                    "source": "camelyon17",
                    "params": {
                        "url": f"{url}/{archive.name}",
                        "size": archive.stat().st_size,
                        "num_patches": 15,
                        "retries": 0,
                    },
                    "clients": 5,
                    "partition": {"name": "groups"},
                    "split": {"mode": "random", "val": 0.34, "test": 0.33, "seed": 0},
                    "model": {
                        "name": "femnist_cnn",
                        "params": {"conv1": 2, "conv2": 2, "hidden": 4},
                    },
                    "training": {
                        "optimizer": "sgd",
                        "lr": 0.001,
                        "momentum": 0.9,
                        "weight_decay": 0.0005,
                        "batch_size": 32,
                        "local_epochs": 1,
                        "rounds": 1,
                    },
                }
            },
            "methods": {"fedavg": {"label": "FedAvg"}},
            "experiments": {
                "cam": {
                    "dataset": "cam",
                    "methods": ["fedavg"],
                    "malfunctions": ["ana"],
                    "k": [0],
                    "seeds": [0],
                }
            },
        }
        (tmp_path / "cam.yaml").write_text(yaml.safe_dump(config))
        command = ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path / "work")]
        command += ["--cores", "1", "tables/cam_ana.tex"]
        command += ["--configfile", str(tmp_path / "cam.yaml")]
        env = {**tool_env(), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert requests == [f"/{archive.name}"]
    split = pd.read_csv(tmp_path / "work/results/splits/cam.csv", dtype={"group": str})
    # one hospital per client; each client's 3 patches: 1 train, 1 val, 1 test
    assert split.groupby("client")["group"].nunique().tolist() == [1] * 5
    assert sorted(split["group"].unique()) == [str(c) for c in range(5)]
    assert (split.groupby(["client", "subset"]).size() == 1).all()
    assert (tmp_path / "work/results/runs/cam/none/fedavg/k0/seed0/metrics.json").is_file()
    table = (tmp_path / "work/tables/cam_ana.tex").read_text()
    assert "FedAvg" in table and "\\pm" in table


@pytest.mark.workflow
@pytest.mark.slow
@pytest.mark.parametrize(("table", "cells"), [("camelyon17_ana", 40), ("isic19_ana", 50)])
def test_paper_tables_plan_their_grids_on_the_slurm_profile(tmp_path, table, cells):
    """Tables 6 and 10: 10 methods x k = 1..4 (5 hospitals) and x k = 1..5 (6 centres), from the
    default config, offline; downloads and weights are fetched on the submitting host, the heavy
    prepare step is a cluster job with its source's resources."""
    command = ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n"]
    command += ["--profile", str(REPO / "profiles" / "slurm"), f"tables/{table}.tex"]
    result = subprocess.run(command, env=tool_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rules = ("run_cell", "download_data", "prepare_data", "prepare_data_job", "fetch_weights")
    counts = dict(
        line.split()[:2]
        for line in result.stdout.splitlines()
        if line.split()[:1] in [[r] for r in rules]
    )
    expected = {"run_cell": str(cells), "prepare_data_job": "1"}
    if table.startswith("camelyon17"):  # one archive; DenseNet-121 from scratch
        expected["download_data"] = "1"
    else:  # zip, two CSVs, FLamby's split; ImageNet-pretrained EfficientNet-B0
        expected |= {"download_data": "4", "fetch_weights": "1"}
    assert counts == expected
    job = result.stdout[result.stdout.index("rule prepare_data_job:") :].split("\n\n")[0]
    source = camelyon17 if table.startswith("camelyon17") else isic2019
    assert f"mem_mb={source.PREPARE_RESOURCES['mem_mb']}," in job
    assert f"runtime={source.PREPARE_RESOURCES['runtime']}," in job
    assert not (tmp_path / "results").exists()


def test_an_oversized_metadata_member_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """metadata.csv is read into memory: a member larger than the release's can be is refused
    by its declared size (the bound is lowered here to the test archive's scale)."""
    root = tmp_path / "www"
    root.mkdir()
    build_archive(root / camelyon17.ARCHIVE)
    monkeypatch.setattr(camelyon17, "METADATA_MAX_BYTES", 100)
    with serve_directory(root) as (url, _):
        params = params_for(url, root / camelyon17.ARCHIVE, tmp_path / "downloads")
        with pytest.raises(
            BenchlibError, match=r"metadata.csv declares [\d,]+ bytes, more than the 100"
        ):
            get_dataset("camelyon17").prepare(tmp_path / "store", params)
    assert not (tmp_path / "store").exists()
