"""ISIC 2019 as FLamby's Fed-ISIC2019: 8 dermoscopy classes, 6 centres, FLamby's train/test.

Two sources write the same store:

- ``isic2019``: the ISIC 2019 challenge files (``ISIC_2019_Training_Input.zip``, the ground-truth
  and metadata CSVs) and FLamby's committed split file (owkin/FLamby at a pinned commit, pinned
  sha256), downloaded through pooch. ISIC publishes no checksum: the archive and CSVs are
  verified by their counts (25,331 images and rows; 23,247 split rows) and by agreeing with the
  split file; ``params.images_sha256`` / ``labels_sha256`` / ``metadata_sha256`` pin them.
- ``isic2019_local``: a local folder (``params.path``) holding the images (the extracted
  ``ISIC_2019_Training_Input/`` or ``images/``), FLamby's split file (``train_test_split`` or
  ``flamby_train_test_split.csv``) and optionally the two CSVs and a ``SHA256SUMS``.
  ``params.num_images`` (default 23,247: every split image) is how many split images the folder
  must hold, so a verified subset such as ../shared/data/isic2019_sample (1,437) works too.

Preprocessing as FLamby (``benchlib.data.colour_constancy``): shorter side to 224 px (bilinear),
Shades-of-Gray colour constancy, then a centre crop (or pad) to 224 x 224 so the store is one
uint8 array (``params.side`` / ``params.store_side`` change both). Store: ``label`` = FLamby's
``target`` (0-7 = MEL NV BCC AK BKL DF VASC SCC), ``group`` = centre id, ``source_split`` =
FLamby's per-centre train/test (``fold2``).
"""

from __future__ import annotations

import logging
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.colour_constancy import preprocess_dermoscopy
from benchlib.data.download import (
    RemoteFile,
    download_params,
    fetch_source_file,
    register_remote_files,
)
from benchlib.data.images import open_image
from benchlib.data.paths import resolve_input_path
from benchlib.data.progress import ItemProgress
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import sha256_file

LOG = logging.getLogger("benchlib")
CLASSES = ("MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC")
NUM_CLASSES = len(CLASSES)
SIDE = 224
SPLIT_ROWS = 23_247
ACCESS = "https://challenge.isic-archive.com/data/#2019"

BASE = "https://isic-challenge-data.s3.amazonaws.com/2019"
IMAGES_ZIP = "ISIC_2019_Training_Input.zip"
LABELS_CSV = "ISIC_2019_Training_GroundTruth.csv"
METADATA_CSV = "ISIC_2019_Training_Metadata.csv"
SPLIT_FILE = "train_test_split"
FLAMBY_COMMIT = "edacf54d5211520583b0133d55ac39b6fda8324b"
SPLIT_URL = (
    f"https://raw.githubusercontent.com/owkin/FLamby/{FLAMBY_COMMIT}/flamby/datasets/"
    "fed_isic2019/dataset_creation_scripts/train_test_split"
)
SPLIT_SHA256 = "d0f9d0d0102f60d78b4c5f9f0ef32100881a8e92fe6c38644f980b3eb4e1a86c"
SPLIT_COLUMNS = ["image", *CLASSES, "UNK", "target", "center", "fold", "fold2"]
IMAGE_FOLDERS = ("ISIC_2019_Training_Input", "images")
LOCAL_SPLIT_NAMES = (SPLIT_FILE, "flamby_train_test_split.csv")
# a cluster job: 23,247 JPEGs decoded, resized and colour-corrected from a 9.1 GB zip into a
# 3.5 GB memory-mapped array (under an hour on one core)
PREPARE_RESOURCES = {"mem_mb": 8000, "runtime": 180, "cpus_per_task": 2}


