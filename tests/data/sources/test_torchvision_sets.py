"""MNIST, CIFAR-10 and CIFAR-100 through the download step, against a 127.0.0.1 server serving
small files in the real formats (IDX gzip; CIFAR's pickled batches in a tar.gz), including
checksum mismatches against torchvision's published md5 sums."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest
from helpers.http_server import serve_directory

from benchlib.data.download import remote_files
from benchlib.data.registry import get_dataset
from benchlib.data.sources.torchvision_sets import CIFAR, MNIST_FILES
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def idx_bytes(array: np.ndarray, magic: int) -> bytes:
    header = np.array([magic, *array.shape], dtype=">i4").tobytes()
    return gzip.compress(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def mnist_www(tmp_path):
    rng = np.random.default_rng(0)
    www = tmp_path / "www"
    www.mkdir()
    arrays = {}
    for split, n in (("train", 12), ("test", 5)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n)
        arrays[split] = (images, labels)
        (www / MNIST_FILES[f"{split}_images"][0]).write_bytes(idx_bytes(images, 2051))
        (www / MNIST_FILES[f"{split}_labels"][0]).write_bytes(idx_bytes(labels, 2049))
    with serve_directory(www) as (url, requests):
        params = {}
        for key, (name, _) in MNIST_FILES.items():
            params[f"{key}_url"] = f"{url}/{name}"
            params[f"{key}_md5"] = md5(www / name)
        yield params, arrays, requests


def test_mnist_downloads_and_prepares_as_32px_rgb(mnist_www, tmp_path):
    params, arrays, requests = mnist_www
    downloads = tmp_path / "downloads"
    get_dataset("mnist").prepare(tmp_path / "store", {**params, "download_dir": str(downloads)})
    store = load_store(tmp_path / "store")
    assert len(requests) == 4 and store.pixels.shape == (17, 32, 32, 3)
    train_images, train_labels = arrays["train"]
    assert np.array_equal(store.pixels[:12, 2:30, 2:30, 1], train_images)  # centred digit
    assert store.pixels[:, :2].max() == 0 and store.pixels[:, :, 30:].max() == 0  # zero border
    assert np.array_equal(store.pixels[..., 0], store.pixels[..., 2])  # grey in 3 channels
    assert store.index["label"].tolist() == [*train_labels, *arrays["test"][1]]
    assert store.index["source_split"].tolist() == ["train"] * 12 + ["test"] * 5
    assert store.manifest["sources"][0]["md5"] == params["train_images_md5"]
    get_dataset("mnist").prepare(
        tmp_path / "grey", {**params, "download_dir": str(downloads), "rgb32": False}
    )
    assert len(requests) == 4  # the cached, verified files were reused
    assert np.array_equal(load_store(tmp_path / "grey").pixels[12:], arrays["test"][0])


def test_mnist_with_torchvisions_md5_rejects_other_files(mnist_www, tmp_path):
    params, _, _ = mnist_www
    urls = {k: v for k, v in params.items() if k.endswith("_url")}  # published md5s kept
    downloads = tmp_path / "downloads"
    with pytest.raises(BenchlibError, match=r"checksum mismatch .*expected md5 f68b3c2dcbeaaa9"):
        get_dataset("mnist").prepare(tmp_path / "store", {**urls, "download_dir": str(downloads)})
    assert not (tmp_path / "store").exists()
    assert not any(p.is_file() for p in downloads.rglob("*"))  # no partial download


def test_published_checksums_are_torchvisions():
    files = {r.name: r.md5 for r in remote_files("mnist")}
    assert files["train-images-idx3-ubyte.gz"] == "f68b3c2dcbeaaa9fbdd348bbdeb94873"
    assert files["t10k-labels-idx1-ubyte.gz"] == "ec29112dd5afa0611ce80d1b7f02629c"
    assert remote_files("cifar10")[0].md5 == "c58f30108f718f92721af3b95e74349a"
    assert remote_files("cifar100")[0].md5 == "eb9058c3a382ffc7106e4002c42a8d85"
    assert (
        remote_files("cifar10")[0].url == "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    )


def cifar_archive(path: Path, name: str, per_batch: int, rng, poison: bool = False) -> dict:
    archive, _, folder, members, label_key, classes = CIFAR[name]
    made = {}
    with tarfile.open(path / archive, "w:gz") as tar:
        for batches in members.values():
            for batch in batches:
                data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
                labels = rng.integers(0, classes, per_batch).tolist()
                table = {"batch_label": batch, label_key: labels, "data": data}
                if poison and batch == batches[0]:
                    table["data"] = os.getcwd  # a global the restricted unpickler refuses
                blob = pickle.dumps(table, protocol=2)
                info = tarfile.TarInfo(f"{folder}/{batch}")
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
                made[batch] = (data, labels)
    return made


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_archives_download_and_prepare(name, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    made = cifar_archive(www, name, 3, np.random.default_rng(1))
    archive = CIFAR[name][0]
    with serve_directory(www) as (url, _):
        params = {"url": f"{url}/{archive}", "md5": md5(www / archive),
                  "download_dir": str(tmp_path / "dl")}  # fmt: skip
        get_dataset(name).prepare(tmp_path / "store", params)
        store = load_store(tmp_path / "store")
        train = [made[b] for b in CIFAR[name][3]["train"]]
        assert store.pixels.shape == (3 * len(train) + 3, 32, 32, 3)
        data, labels = train[0]
        # the batch rows are R, G, B planes of 32 x 32, row-major
        assert store.pixels[0, 5, 7, 2] == data[0, 2 * 1024 + 5 * 32 + 7]
        assert store.pixels[1, 31, 0, 0] == data[1, 31 * 32]
        assert store.index["label"].tolist()[:3] == labels
        assert store.num_classes == CIFAR[name][5]
        assert store.manifest["source_counts"] == {"test": 3, "train": 3 * len(train)}
        # the published md5 rejects the (small) served archive, leaving nothing behind
        with pytest.raises(BenchlibError, match=f"expected md5 {CIFAR[name][1]}"):
            get_dataset(name).prepare(
                tmp_path / "s2", {"url": params["url"], "download_dir": str(tmp_path / "dl2")}
            )
        assert not (tmp_path / "s2").exists() and not list((tmp_path / "dl2").glob("*.gz"))


def test_a_pickle_with_foreign_globals_is_refused(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    cifar_archive(www, "cifar10", 2, np.random.default_rng(2), poison=True)
    with serve_directory(www) as (url, _):
        archive = www / "cifar-10-python.tar.gz"
        params = {"url": f"{url}/{archive.name}", "md5": md5(archive),
                  "download_dir": str(tmp_path / "dl")}  # fmt: skip
        with pytest.raises(BenchlibError, match=r"refusing to unpickle posix.getcwd"):
            get_dataset("cifar10").prepare(tmp_path / "store", params)
    assert not (tmp_path / "store").exists()
