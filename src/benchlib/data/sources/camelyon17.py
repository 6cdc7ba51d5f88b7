"""Camelyon17-WILDS v1.0: 96x96 RGB lymph-node patches, label = tumour, one client per hospital.

Two sources write the same store:

- ``camelyon17``: the WILDS v1.0 archive (a tar.gz from CodaLab, about 10.7 GB), downloaded
  through pooch. WILDS publishes no checksum: the archive's byte size (10,658,709,504 per the
  WILDS loader; ``params.size`` overrides it for a mirror), metadata.csv's row count (455,954)
  and the presence of every listed patch are verified; ``params.sha256`` pins a checksum.
  The patches are decoded straight from the compressed stream (no 10 GB extraction on disk).
- ``camelyon17_local``: an extracted copy (``params.path``: the ``camelyon17_v1.0`` folder, or
  its parent) with ``metadata.csv`` and ``patches/``.

Layout: ``camelyon17_v1.0/metadata.csv`` (unnamed index, patient, node, x_coord, y_coord, tumor,
slide, center, split) and ``patches/patient_<PPP>_node_<N>/patch_patient_<PPP>_node_<N>_x_<X>_y_<Y>
.png``. Store: ``sample_id`` = the patch file stem, ``label`` = ``tumor``, ``group`` =
``center`` (0-4: all five hospitals are clients, as in the LIGHTYEAR paper, not WILDS's
out-of-distribution split), ``source_split`` = WILDS's official split of the patch (``train``,
``id_val``, ``val`` = centre 1, ``test`` = centre 2), recorded but not used: the authors' split
file is not public, so each client's train/val/test are seeded fractions (``split.mode random``).
``params.num_patches`` (default 455,954) is the row count metadata.csv must have.
"""

from __future__ import annotations

import io
import logging
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.archive_bounds import check_member_size
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
ARCHIVE = "camelyon17_v1.0.tar.gz"
URL = (
    "https://worksheets.codalab.org/rest/bundles/0xe45e15f39fb54e9d9e919556af67aabe/contents/blob/"
)
ARCHIVE_BYTES = 10_658_709_504
SIDE = 96
METADATA_COLUMNS = ["patient", "node", "x_coord", "y_coord", "tumor", "slide", "center", "split"]
WILDS_VAL_CENTER, WILDS_TEST_CENTER = 1, 2
# a cluster job: one pass over 10.7 GB of gzip to find metadata.csv, one to decode 455,954 PNGs
# into a 12.6 GB memory-mapped array (about 1-2 h on one core); the page cache wants memory
PREPARE_RESOURCES = {"mem_mb": 16000, "runtime": 360, "cpus_per_task": 2}


def patch_stem(patient: str, node: int, x: int, y: int) -> str:
    return f"patch_patient_{patient}_node_{node}_x_{x}_y_{y}"


def patch_path(patient: str, node: int, x: int, y: int) -> str:
    """A patch's path below the release folder."""
    return f"patches/patient_{patient}_node_{node}/{patch_stem(patient, node, x, y)}.png"


