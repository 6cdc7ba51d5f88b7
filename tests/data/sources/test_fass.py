"""The FASS source on small archives in the real layout (a root folder with IMAGES/*.png and
ARRAY_FORMAT/*.npy holding pickled dicts of structure masks), downloaded from 127.0.0.1."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers.http_server import serve_directory
from PIL import Image

from benchlib.data.download import fetch, remote_file
from benchlib.data.registry import get_dataset
from benchlib.data.split import SplitSpec, make_split
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError

PATIENTS = [f"P{p:03d}" for p in (1, 2, 5, 7, 10, 11, 12, 20, 31, 40)]


class Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def npy_bytes(obj) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array(obj, dtype=object), allow_pickle=True)
    return buffer.getvalue()


def png_bytes(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def build_fass_zip(
    path: Path, root: str = "Fetal Abdominal Structures Segmentation Dataset", structures=None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Two 96x128 images per patient; the liver a rectangle, other structures elsewhere."""
    rng = np.random.default_rng(0)
    truth = {}
    with zipfile.ZipFile(path, "w") as bundle:
        for p, patient in enumerate(PATIENTS):
            for img in (1, 2):
                stem = f"{patient}_IMG{img}"
                image = rng.integers(0, 256, (96, 128), dtype=np.uint8)
                liver = np.zeros((96, 128), dtype=np.uint8)
                liver[10 + p : 50 + p, 20 : 60 + 4 * img] = 1
                stomach = np.zeros_like(liver)
                stomach[60:90, 90:120] = 1
                masks = {
                    "artery": np.zeros_like(liver),
                    "liver": liver,
                    "stomach": stomach,
                    "vein": np.zeros_like(liver),
                }
                bundle.writestr(f"{root}/IMAGES/{stem}.png", png_bytes(image))
                bundle.writestr(
                    f"{root}/ARRAY_FORMAT/{stem}.npy",
                    npy_bytes({"structures": structures or masks}),
                )
                truth[stem] = (image, liver)
    return truth


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    truth = build_fass_zip(root / "file_downloaded")
    return root, truth


def prepare(download_dir: Path, out: Path, url: str, sha256: str, size: int = 64) -> None:
    params = {
        "download_dir": str(download_dir),
        "url": url,
        "sha256": sha256,
        "retries": 0,
        "timeout": 20,
        "size": size,
    }
    get_dataset("fass").prepare(out, params)


def test_download_and_prepare_from_loopback(www, tmp_path):
    root, truth = www
    sha = digest(root / "file_downloaded")
    with serve_directory(root) as (url, requests):
        remote = remote_file("fass", "fass.zip", {"url": f"{url}/file_downloaded", "sha256": sha})
        fetch(remote, tmp_path / "downloads", retries=0)  # what the download_data rule does
        prepare(tmp_path / "downloads", tmp_path / "store", f"{url}/file_downloaded", sha)
    assert requests == ["/file_downloaded"]  # prepare found the checked copy, no second fetch
    store = load_store(tmp_path / "store")
    assert store.task == "segmentation" and store.num_classes == 2
    assert store.pixels.shape == store.arrays["masks"].shape == (20, 64, 64)
    index = store.index
    assert list(index["sample_id"]) == sorted(truth)
    assert index.set_index("sample_id").loc["P010_IMG2", "group"] == "P010"
    assert sorted(index["group"].unique()) == PATIENTS
    row = list(index["sample_id"]).index("P007_IMG1")
    image, liver = truth["P007_IMG1"]
    want_mask = np.asarray(Image.fromarray(liver).resize((64, 64), Image.NEAREST))
    want_image = np.asarray(Image.fromarray(image).resize((64, 64), Image.BILINEAR))
    assert np.array_equal(store.arrays["masks"][row], want_mask)  # liver only, not the stomach
    assert np.array_equal(store.pixels[row], want_image)
    assert store.arrays["masks"][row][45:, 45:].sum() == 0
    assert store.manifest["sources"] == [{"name": f"{url}/file_downloaded", "sha256": sha}]
    spec = SplitSpec.from_config(
        {"clients": 5, "partition": {"name": "groups"}, "split": {"val": 0.25, "test": 0.25}}
    )
    table = make_split(store, spec)
    patients = table.groupby("client")["group"].agg(set)
    assert len(patients) == 5 and all(len(p) == 2 for p in patients)
    assert set().union(*patients) == set(PATIENTS)
    assert table.equals(make_split(store, spec))


def test_checksum_mismatch_leaves_nothing(www, tmp_path):
    root, _ = www
    wrong = hashlib.sha256(b"another file").hexdigest()
    with (
        serve_directory(root) as (url, _),
        pytest.raises(
            BenchlibError,
            match=f"checksum mismatch for {url}/file_downloaded: "
            f"expected .*{wrong}, got {digest(root / 'file_downloaded')}",
        ),
    ):
        prepare(tmp_path / "downloads", tmp_path / "store", f"{url}/file_downloaded", wrong)
    assert not (tmp_path / "store").exists()
    assert list(tmp_path.glob("downloads/*")) == []  # no partial download left


