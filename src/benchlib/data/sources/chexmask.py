"""``chexmask_mimic``: chest X-ray lung segmentation, the LIGHTYEAR paper's X-ray task:
MIMIC-CXR-JPG images (credentialed, bring your own) with CheXmask's lung masks (open, PhysioNet).

- ``params.path``: the user's local MIMIC-CXR-JPG copy (https://physionet.org/content/
  mimic-cxr-jpg/2.1.0/): its ``IMAGE_FILENAMES`` list and the selected images
  ``files/pXX/p<subject>/s<study>/<dicom_id>.jpg``. Missing or incomplete: one error naming the
  page and what must be in the folder.
- The CheXmask MIMIC CSV (``OriginalResolution/MIMIC-CXR-JPG.csv``): ``params.chexmask_csv``, a
  local copy, or ``params.chexmask_sha256`` (with ``params.chexmask_url``, default PhysioNet's
  file) to download it with pooch into ``results/downloads/<dataset>/``. PhysioNet publishes no
  SHA256SUMS for CheXmask that could be read here, so the user pins the hash.

Rows with ``Dice RCA (Mean) >= params.min_rca`` (default 0.7, CheXmask's recommendation and the
paper's filter) are sorted by image id and ``params.num_images`` (default 200) of them drawn with
``params.seed``; the split's ``iid`` partition then gives 40 per client for 5 clients. The mask is
both lungs together (``Left Lung`` | ``Right Lung``, RLE: ``start length`` pairs, 1-based
starts, row-major over ``Height`` x ``Width``), one foreground class. Images and masks are
resized to ``params.size`` (default 64) square, bilinear / nearest neighbour. ``group`` is the
MIMIC subject (``p<subject>``).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.download import RemoteFile, download_params, fetch_with_params
from benchlib.data.paths import resolve_input_path
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.seg_images import (
    DEFAULT_SIZE,
    LOG,
    SIZE_PARAM,
    image_size,
    read_grey,
    resize_pair,
)
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import sha256_file
from benchlib.primitives.seeding import numpy_rng

MIMIC_PAGE = "https://physionet.org/content/mimic-cxr-jpg/2.1.0/"
CHEXMASK_PAGE = "https://physionet.org/content/chexmask-cxr-segmentation-data/1.0.0/"
CHEXMASK_URL = (
    "https://physionet.org/files/chexmask-cxr-segmentation-data/1.0.0/"
    "OriginalResolution/MIMIC-CXR-JPG.csv"
)
CSV_NAME = "MIMIC-CXR-JPG.csv"
ID_COLUMNS = ("dicom_id", "Image ID")
QUALITY = "Dice RCA (Mean)"
LUNGS = ("Left Lung", "Right Lung")
FOLDER_CONTENTS = "IMAGE_FILENAMES and the images files/pXX/p<subject>/s<study>/<dicom_id>.jpg"


def decode_rle(rle: str, height: int, width: int, where: str = "RLE") -> np.ndarray:
    """A bool ``[height, width]`` mask from CheXmask's RLE (1-based ``start length`` pairs)."""
    mask = np.zeros(height * width, dtype=bool)
    if not isinstance(rle, str) or not rle.strip():
        return mask.reshape(height, width)
    try:
        runs = np.asarray(rle.split(), dtype=np.int64)
    except ValueError as exc:
        raise BenchlibError(f"{where}: the RLE holds non-integers; not a CheXmask mask") from exc
    require(len(runs) % 2 == 0, f"{where}: the RLE has an odd number of values")
    starts, lengths = runs[0::2] - 1, runs[1::2]
    require(
        bool(
            (starts >= 0).all() and (lengths >= 0).all() and (starts + lengths <= mask.size).all()
        ),
        f"{where}: an RLE run lies outside the {height}x{width} mask",
    )
    for start, length in zip(starts.tolist(), lengths.tolist(), strict=True):
        mask[start : start + length] = True
    return mask.reshape(height, width)


