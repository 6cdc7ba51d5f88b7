"""``fass``: Fetal Abdominal Structures Segmentation (Da et al. 2023; Mendeley Data 4gcpm9dsc3,
CC BY 4.0), the LIGHTYEAR paper's ultrasound task: the fetal liver.

The archive (pooch download with a pinned sha256; the ``download_data`` rule fetches it) holds,
under one root folder of any name, ``IMAGES/<stem>.png`` (greyscale B-mode) and
``ARRAY_FORMAT/<stem>.npy`` with the same stem. Each ``.npy`` is a pickled dict whose
``structures`` entry maps ``artery``, ``liver``, ``stomach`` and ``vein`` to binary masks; it is
read with :mod:`benchlib.data.safe_pickle` (numpy arrays and plain containers only), never with
``allow_pickle=True``. The mask is ``structures['liver'] > 0`` (one foreground class). The patient
is the ``P<n>`` prefix of the stem (``P010_IMG1``) and becomes the store's ``group``, so a
``groups`` partition gives each client a disjoint seeded set of patients. Images are resized to
``params.size`` (default 64) square, bilinear; masks nearest neighbour. An archive whose only
member is another zip (Mendeley's zip cache) is opened one level down.
"""

from __future__ import annotations

import io
import re
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.archive_bounds import copy_bounded
from benchlib.data.download import (
    RemoteFile,
    download_params,
    fetch_source_file,
    register_remote_files,
)
from benchlib.data.progress import ItemProgress
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.safe_pickle import load_npy
from benchlib.data.seg_images import (
    DEFAULT_SIZE,
    SIZE_PARAM,
    image_size,
    read_grey,
    resize_pair,
)
from benchlib.data.store import write_store
from benchlib.declarations.params import Params
from benchlib.primitives.errors import BenchlibError, require

FASS_ARCHIVE = "fass.zip"
FASS_URL = (
    "https://data.mendeley.com/public-files/datasets/4gcpm9dsc3/files/"
    "89e74076-ff57-4e81-9634-4fc29c6128ff/file_downloaded"
)
FASS_SHA256 = "bde4ab58689bdbc59fa8c0222d41a9fbe1edf16dab40ac95346b6c2f2a7d22ee"
STRUCTURE = "liver"
PATIENT = re.compile(r"^(P\d+)_")


def _corrupt(archive: Path, exc: BaseException) -> BenchlibError:
    return BenchlibError(
        f"{archive} is not a readable zip archive ({' '.join(str(exc).split())}); it is "
        "truncated or corrupt: delete it and download again"
    )


def fass_members(names: list[str], archive: Path) -> dict[str, tuple[str, str]]:
    """``{stem: (image member, array member)}`` from the archive's member names."""
    images: dict[str, str] = {}
    arrays: dict[str, str] = {}
    roots = set()
    for name in names:
        path = PurePosixPath(name)
        if len(path.parts) < 2 or path.name.startswith("."):
            continue
        folder, suffix = path.parent.name, path.suffix.lower()
        if folder == "IMAGES" and suffix == ".png":
            images[path.stem] = name
            roots.add(str(path.parent.parent))
        elif folder == "ARRAY_FORMAT" and suffix == ".npy":
            arrays[path.stem] = name
            roots.add(str(path.parent.parent))
    require(
        bool(images),
        f"{archive} has no IMAGES/*.png files; is it the FASS archive (Mendeley 4gcpm9dsc3)?",
    )
    require(
        len(roots) == 1,
        f"{archive} holds IMAGES/ or ARRAY_FORMAT/ folders under several roots "
        f"({', '.join(sorted(roots))}); expected one FASS folder",
    )
    unpaired = sorted(set(images) ^ set(arrays))
    require(
        not unpaired,
        f"{archive}: {len(unpaired)} images lack their mask array or vice versa (e.g. "
        f"{', '.join(unpaired[:3])}); the archive is incomplete: download it again",
    )
    return {stem: (images[stem], arrays[stem]) for stem in sorted(images)}


