"""``mnist``, ``cifar10``, ``cifar100``: the full public sets, from the files torchvision uses.

Downloads go through the workflow's ``download_data`` step (pooch) and are checked against the
md5 sums torchvision publishes for them (the only checksums published for these files):

- MNIST: the four IDX files (gzip) of torchvision's first mirror,
  ``https://ossci-datasets.s3.amazonaws.com/mnist/``; 60,000 train + 10,000 test images.
- CIFAR-10 / CIFAR-100: ``cifar-10-python.tar.gz`` / ``cifar-100-python.tar.gz`` from
  ``https://www.cs.toronto.edu/~kriz/``; their batches are Python pickles, read with a
  restricted unpickler (numpy arrays and plain containers only, :mod:`benchlib.data.safe_pickle`)
  straight out of the archive. CIFAR-100 uses the 100 fine labels.

Each file's URL and md5 can be overridden in the dataset's params (``<file>_url``,
``<file>_md5`` for MNIST's files ``train_images``, ``train_labels``, ``test_images``,
``test_labels``; ``url`` and ``md5`` for a CIFAR archive), e.g. for a mirror.

Layout in the store: ``source_split`` is the source's train/test; ``sample_id`` names the split
and the position in it. FedAgain trains ResNet18 on every dataset, so MNIST is stored by default
(``params.rgb32: true``) as 32 x 32 RGB: the 28 px digit zero-padded by 2 px on each side (MNIST's
background is 0, so padding adds background, no interpolation) and the grey value replicated to
three channels - the corruptions also need >= 32 px images. ``rgb32: false`` keeps 28 x 28 grey.
"""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from benchlib.data.download import (
    RemoteFile,
    download_params,
    fetch_with_params,
    register_remote_files,
    remote_file,
)
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import BenchlibError, require

MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MNIST_FILES = {  # key -> (file name, torchvision's md5)
    "train_images": ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
    "train_labels": ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
    "test_images": ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
    "test_labels": ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
}
MNIST_COUNTS = {"train": 60000, "test": 10000}
IDX_MAGIC = {"images": 2051, "labels": 2049}


def _fetch(source: str, name: str, params: dict[str, Any]) -> Path:
    require("download_dir" in params, f"{source}: no download folder given (a workflow bug)")
    return fetch_with_params(remote_file(source, name, params), params)


# ------------------------------------------------------------------------------- MNIST
def read_idx(path: Path, kind: str) -> np.ndarray:
    """An IDX file (gzip): ``images`` -> uint8 [N, H, W], ``labels`` -> int64 [N]."""
    try:
        with gzip.open(path, "rb") as handle:
            data = handle.read()
    except (OSError, EOFError) as exc:
        raise BenchlibError(f"{path} is not a readable gzip file ({exc}); delete it") from exc
    dims = 3 if kind == "images" else 1
    require(len(data) >= 4 + 4 * dims, f"{path} is too short for an IDX {kind} file")
    header = np.frombuffer(data[: 4 + 4 * dims], dtype=">i4")
    require(
        int(header[0]) == IDX_MAGIC[kind],
        f"{path}: IDX magic {int(header[0])}, expected {IDX_MAGIC[kind]} ({kind})",
    )
    shape = tuple(int(d) for d in header[1:])
    body = np.frombuffer(data[4 + 4 * dims :], dtype=np.uint8)
    require(body.size == int(np.prod(shape)), f"{path}: {body.size} values, header says {shape}")
    return body.reshape(shape) if kind == "images" else body.astype(np.int64)


def to_rgb32(images: np.ndarray) -> np.ndarray:
    """28 px grey digits -> 32 px RGB: 2 px of zero background on each side, grey x 3."""
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    return np.repeat(padded[..., None], 3, axis=3)


def prepare_mnist(out_dir: Path, params: dict[str, Any]) -> None:
    parts, labels, index = [], [], []
    for split in ("train", "test"):
        images = read_idx(_fetch("mnist", MNIST_FILES[f"{split}_images"][0], params), "images")
        y = read_idx(_fetch("mnist", MNIST_FILES[f"{split}_labels"][0], params), "labels")
        require(
            len(images) == len(y) and images.shape[1:] == (28, 28),
            f"mnist {split}: {len(images)} images of {images.shape[1:]} and {len(y)} labels; "
            "the files are not MNIST",
        )
        require(bool((y <= 9).all()), f"mnist {split}: labels outside 0..9")
        parts.append(images)
        labels.append(y)
        index += [(f"mnist-{split}-{i:05d}", split) for i in range(len(y))]
    pixels = np.concatenate(parts)
    if bool(params["rgb32"]):
        pixels = to_rgb32(pixels)
    _write(out_dir, "mnist", "mnist", index, np.concatenate(labels), pixels, 10, params)


# ------------------------------------------------------------------------------ CIFAR
class _LatinUnpickler(pickle.Unpickler):
    """The restricted unpickler, reading Python 2 pickles (CIFAR's) as torchvision does."""

    def __init__(self, stream: BinaryIO, source: str) -> None:
        super().__init__(stream, encoding="latin1")
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        from benchlib.data.safe_pickle import ALLOWED_GLOBALS

        if (module, name) in ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise BenchlibError(
            f"{self.source}: refusing to unpickle {module}.{name}; the archive is not CIFAR "
            "(corrupt, replaced or malicious): delete it and download it again"
        )


