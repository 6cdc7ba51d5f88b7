"""FEMNIST: 28x28 grey handwritten digits and letters (62 classes), grouped by writer.

Two sources write the same store:

- ``femnist_leaf``: a local LEAF JSON directory as LEAF's ``preprocess.sh`` writes it (``train/``
  and ``test/`` folders, one ``<shard>_train_<tf>.json`` / ``<shard>_test_<tf>.json`` pair per
  LEAF shard). ``params.path``: the directory (absolute, or relative to the working directory or
  the project checkout). A ``SHA256SUMS`` file there, if any, is verified.
- ``femnist_tff``: TensorFlow Federated's ``fed_emnist.tar.bz2`` (``fed_emnist_{train,test}.h5``,
  one HDF5 group ``examples/<writer>/{pixels,label}`` per writer), downloaded through pooch with a
  pinned sha256 (``params.url`` and ``params.sha256`` override both). To run offline, place the
  archive at ``results/downloads/<dataset>/fed_emnist.tar.bz2``; its hash is checked all the same.

Store layout: ``group`` = writer id, ``source_split`` = the source's train/test, ``shard`` = the
LEAF shard (``femnist_leaf`` only). Pixels keep the LEAF/TFF convention the LIGHTYEAR authors
trained on (background 1.0, ink near 0; no inversion, no transpose) as uint8
``round(255 * value)``. Labels: 0-9 digits, 10-35 upper case, 36-61 lower case.
"""

from __future__ import annotations

import json
import re
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.archive_bounds import check_member_size, copy_declared
from benchlib.data.download import (
    RemoteFile,
    download_params,
    fetch_source_file,
    register_remote_files,
)
from benchlib.data.paths import resolve_input_path
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import sha256_file

NUM_CLASSES = 62
SIDE = 28
SOURCE_SPLITS = ("train", "test")
PIXEL_NOTE = "uint8 = round(255 * source value); background 255 (white), ink near 0; not inverted"

TFF_ARCHIVE = "fed_emnist.tar.bz2"
TFF_URL = "https://storage.googleapis.com/tff-datasets-public/fed_emnist.tar.bz2"
TFF_SHA256 = "fe1ed5a502cea3a952eb105920bff8cffb32836b5173cb18a57a32c3606f3ea0"
TFF_MEMBERS = {"train": "fed_emnist_train.h5", "test": "fed_emnist_test.h5"}
# The most bytes each HDF5 file of the release can hold: its samples as float32 28x28 pixels and
# an int32 label, twice over, and 64 KiB of HDF5 structure per writer (671,585 train and 77,483
# test samples of 3,400 writers): an archive member declaring more is not this release.
TFF_SAMPLES = {"fed_emnist_train.h5": 671_585, "fed_emnist_test.h5": 77_483}
TFF_WRITERS = 3_400
TFF_MAX_BYTES = {
    name: 2 * samples * (28 * 28 * 4 + 4) + TFF_WRITERS * 64 * 1024
    for name, samples in TFF_SAMPLES.items()
}

_LEAF_FILE = re.compile(r"^(?P<shard>.+)_(?P<split>train|test)_[^_]+\.json$")