def _chexmask_csv(out_dir: Path, params: dict[str, Any]) -> tuple[Path, str]:
    """The CheXmask CSV (local or downloaded) and what the manifest records as its name."""
    if "chexmask_csv" in params:
        path = resolve_input_path(params["chexmask_csv"], "chexmask_mimic params.chexmask_csv")
        return path, path.name
    require(
        "chexmask_sha256" in params,
        "chexmask_mimic needs the CheXmask MIMIC CSV: set params.chexmask_csv to a local copy of "
        f"OriginalResolution/{CSV_NAME} from {CHEXMASK_PAGE}, or set params.chexmask_sha256 "
        "(its sha256) to download it",
    )
    remote = RemoteFile(
        CSV_NAME,
        str(params.get("chexmask_url", CHEXMASK_URL)),  # unset: PhysioNet's file
        str(params["chexmask_sha256"]).lower(),
        url_param="chexmask_url",
        sha256_param="chexmask_sha256",
    )
    folder = out_dir.parent.parent / "downloads" / out_dir.name  # results/downloads/<dataset>
    path = fetch_with_params(remote, params, folder)
    return path, remote.url


def _read_csv(path: Path, **kwargs: Any) -> Any:
    try:
        return pd.read_csv(path, **kwargs)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError, ValueError) as exc:
        raise BenchlibError(f"{path} is not a readable CheXmask CSV ({exc}); restore it") from exc


def select_rows(path: Path, params: dict[str, Any]) -> pd.DataFrame:
    """Rows passing the quality filter, sorted by image id, a seeded ``num_images`` of them, with
    their lung RLEs and mask size (``image_id``, ``Left Lung``, ``Right Lung``, ``Height``,
    ``Width``). The CSV is read in chunks (the full MIMIC file is several GB)."""
    header = list(_read_csv(path, nrows=0).columns)
    id_column = next((c for c in ID_COLUMNS if c in header), None)
    needed = [QUALITY, *LUNGS, "Height", "Width"]
    missing = [c for c in needed if c not in header] + ([] if id_column else ["dicom_id"])
    require(not missing, f"{path} lacks columns {missing}; is it CheXmask's MIMIC-CXR-JPG CSV?")
    assert id_column is not None
    min_rca = float(params["min_rca"])
    num_images = int(params["num_images"])
    quality = _read_csv(path, usecols=[id_column, QUALITY], dtype={id_column: str})
    good = quality.loc[pd.to_numeric(quality[QUALITY], errors="coerce") >= min_rca, id_column]
    good = good.sort_values(kind="stable").drop_duplicates().reset_index(drop=True)
    require(
        len(good) >= num_images,
        f"{path} has only {len(good)} images with {QUALITY} >= {min_rca}; lower "
        "params.num_images or params.min_rca",
    )
    order = numpy_rng(int(params["seed"]), "chexmask/select").permutation(len(good))
    chosen = set(good.iloc[np.sort(order[:num_images])])
    columns = [id_column, *LUNGS, "Height", "Width"]
    parts = []
    try:
        for chunk in pd.read_csv(path, usecols=columns, dtype={id_column: str}, chunksize=20_000):
            parts.append(chunk[chunk[id_column].isin(chosen)])
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise BenchlibError(f"{path} is not a readable CheXmask CSV ({exc}); restore it") from exc
    rows = pd.concat(parts).rename(columns={id_column: "image_id"})
    rows = rows.drop_duplicates("image_id").sort_values("image_id", kind="stable")
    return rows.reset_index(drop=True)


def require_listing(root: Path) -> Path:
    """The copy's IMAGE_FILENAMES (every MIMIC-CXR-JPG release has one at its root)."""
    listing = root / "IMAGE_FILENAMES"
    require(
        listing.is_file(),
        f"the MIMIC-CXR-JPG copy {root} has no IMAGE_FILENAMES; it is incomplete: download "
        f"MIMIC-CXR-JPG from {MIMIC_PAGE} (credentialed access) so that the folder holds "
        f"{FOLDER_CONTENTS}, and set params.path to it",
    )
    return listing


def mimic_images(root: Path, image_ids: list[str]) -> dict[str, Path]:
    """``{dicom_id: jpg path}`` of the selected images in the local MIMIC-CXR-JPG copy."""
    listing = require_listing(root)
    by_id = {}
    for line in listing.read_text().splitlines():
        relative = PurePosixPath(line.strip())
        if relative.suffix == ".jpg":
            by_id[relative.stem] = relative
    wanted = {i: by_id.get(i) for i in image_ids}
    absent = [i for i, rel in wanted.items() if rel is None or not (root / rel).is_file()]
    require(
        not absent,
        f"the MIMIC-CXR-JPG copy {root} lacks {len(absent)} of the {len(image_ids)} selected "
        f"images (e.g. {', '.join(absent[:3])}); download MIMIC-CXR-JPG from {MIMIC_PAGE} "
        f"(credentialed access) so that the folder holds {FOLDER_CONTENTS}",
    )
    return {i: root / rel for i, rel in wanted.items() if rel is not None}


