"""``kidney_stones``: FedAgain's kidney-stone datasets, bring your own (paper Sec. 4.2).

Dataset A (Michel Daudon, CCD camera) and B (Jonathan El-Beze, ureteroscope) are private; C
(MyStone) is public on request. Point ``params.path`` at a local folder laid out as

    <path>/<view>/<split>/<class>/<image>.png|jpg     view: SUR, SEC or MIX; split: train, test
    <path>/<view>/<split>/<class>/<image>_mask.png    optional: the stone mask (non-zero = stone)

``params.view`` picks the sub-dataset (SUR, SEC or MIX). MIX is the ``MIX`` folder when there is
one, else SUR and SEC together (the paper: "the MIX subset aggregates both views"). Classes are
the class folder names, sorted (or ``params.classes`` in that order).

Every image is cut into patches by :mod:`benchlib.data.patches` (256 px, <= 20 px overlap, from
the stone region, per-channel whitening; ``patch_size``, ``max_overlap``, ``min_coverage`` and
``whiten`` in params). An image that is already a patch (sides between patch_size - max_overlap
and patch_size: MyStone's published 255 x 255 JPG patches, paper Table 1) is one patch, resized
to patch_size. Every patch keeps its image's split (the source's
train/test: no image contributes to both) and its image id as ``group``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.images import open_image
from benchlib.data.patches import extract_patches
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require

VIEWS = ("SUR", "SEC", "MIX")
SPLITS = ("train", "test")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
MASK_SUFFIX = "_mask"
LAYOUT = "<view>/<train|test>/<class>/<image>.png (SUR, SEC, MIX views; optional <image>_mask.png)"
ACCESS = (
    "the dataset owners (Daudon and El-Beze sets are private; MyStone: Serrat et al. 2017); the "
    f"folder must hold {LAYOUT}"
)


def _view_folders(root: Path, view: str) -> list[Path]:
    require(view in VIEWS, f"kidney_stones: params.view must be one of {VIEWS}, got {view!r}")
    if view == "MIX" and not (root / "MIX").is_dir():
        return [root / "SUR", root / "SEC"]
    return [root / view]


def list_images(root: Path, view: str) -> pd.DataFrame:
    """One row per image: path, mask (or ''), split, class name, image id."""
    rows = []
    for folder in _view_folders(root, view):
        require(
            folder.is_dir(),
            f"kidney_stones: {folder} not found; datasets.<name>.params.path must hold {LAYOUT}",
        )
        for split in SPLITS:
            for class_dir in sorted(p for p in (folder / split).glob("*") if p.is_dir()):
                for image in sorted(class_dir.iterdir()):
                    if image.suffix.lower() not in IMAGE_SUFFIXES:
                        continue
                    if image.stem.endswith(MASK_SUFFIX):
                        continue
                    mask = image.with_name(f"{image.stem}{MASK_SUFFIX}.png")
                    rows.append(
                        {"path": str(image), "mask": str(mask) if mask.is_file() else "",
                         "split": split, "class": class_dir.name,
                         "image": f"{folder.name}/{split}/{class_dir.name}/{image.stem}"}
                    )  # fmt: skip
    table = pd.DataFrame(rows, columns=["path", "mask", "split", "class", "image"])
    require(not table.empty, f"kidney_stones: no images under {root} for view {view}; {LAYOUT}")
    return table


def _read_rgb(path: str) -> np.ndarray:

    with open_image(path) as image:
        return np.asarray(image.convert("RGB"))


def _read_mask(path: str) -> np.ndarray:

    with open_image(path) as image:
        return np.asarray(image.convert("L"))


def prepare_kidney_stones(out_dir: Path, params: dict[str, Any]) -> None:
    root = Path(params["path"]).expanduser()
    view = str(params["view"])
    size = int(params["patch_size"])
    images = list_images(root, view)
    classes = list(params.get("classes") or sorted(images["class"].unique()))  # unset: folders
    unknown = sorted(set(images["class"]) - set(classes))
    require(not unknown, f"kidney_stones: class folders {unknown} are not in params.classes")
    patches, rows = [], []
    for entry in images.itertuples():
        image = _read_rgb(entry.path)
        mask = _read_mask(entry.mask) if entry.mask else None
        cut, corners = extract_patches(
            image,
            mask,
            size=size,
            max_overlap=int(params["max_overlap"]),
            min_coverage=float(params["min_coverage"]),
            whitened=bool(params["whiten"]),
        )
        patches.append(cut)
        for top, left in corners:
            rows.append(
                {"sample_id": f"{entry.image}@{top},{left}", "label": classes.index(entry[4]),
                 "group": entry.image, "source_split": entry.split}
            )  # fmt: skip
    index = pd.DataFrame(rows, columns=["sample_id", "label", "group", "source_split"])
    require(
        not index.empty,
        f"kidney_stones: no {size} px patch with enough stone in {root} ({view}); lower "
        "params.min_coverage or params.patch_size",
    )
    counts = index.groupby("source_split").size().to_dict()
    write_store(
        out_dir,
        dataset="kidney_stones",
        index=index,
        pixels=np.concatenate(patches),
        num_classes=len(classes),
        sources=[{"name": str(root), "sha256": ""}],
        extra={
            "view": view,
            "classes": classes,
            "images": len(images),
            "patches": {k: int(v) for k, v in sorted(counts.items())},
            "patch_size": size,
        },
    )


register_dataset(
    DatasetSource(
        name="kidney_stones",
        build=prepare_kidney_stones,
        num_classes=6,
        image_shape=(3, 256, 256),
        description="FedAgain kidney-stone patches (SUR/SEC/MIX), bring your own",
        params=Params(
            {
                # unset until the user has the data: a missing copy stops the prepare step
                "path": Param({"type": "string"}, description=f"your local copy: {LAYOUT}"),
                "view": Param(
                    {"enum": list(VIEWS)}, "MIX", "sub-dataset (MIX: the MIX folder or SUR + SEC)"
                ),
                "classes": Param(
                    {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                    description="class folder names in label order (default: the folders, sorted)",
                ),
                "patch_size": Param({"type": "integer", "minimum": 1}, 256, "patch side (px)"),
                "max_overlap": Param(
                    {"type": "integer", "minimum": 0}, 20, "most px two patches may overlap"
                ),
                "min_coverage": Param(
                    {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                    0.9,
                    "least fraction of a patch inside the stone mask",
                ),
                "whiten": Param({"type": "boolean"}, True, "per-channel whitening of each patch"),
            }
        ),
        access_page=ACCESS,
    )
)
