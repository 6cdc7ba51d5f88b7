"""Kidney-stone patch extraction (FedAgain Sec. 4.2.4): square patches from the stone region.

Paper: 256 x 256 patches are cut from the expert-segmented stone regions, adjacent patches
overlapping by at most 20 px, and every patch is whitened per colour channel (Eq. 12:
(P - mu_c) / sigma_c). What the paper leaves open, decided here:

- placement: a regular grid with stride ``size - max_overlap`` (236 px), starting at the top-left
  corner, so horizontally or vertically adjacent patches overlap by exactly ``max_overlap`` and
  no two patches overlap by more;
- "from the stone region": a grid patch is kept when at least ``min_coverage`` (default 0.9) of
  its pixels are stone in the mask; without a mask the whole image is stone;
- whitening statistics: per patch (it is meant to remove illumination differences between
  patches); the store keeps uint8 images, so the whitened values z are stored as
  ``clip(round(127.5 + 42.5 z), 0, 255)`` (+-3 sigma over the uint8 range) and the dataset's
  ``transforms.normalize`` (ImageNet statistics, paper Sec. 4.2.5) applies on top as usual.
  ``whiten: false`` keeps the raw pixels;
- images that are already patches: an image no larger than ``size`` whose shorter side is at
  least ``size - max_overlap`` (MyStone's published patches are 255 x 255 JPGs, paper Table 1)
  is one patch, resized to ``size`` (bilinear) when smaller, kept when its whole mask has
  ``min_coverage``; the 256 px grid would give it no patch at all.
"""

from __future__ import annotations

import numpy as np

from benchlib.primitives.errors import require

WHITE_CENTRE = 127.5
WHITE_SCALE = 42.5  # 3 sigma -> 127.5


def patch_grid(
    mask: np.ndarray, size: int = 256, max_overlap: int = 20, min_coverage: float = 0.9
) -> list[tuple[int, int]]:
    """(top, left) of every grid patch whose stone share (mask != 0) is >= ``min_coverage``."""
    require(size >= 1 and 0 <= max_overlap < size, "patches need size >= 1, 0 <= overlap < size")
    require(0.0 < min_coverage <= 1.0, f"min_coverage must be in (0, 1], got {min_coverage}")
    h, w = mask.shape[:2]
    stride = size - max_overlap
    stone = (mask != 0).astype(np.int64)
    # integral image: the stone count of any window in O(1)
    integral = np.zeros((h + 1, w + 1), dtype=np.int64)
    integral[1:, 1:] = stone.cumsum(0).cumsum(1)
    needed = min_coverage * size * size
    kept = []
    for top in range(0, h - size + 1, stride):
        for left in range(0, w - size + 1, stride):
            b, r = top + size, left + size
            count = integral[b, r] - integral[top, r] - integral[b, left] + integral[top, left]
            if count >= needed - 1e-9:
                kept.append((top, left))
    return kept


def is_whole_patch(shape: tuple[int, ...], size: int = 256, max_overlap: int = 20) -> bool:
    """Whether an image of ``shape`` is itself one patch (no side above ``size``, none below
    ``size - max_overlap``), e.g. MyStone's 255 px patches for the 256 px default."""
    h, w = shape[:2]
    return max(h, w) <= size and min(h, w) >= size - max_overlap


def _resized(image: np.ndarray, size: int) -> np.ndarray:
    """``image`` [H, W, 3] uint8 bilinearly resized to size x size (unchanged if already)."""
    if image.shape[:2] == (size, size):
        return image
    from PIL import Image

    return np.asarray(Image.fromarray(image).resize((size, size), Image.Resampling.BILINEAR))


def whiten(patch: np.ndarray) -> np.ndarray:
    """Per-channel whitening of one uint8 patch [H, W, C] (Eq. 12), stored back as uint8."""
    x = patch.astype(np.float64)
    mean = x.mean(axis=(0, 1), keepdims=True)
    std = x.std(axis=(0, 1), keepdims=True)
    z = (x - mean) / np.where(std > 0, std, 1.0)
    return np.clip(np.rint(WHITE_CENTRE + WHITE_SCALE * z), 0, 255).astype(np.uint8)


def extract_patches(
    image: np.ndarray,
    mask: np.ndarray | None = None,
    size: int = 256,
    max_overlap: int = 20,
    min_coverage: float = 0.9,
    whitened: bool = True,
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The patches of one RGB image ([N, size, size, 3] uint8) and their (top, left)."""
    require(image.ndim == 3 and image.shape[2] == 3, "patch extraction needs RGB images")
    if mask is None:
        mask = np.ones(image.shape[:2], dtype=np.uint8)
    require(mask.shape[:2] == image.shape[:2], "a mask must have its image's height and width")
    if is_whole_patch(image.shape, size, max_overlap):
        covered = float((mask != 0).mean()) >= min_coverage - 1e-9
        corners = [(0, 0)] if covered else []
        patches = [_resized(image, size)] if covered else []
    else:
        corners = patch_grid(mask, size, max_overlap, min_coverage)
        patches = [image[t : t + size, left : left + size] for t, left in corners]
    if whitened:
        patches = [whiten(p) for p in patches]
    out = np.stack(patches) if patches else np.zeros((0, size, size, 3), np.uint8)
    return out, corners