def liver_mask(payload: bytes, where: str) -> np.ndarray:
    """The liver mask (bool) of one ``ARRAY_FORMAT`` file's bytes, via the restricted unpickler."""
    array = load_npy(io.BytesIO(payload), where)
    data = array.item() if array.dtype == object and array.shape == () else None
    structures = data.get("structures") if isinstance(data, dict) else None
    require(
        isinstance(structures, dict) and STRUCTURE in structures,
        f"{where} is not a FASS mask file (expected a pickled dict with structures['liver'])",
    )
    mask = np.asarray(structures[STRUCTURE])
    require(mask.ndim == 2, f"{where}: the liver mask is not a 2-D array (shape {mask.shape})")
    return mask > 0


def _open_fass_zip(archive: Path, scratch: Path) -> zipfile.ZipFile:
    """The zip holding the FASS folder: the archive itself, or its only member if that is a zip."""
    bundle = zipfile.ZipFile(archive)
    names = [n for n in bundle.namelist() if not n.endswith("/")]
    if len(names) == 1 and names[0].lower().endswith(".zip"):
        inner = scratch / "inner.zip"
        info = bundle.getinfo(names[0])
        with bundle, bundle.open(info) as source:
            copy_bounded(source, inner, info.file_size, info.compress_size, f"{archive}:{names[0]}")
        return zipfile.ZipFile(inner)
    return bundle


def prepare_fass(out_dir: Path, params: dict[str, Any]) -> None:
    """Fetch (or re-check) the FASS archive and store every image with its liver mask."""
    size = image_size(params, "fass")
    remote, archive = fetch_source_file("fass", FASS_ARCHIVE, params)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.zip.", dir=out_dir.parent) as tmp:
        try:
            with _open_fass_zip(archive, Path(tmp)) as bundle:
                members = fass_members(bundle.namelist(), archive)
                pixels, masks, patients = _read_members(bundle, members, size)
        except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile) as exc:
            raise _corrupt(archive, exc) from exc
    index = pd.DataFrame(
        {"sample_id": list(members), "label": 0, "group": patients, "source_split": ""}
    )
    write_store(
        out_dir,
        dataset="fass",
        index=index,
        pixels=pixels,
        masks=masks,
        num_classes=2,
        sources=[{"name": remote.url, "sha256": remote.sha256}],
        task="segmentation",
        extra={
            "structure": STRUCTURE,
            "patients": int(index["group"].nunique()),
            "foreground_fraction": round(float(masks.mean()), 6),
        },
    )


def _read_members(
    bundle: zipfile.ZipFile, members: dict[str, tuple[str, str]], size: int
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    pixels = np.empty((len(members), size, size), dtype=np.uint8)
    masks = np.empty((len(members), size, size), dtype=np.uint8)
    patients = []
    progress = ItemProgress("fass: extracting and reading", len(members), "images")
    for i, (stem, (image_name, array_name)) in enumerate(members.items()):
        patient = PATIENT.match(stem)
        require(
            patient is not None,
            f"{image_name}: no P<n> patient prefix in the file name; not a FASS image",
        )
        patients.append(patient.group(1))
        image = read_grey(bundle.read(image_name), image_name)
        mask = liver_mask(bundle.read(array_name), array_name)
        require(
            mask.shape == image.shape,
            f"{array_name}: mask shape {mask.shape} differs from its image {image.shape}",
        )
        pixels[i], masks[i] = resize_pair(image, mask, size)
        progress.update()
    progress.close()
    return pixels, masks, patients


FILES = (RemoteFile(FASS_ARCHIVE, FASS_URL, FASS_SHA256),)
register_remote_files("fass", FILES)
register_dataset(
    DatasetSource(
        name="fass",
        build=prepare_fass,
        params=Params({**download_params(FILES), "size": SIZE_PARAM}),
        num_classes=2,
        image_shape=(1, DEFAULT_SIZE, DEFAULT_SIZE),
        task="segmentation",
        description="FASS fetal abdominal ultrasound (Mendeley 4gcpm9dsc3), liver masks",
    )
)