def _unpickle(data: bytes, source: str) -> dict[str, Any]:
    try:
        value = _LatinUnpickler(io.BytesIO(data), source).load()
    except BenchlibError:
        raise
    except Exception as exc:
        raise BenchlibError(f"{source}: not a readable CIFAR batch ({exc}); delete it") from exc
    require(isinstance(value, dict), f"{source}: a CIFAR batch must be a dict")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in value.items()}


CIFAR = {  # name -> (archive, md5, folder, {split: members}, label key, classes)
    "cifar10": (
        "cifar-10-python.tar.gz",
        "c58f30108f718f92721af3b95e74349a",
        "cifar-10-batches-py",
        {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]},
        "labels",
        10,
    ),
    "cifar100": (
        "cifar-100-python.tar.gz",
        "eb9058c3a382ffc7106e4002c42a8d85",
        "cifar-100-python",
        {"train": ["train"], "test": ["test"]},
        "fine_labels",
        100,
    ),
}


def prepare_cifar(name: str, out_dir: Path, params: dict[str, Any]) -> None:
    archive_name, _, folder, members, label_key, classes = CIFAR[name]
    archive = _fetch(name, archive_name, params)
    parts, labels, index = [], [], []
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for split, batches in members.items():
                start = 0
                for batch in batches:
                    member = f"{folder}/{batch}"
                    try:
                        handle = tar.extractfile(member)
                    except KeyError:
                        handle = None
                    require(handle is not None, f"{archive} lacks {member}; it is not {name}")
                    assert handle is not None
                    table = _unpickle(handle.read(), f"{archive}:{member}")
                    require(
                        "data" in table and label_key in table,
                        f"{archive}:{member} lacks data/{label_key}",
                    )
                    data = np.asarray(table["data"], dtype=np.uint8)
                    y = np.asarray(table[label_key], dtype=np.int64)
                    require(
                        data.ndim == 2 and data.shape[1] == 3072 and len(data) == len(y),
                        f"{archive}:{member}: data {data.shape} and {len(y)} labels; not {name}",
                    )
                    require(
                        bool(((y >= 0) & (y < classes)).all()),
                        f"{archive}:{member}: labels outside 0..{classes - 1}",
                    )
                    parts.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
                    labels.append(y)
                    index += [(f"{name}-{split}-{start + i:05d}", split) for i in range(len(y))]
                    start += len(y)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BenchlibError(f"{archive} is not a readable tar.gz ({exc}); delete it") from exc
    pixels = np.ascontiguousarray(np.concatenate(parts))
    _write(out_dir, name, name, index, np.concatenate(labels), pixels, classes, params)


def _write(
    out_dir: Path,
    dataset: str,
    source: str,
    index: list[tuple[str, str]],
    labels: np.ndarray,
    pixels: np.ndarray,
    classes: int,
    params: dict[str, Any],
) -> None:
    from benchlib.data.download import remote_files

    table = pd.DataFrame(index, columns=["sample_id", "source_split"])
    table.insert(1, "label", labels)
    table.insert(2, "group", "")
    sources = [
        {"name": r.url, "md5": r.md5} for r in remote_files(source, params)
    ]  # the published checksums the files passed
    counts = table["source_split"].value_counts().to_dict()
    write_store(
        out_dir,
        dataset=dataset,
        index=table,
        pixels=pixels,
        num_classes=classes,
        sources=sources,
        extra={"source_counts": {k: int(v) for k, v in sorted(counts.items())}},
    )


FILES: dict[str, tuple[RemoteFile, ...]] = {
    "mnist": tuple(
        RemoteFile(
            file,
            MNIST_URL + file,
            "",
            f"{key}_url",
            f"{key}_sha256",
            md5=md5,
            md5_param=f"{key}_md5",
        )
        for key, (file, md5) in MNIST_FILES.items()
    ),
    **{
        name: (RemoteFile(archive, f"https://www.cs.toronto.edu/~kriz/{archive}", "", md5=md5),)
        for name, (archive, md5, *_) in CIFAR.items()
    },
}
for _name, _files in FILES.items():
    register_remote_files(_name, _files)

register_dataset(
    DatasetSource(
        name="mnist",
        build=prepare_mnist,
        params=Params(
            {
                **download_params(FILES["mnist"]),
                "rgb32": Param(
                    {"type": "boolean"},
                    True,
                    "store 32 px RGB (zero-padded, grey x 3); false: 28 px grey",
                ),
            }
        ),
        num_classes=10,
        image_shape=(3, 32, 32),
        description="MNIST 60k + 10k (torchvision's files); 32 px RGB by default (rgb32)",
    )
)
register_dataset(
    DatasetSource(
        name="cifar10",
        build=lambda out, params: prepare_cifar("cifar10", out, params),
        params=Params(download_params(FILES["cifar10"])),
        num_classes=10,
        image_shape=(3, 32, 32),
        description="CIFAR-10 50k + 10k (cifar-10-python.tar.gz)",
    )
)
register_dataset(
    DatasetSource(
        name="cifar100",
        build=lambda out, params: prepare_cifar("cifar100", out, params),
        params=Params(download_params(FILES["cifar100"])),
        num_classes=100,
        image_shape=(3, 32, 32),
        description="CIFAR-100 50k + 10k, fine labels (cifar-100-python.tar.gz)",
    )
)
