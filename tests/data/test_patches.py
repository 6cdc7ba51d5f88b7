"""Kidney-stone patches (FedAgain Sec. 4.2.4) on generated images with known masks: patch count,
the 20 px overlap bound, coverage of the stone region, whitening; the bring-your-own importer."""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pytest
from conftest import ops_benchlib
from PIL import Image

from benchlib.data.patches import extract_patches, is_whole_patch, patch_grid, whiten
from benchlib.data.registry import get_dataset
from benchlib.data.store import load_store


def rect_mask(h, w, top, bottom, left, right):
    mask = np.zeros((h, w), np.uint8)
    mask[top:bottom, left:right] = 255
    return mask


def test_full_image_grid_by_hand():
    # 600 x 800, all stone: stride 256 - 20 = 236; tops 0, 236 (472 + 256 > 600);
    # lefts 0, 236, 472 (708 + 256 > 800) -> 6 patches
    corners = patch_grid(np.ones((600, 800)), size=256, max_overlap=20, min_coverage=1.0)
    assert corners == [(0, 0), (0, 236), (0, 472), (236, 0), (236, 236), (236, 472)]


def test_only_patches_inside_the_stone_region():
    # stone = rows 236..492 x cols 236..728: only (236, 236) and (236, 472) lie inside it
    mask = rect_mask(600, 800, 236, 492, 236, 728)
    assert patch_grid(mask, min_coverage=1.0) == [(236, 236), (236, 472)]
    # (236, 0) holds cols 236..256 of stone: 20 / 256 = 7.8 % -> kept only below that share
    assert (236, 0) in patch_grid(mask, min_coverage=0.07)
    assert (236, 0) not in patch_grid(mask, min_coverage=0.08)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_overlap_bound_and_coverage_on_random_masks(seed):
    rng = np.random.default_rng(seed)
    h, w = 900, 1100
    mask = np.zeros((h, w), np.uint8)
    for _ in range(4):  # a few overlapping blobs
        cy, cx, r = rng.integers(200, 700), rng.integers(200, 900), rng.integers(150, 350)
        yy, xx = np.ogrid[:h, :w]
        mask[(yy - cy) ** 2 + (xx - cx) ** 2 <= r * r] = 1
    corners = patch_grid(mask, size=256, max_overlap=20, min_coverage=0.9)
    assert corners  # the blobs are large enough for some patches
    for (t1, l1), (t2, l2) in combinations(corners, 2):
        overlap_h = max(0, 256 - abs(t1 - t2))
        overlap_w = max(0, 256 - abs(l1 - l2))
        assert min(overlap_h, overlap_w) <= 20  # never more than 20 px into a neighbour
    for top, left in corners:
        assert mask[top : top + 256, left : left + 256].mean() >= 0.9
    # completeness: every grid window with >= 90 % stone is kept
    expected = [
        (t, left)
        for t in range(0, h - 255, 236)
        for left in range(0, w - 255, 236)
        if mask[t : t + 256, left : left + 256].mean() >= 0.9
    ]
    assert corners == expected


def test_whitening_per_channel_by_hand():
    patch = np.zeros((4, 4, 3), np.uint8)
    patch[..., 0] = np.array([0, 2] * 8).reshape(4, 4)  # mean 1, std 1 -> z = -1, +1
    patch[..., 1] = 50  # constant: z = 0
    patch[..., 2] = np.array([10, 10, 10, 30] * 4).reshape(4, 4)  # mean 15, std 8.66
    out = whiten(patch)
    assert sorted(set(out[..., 0].ravel().tolist())) == [85, 170]  # 127.5 -+ 42.5
    assert set(out[..., 1].ravel().tolist()) == {128}
    z = (np.array([10, 30]) - 15) / np.sqrt(75)
    assert sorted(set(out[..., 2].ravel().tolist())) == np.rint(127.5 + 42.5 * z).tolist()
    image = np.random.default_rng(0).integers(0, 256, (300, 300, 3), dtype=np.uint8)
    cut, corners = extract_patches(image, None, size=256, whitened=False)
    assert corners == [(0, 0)] and np.array_equal(cut[0], image[:256, :256])