# ----------------------------------------------------------------------------- CSV checks
def read_csv(path: Path, what: str, columns: list[str]) -> pd.DataFrame:
    """A CSV with at least ``columns``; one clear error when unreadable or lacking columns."""
    try:
        table = pd.read_csv(path, dtype={"image": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise BenchlibError(f"{what} {path} is not a readable CSV ({exc}); fetch it again") from exc
    missing = [c for c in columns if c not in table]
    require(not missing, f"{what} {path} lacks columns {missing}; is it the right file?")
    return table


def check_count(actual: int, expected: int, what: str, fix: str) -> None:
    require(actual == expected, f"{what}: found {actual}, expected {expected}; {fix}")


def read_split(path: Path, expected_rows: int) -> pd.DataFrame:
    """FLamby's split file, checked: row count, targets 0-7, fold2 = <fold>_<center>."""
    split = read_csv(path, "FLamby split file", SPLIT_COLUMNS)
    check_count(
        len(split),
        expected_rows,
        f"rows of the FLamby split file {path}",
        "the file is truncated or not FLamby's train_test_split: fetch it again",
    )
    require(split["image"].is_unique, f"FLamby split file {path} lists an image twice")
    require(
        bool(split["target"].between(0, NUM_CLASSES - 1).all()),
        f"FLamby split file {path} has targets outside 0..{NUM_CLASSES - 1}",
    )
    expected_fold2 = split["fold"].astype(str) + "_" + split["center"].astype(str)
    require(
        bool((expected_fold2 == split["fold2"].astype(str)).all()),
        f"FLamby split file {path}: fold2 disagrees with fold and center; fetch it again",
    )
    return split


def check_ground_truth(labels: pd.DataFrame, split: pd.DataFrame, path: Path) -> None:
    """The challenge's one-hot ground truth must give every split image its split target."""
    onehot = labels.set_index("image")[[*CLASSES, "UNK"]]
    missing = sorted(set(split["image"]) - set(onehot.index))
    require(not missing, f"ground truth {path} has no row for split image {missing[:1]}")
    argmax = onehot.loc[split["image"]].to_numpy().argmax(axis=1)
    wrong = split["image"].to_numpy()[argmax != split["target"].to_numpy()]
    require(
        len(wrong) == 0,
        f"ground truth {path} disagrees with the FLamby split file on {len(wrong)} images "
        f"(e.g. {wrong[:1]}); one of the two files is not the ISIC 2019 release",
    )


def check_metadata(metadata: pd.DataFrame, split: pd.DataFrame, path: Path) -> None:
    """FLamby keeps exactly the images with a lesion id: every split image must have one."""
    lesion = metadata.set_index("image")["lesion_id"]
    missing = sorted(set(split["image"]) - set(lesion.index))
    require(not missing, f"metadata {path} has no row for split image {missing[:1]}")
    lacking = split["image"][lesion.loc[split["image"]].isna().to_numpy()]
    require(
        lacking.empty,
        f"metadata {path} has no lesion_id for split image {lacking.iloc[:1].tolist()}; "
        "FLamby's split keeps only images with one: the metadata is not the ISIC 2019 release",
    )


# ----------------------------------------------------------------------------- image readers
class ZipImages:
    """The JPEGs of the challenge zip, by image name (file stem)."""

    def __init__(self, archive: Path) -> None:
        self.archive = archive
        try:
            self.zip = zipfile.ZipFile(archive)
        except (zipfile.BadZipFile, OSError) as exc:
            raise self.corrupt(exc) from exc
        self.members = {
            Path(info.filename).stem: info.filename
            for info in self.zip.infolist()
            if info.filename.lower().endswith(".jpg") and not info.is_dir()
        }

    def corrupt(self, exc: BaseException) -> BenchlibError:
        return BenchlibError(
            f"{self.archive} is not a readable zip archive ({' '.join(str(exc).split())}); it "
            "is truncated or corrupt: delete it and download again"
        )

    def open(self, name: str) -> Any:

        try:
            with self.zip.open(self.members[name]) as handle:
                image = open_image(handle, name)
                image.load()
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise self.corrupt(exc) from exc
        return image


class FolderImages:
    """The ``*.jpg`` files of a folder, by image name (file stem)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.members = {p.stem: p for p in sorted(folder.glob("*.jpg"))}

    def open(self, name: str) -> Any:

        try:
            image = open_image(self.members[name])
            image.load()
        except OSError as exc:
            raise BenchlibError(
                f"{self.members[name]} is not a readable JPEG ({exc}); restore the file"
            ) from exc
        return image


# ----------------------------------------------------------------------------- store
def build_store(
    out_dir: Path,
    split: pd.DataFrame,
    open_image: Callable[[str], Any],
    params: dict[str, Any],
    sources: list[dict[str, str]],
) -> None:
    """Preprocess the split's images (sorted by name) into one store, written atomically."""
    side = int(params["side"])
    store_side = int(params.get("store_side", side))  # unset: the same as side
    split = split.sort_values("image", kind="stable").reset_index(drop=True)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.", dir=out_dir.parent) as tmp:
        pixels = np.lib.format.open_memmap(
            Path(tmp) / "pixels.npy",
            mode="w+",
            dtype=np.uint8,
            shape=(len(split), store_side, store_side, 3),
        )
        progress = ItemProgress("isic2019: extracting and preprocessing", len(split), "images")
        for i, name in enumerate(split["image"]):
            pixels[i] = preprocess_dermoscopy(open_image(name), side, store_side)
            progress.update()
        progress.close()
        pixels.flush()
        index = pd.DataFrame(
            {
                "sample_id": split["image"],
                "label": split["target"].astype(int),
                "group": split["center"].astype(int).astype(str),
                "source_split": split["fold"].astype(str),
            }
        )
        counts = index.groupby(["group", "source_split"]).size()
        write_store(
            out_dir,
            dataset="isic2019",
            index=index,
            pixels=pixels,
            num_classes=NUM_CLASSES,
            sources=sources,
            extra={
                "source_format": "isic2019-flamby",
                "classes": list(CLASSES),
                "preprocessing": (
                    f"shorter side {side} px (bilinear), Shades of Gray (p=6), centre crop/pad "
                    f"to {store_side}x{store_side}"
                ),
                "centre_sizes": {f"{g}/{s}": int(n) for (g, s), n in counts.items()},
            },
        )


def prepare_isic2019(out_dir: Path, params: dict[str, Any]) -> None:
    """Fetch (or re-check) the challenge files and FLamby's split, verify them, build the store."""
    paths, sources = {}, []
    for name in (SPLIT_FILE, LABELS_CSV, METADATA_CSV, IMAGES_ZIP):
        remote, paths[name] = fetch_source_file("isic2019", name, params)
        sources.append({"name": remote.url, "sha256": remote.sha256 or sha256_file(paths[name])})
    expected = int(params["archive_images"])
    split = read_split(paths[SPLIT_FILE], int(params["split_rows"]))
    labels = read_csv(paths[LABELS_CSV], "ground truth", ["image", *CLASSES, "UNK"])
    metadata = read_csv(paths[METADATA_CSV], "metadata", ["image", "lesion_id"])
    fix = "the download is incomplete or not the ISIC 2019 release: delete it and download again"
    check_count(len(labels), expected, f"rows of {paths[LABELS_CSV]}", fix)
    check_count(len(metadata), expected, f"rows of {paths[METADATA_CSV]}", fix)
    check_ground_truth(labels, split, paths[LABELS_CSV])
    check_metadata(metadata, split, paths[METADATA_CSV])
    images = ZipImages(paths[IMAGES_ZIP])
    missing = sorted(set(split["image"]) - set(images.members))
    if missing:
        raise BenchlibError(f"{paths[IMAGES_ZIP]} lacks split image {missing[0]}.jpg; {fix}")
    check_count(len(images.members), expected, f"JPEG images in {paths[IMAGES_ZIP]}", fix)
    build_store(out_dir, split, images.open, params, sources)


# ----------------------------------------------------------------------------- local folder
def verify_sha256sums(root: Path) -> None:
    """Check the files ``root/SHA256SUMS`` lists (if there is one)."""
    sums = root / "SHA256SUMS"
    if not sums.is_file():
        return
    for line in sums.read_text().splitlines():
        expected, _, name = line.strip().partition("  ")
        if not name:
            continue
        path = root / name.lstrip("*")
        require(path.is_file(), f"{path} is listed in {sums} but missing; restore it")
        actual = sha256_file(path)
        require(
            actual == expected.lower(),
            f"{path} does not match {sums} (expected sha256 {expected}, got {actual}); "
            "restore the file",
        )


def _first_existing(root: Path, names: tuple[str, ...], what: str) -> Path:
    for name in names:
        if (root / name).exists():
            return root / name
    raise BenchlibError(
        f"isic2019_local: {root} holds no {what} (looked for {', '.join(names)}); point "
        "params.path at the folder with the ISIC 2019 images and FLamby's split file"
    )


def prepare_isic2019_local(out_dir: Path, params: dict[str, Any]) -> None:
    """Build the store from a local folder holding the images and FLamby's split file."""
    root = resolve_input_path(params["path"], "isic2019_local params.path")
    split_path = _first_existing(root, LOCAL_SPLIT_NAMES, "FLamby split file")
    folder = _first_existing(root, IMAGE_FOLDERS, "image folder")
    split_sha256 = sha256_file(split_path)
    pinned = str(params["split_sha256"]).lower()
    require(
        split_sha256 == pinned,
        f"{split_path} has sha256 {split_sha256}, expected {pinned} (FLamby commit "
        f"{FLAMBY_COMMIT[:8]}); restore the file or fix params.split_sha256",
    )
    verify_sha256sums(root)
    split = read_split(split_path, int(params["split_rows"]))
    for name, columns, check in (
        (LABELS_CSV, ["image", *CLASSES, "UNK"], check_ground_truth),
        (METADATA_CSV, ["image", "lesion_id"], check_metadata),
    ):
        if (root / name).is_file():
            check(read_csv(root / name, name, columns), split, root / name)
    images = FolderImages(folder)
    present = split[split["image"].isin(set(images.members))]
    wanted = int(params["num_images"])
    if wanted == len(split):
        missing = sorted(set(split["image"]) - set(images.members))
        if missing:
            raise BenchlibError(
                f"{folder} lacks split image {missing[0]}.jpg; restore it, or set "
                "params.num_images to the number of split images you have"
            )
    check_count(
        len(present),
        wanted,
        f"split images in {folder}",
        "restore the missing images, or set params.num_images to the count of a deliberate subset",
    )
    sources = [{"name": split_path.name, "sha256": split_sha256}]
    build_store(out_dir, present, images.open, params, sources)


FILES = (
    RemoteFile(SPLIT_FILE, SPLIT_URL, SPLIT_SHA256, "split_url", "split_sha256"),
    RemoteFile(LABELS_CSV, f"{BASE}/{LABELS_CSV}", "", "labels_url", "labels_sha256", pinned=False),
    RemoteFile(
        METADATA_CSV, f"{BASE}/{METADATA_CSV}", "", "metadata_url", "metadata_sha256", pinned=False
    ),
    RemoteFile(IMAGES_ZIP, f"{BASE}/{IMAGES_ZIP}", "", "images_url", "images_sha256", pinned=False),
)
register_remote_files("isic2019", FILES)
_STORE = {  # both sources
    "split_rows": Param(
        {"type": "integer", "minimum": 1}, SPLIT_ROWS, "rows FLamby's split file must have"
    ),
    "side": Param({"type": "integer", "minimum": 1}, SIDE, "shorter image side after resizing"),
    "store_side": Param(
        {"type": "integer", "minimum": 1},
        description="side of the stored centre crop / pad (default: side)",
    ),
}
_DOWNLOAD = {
    **download_params(FILES),
    "archive_images": Param(
        {"type": "integer", "minimum": 1},
        25_331,
        "images (and CSV rows) the ISIC 2019 release must have",
    ),
    **_STORE,
}
_LOCAL = {
    "path": Param(
        {"type": "string"},
        description="the folder with the images and FLamby's split file",
        required=True,
    ),
    "split_sha256": Param(
        {"type": "string", "pattern": "^[0-9a-fA-F]{64}$"},
        SPLIT_SHA256,
        f"sha256 the split file must have (FLamby commit {FLAMBY_COMMIT[:8]})",
    ),
    "num_images": Param(
        {"type": "integer", "minimum": 1},
        SPLIT_ROWS,
        "split images the folder must hold (fewer for a deliberate subset)",
    ),
    **_STORE,
}
for _name, _build, _what, _params in (
    (
        "isic2019",
        prepare_isic2019,
        "the ISIC 2019 challenge files + FLamby's split (download)",
        _DOWNLOAD,
    ),
    (
        "isic2019_local",
        prepare_isic2019_local,
        "a local folder of ISIC 2019 images + FLamby's split",
        _LOCAL,
    ),
):
    register_dataset(
        DatasetSource(
            name=_name,
            build=_build,
            params=Params(_params),
            num_classes=NUM_CLASSES,
            image_shape=(3, SIDE, SIDE),
            description=f"Fed-ISIC2019 (8 classes, 6 centres) from {_what}",
            prepare_resources=PREPARE_RESOURCES,
        )
    )