def read_metadata(source: Any, where: str, expected_rows: int) -> pd.DataFrame:
    """metadata.csv checked (columns, row count, labels, centres), sorted by patch id."""
    try:
        table = pd.read_csv(source, index_col=0, dtype={"patient": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise BenchlibError(
            f"{where} is not a readable CSV ({exc}); fetch the release again"
        ) from exc
    missing = [c for c in METADATA_COLUMNS if c not in table]
    require(not missing, f"{where} lacks columns {missing}; is it WILDS Camelyon17 v1.0?")
    require(
        len(table) == expected_rows,
        f"{where} has {len(table)} rows, expected {expected_rows} (WILDS v1.0); the release is "
        "incomplete or another version: fetch it again (or fix params.num_patches for a subset)",
    )
    require(bool(table["tumor"].isin([0, 1]).all()), f"{where}: tumor must be 0 or 1")
    require(bool(table["center"].between(0, 4).all()), f"{where}: center must be 0-4")
    table["path"] = [
        patch_path(p, int(n), int(x), int(y))
        for p, n, x, y in zip(
            table["patient"], table["node"], table["x_coord"], table["y_coord"], strict=True
        )
    ]
    require(table["path"].is_unique, f"{where} lists a patch twice")
    return table.sort_values("path", kind="stable").reset_index(drop=True)


def wilds_split(table: pd.DataFrame) -> pd.Series:
    """WILDS's official split per patch: centre 1 = val, centre 2 = test, else train / id_val."""
    names = np.where(table["split"].to_numpy() == 1, "id_val", "train").astype(object)
    names[table["center"].to_numpy() == WILDS_VAL_CENTER] = "val"
    names[table["center"].to_numpy() == WILDS_TEST_CENTER] = "test"
    return pd.Series(names, index=table.index)


def decode_patch(data: bytes, where: str) -> np.ndarray:

    try:
        with open_image(data, where) as image:
            pixels = np.asarray(image.convert("RGB"))
    except OSError as exc:
        raise BenchlibError(f"{where} is not a readable PNG ({exc}); fetch it again") from exc
    require(
        pixels.shape == (SIDE, SIDE, 3),
        f"{where} is {pixels.shape[1]}x{pixels.shape[0]}, expected {SIDE}x{SIDE} RGB",
    )
    return pixels


class PatchArray:
    """The store's pixel rows (a memory-mapped file), filled patch by patch."""

    def __init__(self, table: pd.DataFrame, folder: Path) -> None:
        self.row_of = {path: i for i, path in enumerate(table["path"])}
        self.pixels = np.lib.format.open_memmap(
            folder / "pixels.npy", mode="w+", dtype=np.uint8, shape=(len(table), SIDE, SIDE, 3)
        )
        self.filled = np.zeros(len(table), dtype=bool)
        self.progress = ItemProgress("camelyon17: extracting and decoding", len(table), "patches")

    def add(self, path: str, data: bytes, where: str) -> None:
        row = self.row_of.get(path)
        if row is None:  # RELEASE notes, or patches metadata.csv does not list
            return
        self.pixels[row] = decode_patch(data, where)
        self.progress.update(0 if self.filled[row] else 1)
        self.filled[row] = True

    def check_complete(self, where: str, fix: str) -> None:
        self.progress.close()
        missing = [path for path, row in self.row_of.items() if not self.filled[row]]
        require(
            not missing, f"{where} lacks {len(missing)} listed patches (e.g. {missing[:1]}); {fix}"
        )


def write_camelyon_store(
    out_dir: Path, table: pd.DataFrame, pixels: np.ndarray, sources: list[dict[str, str]]
) -> None:
    index = pd.DataFrame(
        {
            "sample_id": table["path"].str.rsplit("/", n=1).str[1].str.removesuffix(".png"),
            "label": table["tumor"].astype(int),
            "group": table["center"].astype(int).astype(str),
            "source_split": wilds_split(table),
        }
    )
    counts = index.groupby("group").size()
    write_store(
        out_dir,
        dataset="camelyon17",
        index=index,
        pixels=pixels,
        num_classes=2,
        sources=sources,
        extra={
            "source_format": "wilds-camelyon17-v1.0",
            "source_split": "WILDS official split (train, id_val, val = centre 1, test = centre 2)",
            "centre_sizes": {str(g): int(n) for g, n in counts.items()},
        },
    )


# ------------------------------------------------------------------------------- archive
def _corrupt(archive: Path, exc: BaseException) -> BenchlibError:
    return BenchlibError(
        f"{archive} is not a readable tar.gz archive ({' '.join(str(exc).split())}); it is "
        "truncated or corrupt: delete it and download again"
    )


def _members(archive: Path):
    """(path below the release folder, member, tar) of every regular file, in archive order."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                if member.isfile():
                    parts = Path(member.name).parts
                    # inside camelyon17_v1.0/ (or at the top level of a repacked archive)
                    inner = "/".join(parts[1:] if parts[0].startswith("camelyon17") else parts)
                    yield inner, member, tar
    except OSError as exc:
        if exc.errno is not None:
            raise BenchlibError(f"cannot read {archive} ({exc.strerror})") from exc
        raise _corrupt(archive, exc) from exc
    except (tarfile.TarError, EOFError, ValueError) as exc:
        raise _corrupt(archive, exc) from exc


# the most a member of the release can hold: metadata.csv is about 20 MB, a 96 px PNG patch 30 kB
METADATA_MAX_BYTES = 256 * 1024**2
PATCH_MAX_BYTES = 16 * 1024**2


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo, archive: Path, limit: int) -> bytes:
    check_member_size(member.size, limit, f"{archive}:{member.name}")
    try:
        handle = tar.extractfile(member)
        assert handle is not None  # regular files always have a stream
        with handle:
            return handle.read()
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise _corrupt(archive, exc) from exc


def prepare_camelyon17(out_dir: Path, params: dict[str, Any]) -> None:
    """Fetch (or re-check) the WILDS archive, verify it and decode every patch into the store."""
    remote, archive = fetch_source_file("camelyon17", ARCHIVE, params)
    expected = int(params["num_patches"])
    table = None
    for inner, member, tar in _members(archive):  # pass 1: metadata.csv (may come last)
        if inner == "metadata.csv":
            table = read_metadata(
                io.BytesIO(_read(tar, member, archive, METADATA_MAX_BYTES)),
                f"{archive}:metadata.csv",
                expected,
            )
            break
    if table is None:
        raise BenchlibError(f"{archive} holds no metadata.csv; is it WILDS Camelyon17 v1.0?")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.", dir=out_dir.parent) as tmp:
        patches = PatchArray(table, Path(tmp))
        for inner, member, tar in _members(archive):  # pass 2: the patches
            if inner.endswith(".png"):
                data = _read(tar, member, archive, PATCH_MAX_BYTES)
                patches.add(inner, data, f"{archive}:{member.name}")
        patches.check_complete(str(archive), "delete the archive and download it again")
        patches.pixels.flush()
        digest = remote.sha256 or sha256_file(archive)
        write_camelyon_store(
            out_dir, table, patches.pixels, [{"name": remote.url, "sha256": digest}]
        )


def prepare_camelyon17_local(out_dir: Path, params: dict[str, Any]) -> None:
    """Build the store from an extracted ``camelyon17_v1.0`` folder."""
    root = resolve_input_path(params["path"], "camelyon17_local params.path")
    if not (root / "metadata.csv").is_file() and (root / "camelyon17_v1.0").is_dir():
        root = root / "camelyon17_v1.0"
    require(
        (root / "metadata.csv").is_file(),
        f"{root} has no metadata.csv; point params.path at the extracted camelyon17_v1.0 folder",
    )
    expected = int(params["num_patches"])
    table = read_metadata(root / "metadata.csv", str(root / "metadata.csv"), expected)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.", dir=out_dir.parent) as tmp:
        patches = PatchArray(table, Path(tmp))
        for path in table["path"]:
            file = root / path
            require(file.is_file(), f"{file} is listed in metadata.csv but missing; restore it")
            patches.add(path, file.read_bytes(), str(file))
        patches.pixels.flush()
        sources = [{"name": "metadata.csv", "sha256": sha256_file(root / "metadata.csv")}]
        write_camelyon_store(out_dir, table, patches.pixels, sources)


FILES = (RemoteFile(ARCHIVE, URL, "", size=ARCHIVE_BYTES, pinned=False),)
NUM_PATCHES_PARAM = Param(
    {"type": "integer", "minimum": 1},
    455_954,
    "rows metadata.csv must have (WILDS v1.0; fewer for a deliberate subset)",
)
PATH_PARAM = Param(
    {"type": "string"},
    description="the extracted camelyon17_v1.0 folder (or its parent)",
    required=True,
)
register_remote_files("camelyon17", FILES)
for _name, _build, _what, _params in (
    (
        "camelyon17",
        prepare_camelyon17,
        "the WILDS v1.0 archive (download)",
        {**download_params(FILES), "num_patches": NUM_PATCHES_PARAM},
    ),
    (
        "camelyon17_local",
        prepare_camelyon17_local,
        "an extracted WILDS v1.0 folder",
        {"path": PATH_PARAM, "num_patches": NUM_PATCHES_PARAM},
    ),
):
    register_dataset(
        DatasetSource(
            name=_name,
            build=_build,
            params=Params(_params),
            num_classes=2,
            image_shape=(3, SIDE, SIDE),
            description=f"Camelyon17-WILDS (96x96 patches, 5 hospitals) from {_what}",
            prepare_resources=PREPARE_RESOURCES,
        )
    )