def prepare_chexmask(out_dir: Path, params: dict[str, Any]) -> None:
    """Select CheXmask rows, read their MIMIC images, decode the lungs, store at 64x64."""
    require(  # path is unset until the user has the data (check_local_copy says so first)
        "path" in params,
        f"chexmask_mimic needs params.path: your local MIMIC-CXR-JPG copy ({MIMIC_PAGE})",
    )
    root = resolve_input_path(params["path"], "chexmask_mimic params.path")
    size = image_size(params, "chexmask_mimic")
    require_listing(root)  # before any download or CSV reading
    csv_path, csv_name = _chexmask_csv(out_dir, params)
    rows = select_rows(csv_path, params)
    paths = mimic_images(root, rows["image_id"].tolist())
    pixels = np.empty((len(rows), size, size), dtype=np.uint8)
    masks = np.empty((len(rows), size, size), dtype=np.uint8)
    groups = []
    for i, record in enumerate(rows.to_dict("records")):
        image_id = record["image_id"]
        path = paths[image_id]
        groups.append(path.parent.parent.name)  # files/pXX/p<subject>/s<study>/<id>.jpg
        image = read_grey(path, str(path))
        height, width = int(record["Height"]), int(record["Width"])
        where = f"{csv_path.name} row {image_id}"
        mask = np.zeros((height, width), dtype=bool)
        for column in LUNGS:
            mask |= decode_rle(record[column], height, width, f"{where} {column}")
        require(
            mask.shape == image.shape,
            f"{where}: mask {mask.shape} and image {image.shape} differ in size; use CheXmask's "
            "OriginalResolution CSV (its masks have the MIMIC images' size)",
        )
        pixels[i], masks[i] = resize_pair(image, mask, size)
        if (i + 1) % 50 == 0 or i + 1 == len(rows):
            LOG.info("chexmask_mimic: %d/%d images read", i + 1, len(rows))
    index = pd.DataFrame(
        {"sample_id": rows["image_id"], "label": 0, "group": groups, "source_split": ""}
    )
    write_store(
        out_dir,
        dataset="chexmask_mimic",
        index=index,
        pixels=pixels,
        masks=masks,
        num_classes=2,
        sources=[{"name": csv_name, "sha256": sha256_file(csv_path)}],
        task="segmentation",
        extra={
            "foreground": "both lungs",
            "min_rca": float(params["min_rca"]),
            "subjects": int(index["group"].nunique()),
            "foreground_fraction": round(float(masks.mean()), 6),
        },
    )


# the CheXmask CSV's URL / sha256 overrides, retries and timeout (no download_dir: it is not
# one of the workflow's registered downloads, :func:`_chexmask_csv` picks its folder)
_DOWNLOAD = download_params(
    [RemoteFile(CSV_NAME, CHEXMASK_URL, "", "chexmask_url", "chexmask_sha256", pinned=False)]
)
del _DOWNLOAD["download_dir"]
register_dataset(
    DatasetSource(
        name="chexmask_mimic",
        build=prepare_chexmask,
        num_classes=2,
        image_shape=(1, DEFAULT_SIZE, DEFAULT_SIZE),
        task="segmentation",
        description="MIMIC-CXR-JPG chest X-rays (bring your own) with CheXmask lung masks",
        access_page=MIMIC_PAGE,
        params=Params(
            {
                # unset until the user has the data: a missing copy stops the prepare step
                "path": Param(
                    {"type": "string"},
                    description=f"your local MIMIC-CXR-JPG copy ({FOLDER_CONTENTS})",
                ),
                "chexmask_csv": Param(
                    {"type": "string"},
                    description=f"a local CheXmask OriginalResolution/{CSV_NAME} (else download)",
                ),
                **_DOWNLOAD,
                "min_rca": Param(
                    {"type": "number", "minimum": 0, "maximum": 1},
                    0.7,
                    f"least {QUALITY} of a kept row (CheXmask's recommendation)",
                ),
                "num_images": Param(
                    {"type": "integer", "minimum": 1}, 200, "images drawn from the kept rows"
                ),
                "seed": Param({"type": "integer"}, 0, "seed of the image draw"),
                "size": SIZE_PARAM,
            }
        ),
    )
)