# ------------------------------------------------------------------------------- store builder
def to_uint8(values: np.ndarray, where: str) -> np.ndarray:
    """Float pixels in [0, 1] -> uint8 ``round(255 * value)``, shape ``[N, 28, 28]``."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return np.zeros((0, SIDE, SIDE), dtype=np.uint8)
    require(
        values.ndim >= 2 and values[0].size == SIDE * SIDE,
        f"{where}: images must have {SIDE * SIDE} pixels, got shape {values.shape}",
    )
    values = values.reshape(len(values), SIDE, SIDE)
    require(bool(np.isfinite(values).all()), f"{where}: pixel values contain NaN or Inf")
    if not (values.min() >= -1e-6 and values.max() <= 1 + 1e-6):
        raise BenchlibError(
            f"{where}: pixel values outside [0, 1] (min {values.min():.3g}, max "
            f"{values.max():.3g}); expected LEAF/TFF floats scaled to [0, 1]"
        )
    return np.clip(np.rint(values * 255.0), 0, 255).astype(np.uint8)


def to_labels(values: Any, count: int, where: str) -> np.ndarray:
    """Integer class labels 0..61, one per image."""
    labels = np.asarray(values).reshape(-1)
    require(len(labels) == count, f"{where}: {len(labels)} labels for {count} images")
    require(
        labels.size == 0 or bool(np.all(np.equal(np.mod(labels, 1), 0))),
        f"{where}: labels are not integers",
    )
    labels = labels.astype(np.int64)
    require(
        labels.size == 0 or (labels.min() >= 0 and labels.max() < NUM_CLASSES),
        f"{where}: labels outside 0..{NUM_CLASSES - 1}",
    )
    return labels


@dataclass
class StoreBuilder:
    """Accumulates (writer, split) blocks of images, then writes one FEMNIST store."""

    with_shards: bool
    blocks: list[tuple[str, str, str, np.ndarray, np.ndarray]] = field(default_factory=list)
    shard_of: dict[str, str] = field(default_factory=dict)
    seen: set[tuple[str, str]] = field(default_factory=set)

    def add(
        self, writer: str, split: str, pixels: np.ndarray, labels: np.ndarray, shard: str = ""
    ) -> None:
        """Add one writer's images of one source split."""
        if self.with_shards:
            previous = self.shard_of.setdefault(writer, shard)
            require(
                previous == shard,
                f"writer {writer} appears in LEAF shards {previous} and {shard}; a writer must "
                "belong to one shard: remove the overlapping files",
            )
        require(
            (writer, split) not in self.seen,
            f"writer {writer} appears twice in the {split} data; the source files overlap: "
            "remove the duplicate file",
        )
        self.seen.add((writer, split))
        self.blocks.append((writer, split, shard, pixels, labels))

    def index_and_pixels(self) -> tuple[pd.DataFrame, np.ndarray]:
        """The store index (sorted by sample id) and the matching pixel array."""
        require(bool(self.blocks), "no FEMNIST images found in the source; check its path")
        frames = [
            pd.DataFrame(
                {
                    "sample_id": [f"{writer}-{split}-{i:05d}" for i in range(len(labels))],
                    "label": labels,
                    "group": writer,
                    "source_split": split,
                    **({"shard": shard} if self.with_shards else {}),
                }
            )
            for writer, split, shard, _, labels in self.blocks
        ]
        index = pd.concat(frames, ignore_index=True)
        pixels = np.concatenate([block[3] for block in self.blocks])
        order = np.argsort(index["sample_id"].to_numpy(), kind="stable")
        return index.iloc[order].reset_index(drop=True), pixels[order]

    def summary(self, index: pd.DataFrame) -> dict[str, Any]:
        """Counts recorded in the manifest."""
        facts: dict[str, Any] = {
            "writers": int(index["group"].nunique()),
            "samples_by_split": {s: int((index["source_split"] == s).sum()) for s in SOURCE_SPLITS},
            "pixels": PIXEL_NOTE,
        }
        if self.with_shards:
            facts["shards"] = {
                str(shard): {
                    "writers": int(rows["group"].nunique()),
                    **{s: int((rows["source_split"] == s).sum()) for s in SOURCE_SPLITS},
                }
                for shard, rows in index.groupby("shard", sort=True)
            }
        return facts


# ------------------------------------------------------------------------------------ LEAF JSON
def leaf_shard_files(root: Path) -> dict[str, dict[str, Path]]:
    """``{shard: {"train": path, "test": path}}`` for a LEAF data directory, shards sorted."""
    shards: dict[str, dict[str, Path]] = {}
    for split in SOURCE_SPLITS:
        folder = root / split
        require(
            folder.is_dir(),
            f"LEAF directory {root} has no {split}/ folder; point params.path at LEAF's "
            "data/femnist/data (with train/ and test/ from preprocess.sh -t sample)",
        )
        for path in sorted(folder.glob("*.json")):
            match = _LEAF_FILE.match(path.name)
            require(
                match is not None and match["split"] == split,
                f"{path}: not a LEAF {split} shard name (<shard>_{split}_<fraction>.json)",
            )
            shards.setdefault(match["shard"], {})[split] = path
    require(bool(shards), f"LEAF directory {root} holds no *.json shards in train/ or test/")
    for shard, files in shards.items():
        for split in SOURCE_SPLITS:
            require(
                split in files,
                f"LEAF shard {shard} in {root} has no {split} file; LEAF's -t sample split "
                "writes both train and test files",
            )
    return dict(sorted(shards.items()))