def write_image(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


@pytest.fixture
def kidney(tmp_path):
    rng = np.random.default_rng(3)
    root = tmp_path / "kidney"
    for view in ("SUR", "SEC"):
        for split, n in (("train", 2), ("test", 1)):
            for cls in ("WW", "BRU"):
                for i in range(n):
                    shift = int(rng.integers(0, 200))  # smooth images: quick to encode
                    image = ((np.indices((500, 730, 3)).sum(axis=0) + shift) % 256).astype(np.uint8)
                    write_image(root / view / split / cls / f"img{i}.png", image)
                    if cls == "BRU":  # stone only right of column 236: 4 of the 6 grid patches
                        mask = rect_mask(500, 730, 0, 500, 236, 730)
                        write_image(root / view / split / cls / f"img{i}_mask.png", mask)
    return root


def test_importer_cuts_every_view_and_keeps_splits(kidney, tmp_path):
    source = get_dataset("kidney_stones")
    source.prepare(tmp_path / "sur", {"path": str(kidney), "view": "SUR"})
    store = load_store(tmp_path / "sur")
    # per view: 3 images per class; WW 6 patches each (no mask), BRU 4 each ((0|236) x (236|472))
    assert store.manifest["classes"] == ["BRU", "WW"]
    counts = store.index.groupby("label").size().to_dict()
    assert counts == {0: 3 * 4, 1: 3 * 6}
    assert store.manifest["patches"] == {"test": 10, "train": 20}
    assert store.pixels.shape == (30, 256, 256, 3)
    groups = store.index.groupby("group")["source_split"].nunique()
    assert (groups == 1).all()  # all patches of an image stay in its split
    source.prepare(tmp_path / "mix", {"path": str(kidney), "view": "MIX"})
    assert len(load_store(tmp_path / "mix").index) == 60  # SUR and SEC together


def test_missing_local_copy_is_one_error_naming_the_key(tmp_path):
    spec = {"dataset": "kidney_a_sur", "source": "kidney_stones", "params": {"view": "SUR"}}
    done = ops_benchlib("prepare", "--spec", json.dumps(spec), "--out", str(tmp_path / "s"))
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1
    assert "datasets.kidney_a_sur.params.path" in errors[0]
    assert "<view>/<train|test>/<class>/<image>.png" in errors[0]
    assert not (tmp_path / "s").exists()


def test_mystone_255px_jpg_patches_are_one_patch_each_at_the_default_size(tmp_path):
    # MyStone's published format (paper Table 1): MIX only, 255 x 255 JPG patches; the 256 px
    # grid alone would give no patch and the prepare step would stop
    rng = np.random.default_rng(5)
    root = tmp_path / "mystone"
    for split, n in (("train", 2), ("test", 1)):
        for cls in ("Ia", "IIa", "IIIa"):
            for i in range(n):
                image = rng.integers(40, 220, size=(255, 255, 3), dtype=np.uint8)
                write_image(root / "MIX" / split / cls / f"p{i}.jpg", image)
    get_dataset("kidney_stones").prepare(tmp_path / "c", {"path": str(root), "view": "MIX"})
    store = load_store(tmp_path / "c")
    assert store.pixels.shape == (9, 256, 256, 3)
    assert store.manifest["patches"] == {"test": 3, "train": 6}
    assert store.index["sample_id"].str.endswith("@0,0").all()
    # still whitened per channel: mean ~127.5, std ~42.5 after the 255 -> 256 resize
    pixels = store.pixels.astype(np.float64)
    assert np.abs(pixels.mean(axis=(1, 2)) - 127.5).max() < 1.0
    assert np.abs(pixels.std(axis=(1, 2)) - 42.5).max() < 1.5


def test_whole_patch_rule_and_its_mask_coverage():
    assert is_whole_patch((255, 255, 3)) and is_whole_patch((256, 240))
    assert not is_whole_patch((257, 255)) and not is_whole_patch((235, 256))
    image = np.full((255, 255, 3), 100, np.uint8)
    half = rect_mask(255, 255, 0, 255, 0, 128)  # 50.2 % stone < 0.9
    assert extract_patches(image, half)[0].shape == (0, 256, 256, 3)
    cut, corners = extract_patches(image, None, whitened=False)
    assert corners == [(0, 0)] and cut.shape == (1, 256, 256, 3) and (cut == 100).all()