def test_malicious_mask_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    build_fass_zip(downloads / "fass.zip", structures={"liver": Exploit(marker)})
    with pytest.raises(BenchlibError, match=r"P001_IMG1\.npy: refusing to unpickle .*system"):
        prepare(
            downloads, tmp_path / "store", "http://127.0.0.1:9/x", digest(downloads / "fass.zip")
        )
    assert not marker.exists()
    assert not (tmp_path / "store").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["downloads"]  # no scratch folder left


def test_nested_zip_and_any_root_folder(tmp_path):
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    build_fass_zip(tmp_path / "inner.zip", root="4gcpm9dsc3-1/FASS")
    with zipfile.ZipFile(downloads / "fass.zip", "w") as outer:
        outer.write(tmp_path / "inner.zip", "Fetal Abdominal Structures.zip")
    prepare(
        downloads,
        tmp_path / "store",
        "http://127.0.0.1:9/x",
        digest(downloads / "fass.zip"),
        size=32,
    )
    store = load_store(tmp_path / "store")
    assert store.pixels.shape == (20, 32, 32) and set(np.unique(store.arrays["masks"])) == {0, 1}


def test_incomplete_and_corrupt_archives_give_one_error(tmp_path):
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with zipfile.ZipFile(downloads / "fass.zip", "w") as bundle:
        bundle.writestr("root/IMAGES/P001_IMG1.png", png_bytes(np.zeros((8, 8), np.uint8)))
    with pytest.raises(BenchlibError, match=r"lack their mask array .*P001_IMG1"):
        prepare(
            downloads, tmp_path / "store", "http://127.0.0.1:9/x", digest(downloads / "fass.zip")
        )
    (downloads / "fass.zip").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(BenchlibError, match="not a readable zip archive"):
        prepare(
            downloads, tmp_path / "store", "http://127.0.0.1:9/x", digest(downloads / "fass.zip")
        )
    assert not (tmp_path / "store").exists()


@pytest.mark.workflow
@pytest.mark.slow
def test_download_prepare_and_split_through_snakemake(www, tmp_path):
    import subprocess

    import pandas as pd
    import yaml
    from conftest import REPO, tool_env

    root, truth = www
    with serve_directory(root) as (url, requests):
        dataset = {
            "source": "fass", "task": "segmentation", "clients": 5,
            "params": {"url": f"{url}/file_downloaded", "sha256": digest(root / "file_downloaded"),
                       "retries": 0, "timeout": 20},
            "partition": {"name": "groups"}, "split": {"val": 0.25, "test": 0.25, "seed": 0},
            "model": {"name": "transunet"},
            "training": {"optimizer": "adam", "lr": 0.001, "batch_size": 8, "local_epochs": 1,
                         "rounds": 1, "loss": "cross_entropy"},
        }  # fmt: skip
        config = {
            "datasets": {"us": dataset},
            "methods": {"fedavg": {}},
            "experiments": {
                "us": {"dataset": "us", "methods": ["fedavg"], "malfunctions": ["sfa"],
                       "k": [1], "seeds": [0]},
            },
        }  # fmt: skip
        (tmp_path / "us.yaml").write_text(yaml.safe_dump(config))
        result = subprocess.run(
            ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path / "work"), "--cores",
             "1", "results/splits/us.csv", "--configfile", str(tmp_path / "us.yaml")],
            capture_output=True, text=True, timeout=600,
            env={**tool_env(), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"},
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert requests == ["/file_downloaded"]
    work = tmp_path / "work"
    assert (work / "results/downloads/us/fass.zip").is_file()
    split = pd.read_csv(work / "results/splits/us.csv", dtype={"group": str})
    assert sorted(split["sample_id"]) == sorted(truth)
    assert all(split.groupby("group")["client"].nunique() == 1)  # a patient on one client


def test_a_nested_zip_bomb_is_refused_before_it_is_written(tmp_path):
    """The only member of the archive is a "zip" that declares 1000x its compressed size:
    it is refused before a byte of it reaches the disk."""
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with zipfile.ZipFile(downloads / "fass.zip", "w", zipfile.ZIP_DEFLATED) as outer:
        outer.writestr("Fetal Abdominal Structures.zip", b"\0" * (8 * 1024**2))
    with pytest.raises(BenchlibError, match=r"declares 8,388,608 bytes from [\d,]+ compressed"):
        prepare(
            downloads, tmp_path / "store", "http://127.0.0.1:9/x", digest(downloads / "fass.zip")
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["downloads"]