def verify_sha256sums(root: Path, hashes: dict[str, str]) -> None:
    """Check the files listed in ``root/SHA256SUMS`` (if present) against ``hashes``."""
    sums = root / "SHA256SUMS"
    if not sums.is_file():
        return
    for line in sums.read_text().splitlines():
        if not line.strip():
            continue
        expected, _, name = line.strip().partition("  ")
        name = name.lstrip("*")
        actual = hashes.get(name) or (sha256_file(root / name) if (root / name).is_file() else None)
        require(
            actual == expected.lower(),
            f"{root / name} does not match {sums} (expected sha256 {expected}, got {actual}); "
            "the LEAF directory is damaged: restore it",
        )


def read_leaf_json(path: Path) -> dict[str, tuple[list, list]]:
    """``{writer: (x, y)}`` of one LEAF JSON file, checked against its ``num_samples``."""
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BenchlibError(f"{path} is not valid JSON ({exc}); restore the LEAF file") from exc
    require(
        isinstance(data, dict) and {"users", "num_samples", "user_data"} <= set(data),
        f"{path} lacks LEAF's users / num_samples / user_data keys",
    )
    require(
        len(data["users"]) == len(data["num_samples"]),
        f"{path}: users and num_samples differ in length",
    )
    writers: dict[str, tuple[list, list]] = {}
    for writer, count in zip(data["users"], data["num_samples"], strict=True):
        entry = data["user_data"].get(writer)
        require(entry is not None, f"{path}: writer {writer} listed in users has no user_data")
        require(
            len(entry["x"]) == len(entry["y"]) == count,
            f"{path}: writer {writer} has {len(entry['x'])} images and {len(entry['y'])} labels, "
            f"num_samples says {count}",
        )
        writers[str(writer)] = (entry["x"], entry["y"])
    return writers


def prepare_femnist_leaf(out_dir: Path, params: dict[str, Any]) -> None:
    """Import a LEAF FEMNIST JSON directory into the store (one ``shard`` per LEAF file pair)."""
    root = resolve_input_path(params["path"], "femnist_leaf params.path")
    shards = leaf_shard_files(root)
    hashes: dict[str, str] = {}
    builder = StoreBuilder(with_shards=True)
    for shard, files in shards.items():
        for split in SOURCE_SPLITS:
            path = files[split]
            hashes[f"{split}/{path.name}"] = sha256_file(path)
            for writer, (x, y) in sorted(read_leaf_json(path).items()):
                where = f"{path.name} writer {writer}"
                pixels = to_uint8(np.asarray(x, dtype=np.float64), where)
                builder.add(writer, split, pixels, to_labels(y, len(pixels), where), shard)
    verify_sha256sums(root, hashes)
    index, pixels = builder.index_and_pixels()
    write_store(
        out_dir,
        dataset="femnist_leaf",
        index=index,
        pixels=pixels,
        num_classes=NUM_CLASSES,
        sources=[{"name": name, "sha256": digest} for name, digest in sorted(hashes.items())],
        extra={"source_format": "leaf-json", **builder.summary(index)},
    )


# ------------------------------------------------------------------------------------ TFF HDF5
def _corrupt_archive(archive: Path, exc: BaseException) -> BenchlibError:
    reason = " ".join(str(exc).split())
    return BenchlibError(
        f"{archive} is not a readable tar archive ({reason}); it is truncated or corrupt: delete "
        "it and download again"
    )


