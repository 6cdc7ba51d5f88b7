"""Shared steps of the 2-D segmentation sources (HC18, FASS, CheXmask): reading greyscale images,
resizing image/mask pairs (images bilinear, masks nearest neighbour) and checking a folder
against its SHA256SUMS."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.data.images import open_image
from benchlib.declarations.params import Param
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import sha256_file

LOG = logging.getLogger("benchlib")
DEFAULT_SIZE = 64
SIZE_PARAM = Param(
    {"type": "integer", "minimum": 8, "maximum": 1024},
    DEFAULT_SIZE,
    "side length of the square store images and masks (px; resized, aspect not kept)",
)
"""``params.size`` of the segmentation sources that use :func:`image_size`."""


def image_size(params: dict[str, Any], source: str) -> int:
    """The side length of the square store images (``params.size``, declared by
    :data:`SIZE_PARAM`)."""
    size = params["size"]
    require(
        isinstance(size, int) and 8 <= size <= 1024,
        f"{source} params.size must be an integer side length in 8..1024, got {size!r}",
    )
    return int(size)


def read_grey(source: Path | bytes, where: str) -> np.ndarray:
    """A greyscale uint8 ``[H, W]`` array from an image file (or its bytes)."""
    from PIL import UnidentifiedImageError

    try:
        with open_image(source, where) as image:
            return np.asarray(image.convert("L"), dtype=np.uint8)
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise BenchlibError(
            f"{where} is not a readable image ({exc}); the file is corrupt: restore it"
        ) from exc


def resize_pair(image: np.ndarray, mask: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Image (bilinear) and binary mask (nearest neighbour) resized to ``size`` x ``size``."""
    from PIL import Image

    require(image.shape[:2] == mask.shape[:2], "image and mask differ in size (a source bug)")
    small = Image.fromarray(image).resize((size, size), Image.Resampling.BILINEAR)
    small_mask = Image.fromarray(mask.astype(np.uint8)).resize(
        (size, size), Image.Resampling.NEAREST
    )
    return np.asarray(small, dtype=np.uint8), (np.asarray(small_mask) > 0).astype(np.uint8)


def check_sha256sums(root: Path, hashes: dict[str, str], what: str) -> None:
    """Every file ``root/SHA256SUMS`` lists must exist, and those in ``hashes`` (relative path ->
    sha256) must match; a folder without SHA256SUMS is not checked."""
    sums = root / "SHA256SUMS"
    if not sums.is_file():
        return
    for line in sums.read_text().splitlines():
        expected, _, name = line.strip().partition("  ")
        name = name.lstrip("*").removeprefix("./")
        require(
            not name or (root / name).is_file(),
            f"{root / name} is listed in {sums} but missing; the {what} folder is incomplete: "
            "restore it",
        )
        if name in hashes:
            require(
                hashes[name] == expected.lower(),
                f"{root / name} does not match {sums} (expected sha256 {expected}, got "
                f"{hashes[name]}); the {what} folder is damaged: restore it",
            )


def hash_files(root: Path, paths: list[Path]) -> dict[str, str]:
    """Relative path (posix) -> sha256 of each file."""
    return {path.relative_to(root).as_posix(): sha256_file(path) for path in paths}
