"""``hc18``: fetal head ultrasound (HC18 challenge sample), the CPU-scale substitute for FASS.

No public copy of the FASS liver data could be fetched, so CPU-scale LIGHTYEAR segmentation runs
use the real HC18 ultrasound sample beside the project (``../shared/data/fetal_hc18_sample``, 202
images): ``training_set/NNN_HC.png`` (800x540 greyscale) with ``NNN_HC_Annotation.png``, the
head outline as a thin ellipse. The mask is the filled outline (``binary_fill_holes``), one
foreground class (the fetal head). ``NNN_2HC`` ... ``NNN_4HC`` are further images of subject
``NNN``: the store's ``group`` is the subject, so a ``groups`` partition keeps each subject on
one client. Images are resized to ``params.size`` (default 64) square, bilinear; masks nearest
neighbour (the 800x540 aspect is not kept). A SHA256SUMS in the folder is verified.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.paths import resolve_input_path
from benchlib.data.progress import ItemProgress
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.seg_images import (
    DEFAULT_SIZE,
    SIZE_PARAM,
    check_sha256sums,
    hash_files,
    image_size,
    read_grey,
    resize_pair,
)
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require

IMAGE_NAME = re.compile(r"^(\d+)_(\d*)HC\.png$")


def filled_mask(annotation: np.ndarray, where: str) -> np.ndarray:
    """The head mask: the annotated outline (non-zero pixels) with its inside filled."""
    from scipy.ndimage import binary_fill_holes

    outline = annotation > 0
    mask = binary_fill_holes(outline)
    # a closed ellipse encloses far more pixels than its outline; an open one fills nothing
    require(
        int(mask.sum()) >= 2 * int(outline.sum()) > 0,
        f"{where}: the annotated outline is empty or not closed, so it cannot be filled to a "
        "mask; restore the annotation file",
    )
    return mask


def hc18_pairs(root: Path) -> list[tuple[str, str, Path, Path]]:
    """``(sample id, subject, image, annotation)`` of every image, sorted by sample id."""
    folder = root / "training_set" if (root / "training_set").is_dir() else root
    pairs = []
    for image in sorted(folder.glob("*HC.png")):
        match = IMAGE_NAME.match(image.name)
        if match is None:
            continue
        annotation = image.with_name(f"{image.stem}_Annotation.png")
        require(
            annotation.is_file(),
            f"{image} has no annotation {annotation.name}; the HC18 folder is incomplete",
        )
        pairs.append((image.stem, match.group(1), image, annotation))
    require(
        bool(pairs),
        f"no HC18 images (NNN_HC.png with NNN_HC_Annotation.png) in {folder}; set "
        "params.path to the HC18 folder (e.g. ../shared/data/fetal_hc18_sample)",
    )
    return pairs


def prepare_hc18(out_dir: Path, params: dict[str, Any]) -> None:
    """Read, fill, resize and store every HC18 image with its head mask."""
    root = resolve_input_path(params["path"], "hc18 params.path")
    size = image_size(params, "hc18")
    pairs = hc18_pairs(root)
    hashes = hash_files(root, [p for _, _, image, ann in pairs for p in (image, ann)])
    check_sha256sums(root, hashes, "HC18")
    pixels = np.empty((len(pairs), size, size), dtype=np.uint8)
    masks = np.empty((len(pairs), size, size), dtype=np.uint8)
    full_fraction = []
    progress = ItemProgress("hc18: reading", len(pairs), "images")
    for i, (_, _, image_path, annotation_path) in enumerate(pairs):
        image = read_grey(image_path, str(image_path))
        mask = filled_mask(read_grey(annotation_path, str(annotation_path)), str(annotation_path))
        full_fraction.append(float(mask.mean()))
        pixels[i], masks[i] = resize_pair(image, mask, size)
        progress.update()
    progress.close()
    index = pd.DataFrame(
        {
            "sample_id": [p[0] for p in pairs],
            "label": 0,
            "group": [p[1] for p in pairs],
            "source_split": "",
        }
    )
    write_store(
        out_dir,
        dataset="hc18",
        index=index,
        pixels=pixels,
        masks=masks,
        num_classes=2,
        sources=[{"name": name, "sha256": digest} for name, digest in sorted(hashes.items())],
        task="segmentation",
        extra={
            "substitute_for": "FASS (fetal abdominal liver); HC18 fetal head masks instead",
            "subjects": int(index["group"].nunique()),
            "foreground_fraction_full_resolution": round(float(np.mean(full_fraction)), 6),
            "foreground_fraction": round(float(masks.mean()), 6),
        },
    )


register_dataset(
    DatasetSource(
        name="hc18",
        build=prepare_hc18,
        num_classes=2,
        image_shape=(1, DEFAULT_SIZE, DEFAULT_SIZE),
        task="segmentation",
        description="HC18 fetal head ultrasound sample, filled head outlines (FASS substitute)",
        params=Params(
            {
                "path": Param(
                    {"type": "string"},
                    "../shared/data/fetal_hc18_sample",
                    "the HC18 folder (training_set/NNN_HC.png with NNN_HC_Annotation.png)",
                ),
                "size": SIZE_PARAM,
            }
        ),
    )
)