def extract_members(archive: Path, names: list[str], folder: Path) -> dict[str, Path]:
    """Copy the regular files called ``names`` (any folder inside ``archive``) into ``folder``,
    each at most the size the release can have (:data:`TFF_MAX_BYTES`)."""
    found: dict[str, Path] = {}
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                base = Path(member.name).name
                if member.isfile() and base in names and base not in found:
                    what = f"{archive}:{member.name}"
                    check_member_size(member.size, TFF_MAX_BYTES.get(base, member.size), what)
                    source = tar.extractfile(member)
                    assert source is not None  # regular files always have a stream
                    with source:
                        copy_declared(source, folder / base, member.size, what)
                    found[base] = folder / base
    except OSError as exc:
        if exc.errno is not None:  # the file system, not the archive (disk full, permissions)
            raise BenchlibError(
                f"cannot extract {archive} into {folder} ({exc.strerror}); free disk space or "
                "fix the folder's permissions"
            ) from exc
        raise _corrupt_archive(archive, exc) from exc
    except (tarfile.TarError, EOFError, ValueError) as exc:
        raise _corrupt_archive(archive, exc) from exc
    lacking = [name for name in names if name not in found]
    require(not lacking, f"{archive} lacks {', '.join(lacking)}; is it TFF's fed_emnist.tar.bz2?")
    return found


def read_tff_h5(path: Path, split: str, builder: StoreBuilder) -> None:
    """Add every writer of one TFF HDF5 file (``examples/<writer>/{pixels,label}``)."""
    import h5py

    try:
        with h5py.File(path, "r") as h5:
            require("examples" in h5, f"{path.name} has no 'examples' group; not a TFF EMNIST file")
            examples = h5["examples"]
            for writer in sorted(examples.keys()):
                group = examples[writer]
                where = f"{path.name} writer {writer}"
                require(
                    "pixels" in group and "label" in group,
                    f"{where}: missing 'pixels' or 'label' dataset",
                )
                pixels = to_uint8(group["pixels"][()], where)
                builder.add(
                    writer, split, pixels, to_labels(group["label"][()], len(pixels), where)
                )
    except OSError as exc:
        raise BenchlibError(
            f"{path.name} from the archive is not a readable HDF5 file ({exc}); the archive is "
            "corrupt: delete it and download again"
        ) from exc


def prepare_femnist_tff(out_dir: Path, params: dict[str, Any]) -> None:
    """Fetch (or re-check) TFF's fed_emnist.tar.bz2 and import both HDF5 files."""
    remote, archive = fetch_source_file("femnist_tff", TFF_ARCHIVE, params)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    builder = StoreBuilder(with_shards=False)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.h5.", dir=out_dir.parent) as tmp:
        members = extract_members(archive, list(TFF_MEMBERS.values()), Path(tmp))
        for split, name in TFF_MEMBERS.items():
            read_tff_h5(members[name], split, builder)
    index, pixels = builder.index_and_pixels()
    write_store(
        out_dir,
        dataset="femnist_tff",
        index=index,
        pixels=pixels,
        num_classes=NUM_CLASSES,
        sources=[{"name": remote.url, "sha256": remote.sha256}],
        extra={"source_format": "tff-hdf5", **builder.summary(index)},
    )


TFF_FILES = (RemoteFile(TFF_ARCHIVE, TFF_URL, TFF_SHA256),)
register_remote_files("femnist_tff", TFF_FILES)
register_dataset(
    DatasetSource(
        name="femnist_leaf",
        build=prepare_femnist_leaf,
        params=Params(
            {
                "path": Param(
                    {"type": "string"},
                    description="the LEAF data directory with train/ and test/ folders "
                    "(LEAF's data/femnist/data)",
                    required=True,
                )
            }
        ),
        num_classes=NUM_CLASSES,
        image_shape=(1, SIDE, SIDE),
        description="FEMNIST from a local LEAF JSON directory (writers grouped in LEAF shards)",
    )
)
register_dataset(
    DatasetSource(
        name="femnist_tff",
        build=prepare_femnist_tff,
        params=Params(download_params(TFF_FILES)),
        num_classes=NUM_CLASSES,
        image_shape=(1, SIDE, SIDE),
        description="FEMNIST from TensorFlow Federated's fed_emnist.tar.bz2 (3,400 writers)",
    )
)
