"""The HC18 fetal-head source: the real sample is read, outlines filled to plausible masks,
subjects grouped, images resized to 64x64; a damaged folder gives one error."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from helpers.paths import SHARED_DATA
from PIL import Image

from benchlib.data.registry import get_dataset
from benchlib.data.seg_images import read_grey, resize_pair
from benchlib.data.sources.hc18 import filled_mask, hc18_pairs
from benchlib.data.split import SplitSpec, make_split
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError

HC18 = SHARED_DATA / "fetal_hc18_sample"


def ellipse_area_from_moments(mask: np.ndarray) -> float:
    """Area pi*a*b of the ellipse with the mask's second moments (a filled ellipse: its area)."""
    ys, xs = np.nonzero(mask)
    cov = np.cov(np.stack([xs, ys]).astype(np.float64))
    return 4.0 * np.pi * float(np.sqrt(np.linalg.det(cov)))


def test_filled_annotation_is_a_solid_ellipse_of_plausible_size():
    pairs = hc18_pairs(HC18)
    for sample_id in ("000_HC", "010_2HC", "133_4HC"):
        annotation = next(p for p in pairs if p[0] == sample_id)[3]
        outline = read_grey(annotation, str(annotation)) > 0
        mask = filled_mask(read_grey(annotation, str(annotation)), sample_id)
        assert mask.shape == (540, 800) and (mask | outline).sum() == mask.sum()
        # a filled ellipse's pixel count equals pi*a*b from its moments (an outline would not)
        assert mask.sum() == pytest.approx(ellipse_area_from_moments(mask), rel=0.03)
        assert ellipse_area_from_moments(outline) > 3 * outline.sum()
        # fetal heads fill a few to ~40 percent of the frame
        assert 0.02 < mask.mean() < 0.4


def test_open_outline_is_refused():
    annotation = np.zeros((40, 40), dtype=np.uint8)
    annotation[5, 5:30] = 255  # a line, not a closed curve
    with pytest.raises(BenchlibError, match="not closed"):
        filled_mask(annotation, "broken.png")


def test_resize_keeps_masks_binary_and_images_bilinear():
    image = np.tile(np.arange(0, 256, 2, dtype=np.uint8), (128, 1))  # horizontal ramp
    mask = np.zeros((128, 128), dtype=bool)
    mask[32:96, 32:96] = True
    small, small_mask = resize_pair(image, mask, 64)
    assert small.shape == small_mask.shape == (64, 64)
    assert set(np.unique(small_mask)) == {0, 1} and small_mask.sum() == 32 * 32
    assert np.all(np.diff(small[0].astype(int)) > 0)  # the ramp survives, interpolated


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("hc18") / "store"
    get_dataset("hc18").prepare(out, {"path": str(HC18)})  # size: the default 64
    return load_store(out)


def test_store_of_the_real_sample(store):
    assert store.task == "segmentation" and store.num_classes == 2
    assert store.pixels.shape == (202, 64, 64) and store.arrays["masks"].shape == (202, 64, 64)
    masks = store.arrays["masks"]
    assert set(np.unique(masks)) == {0, 1}
    assert (masks.reshape(202, -1).sum(axis=1) > 0).all()  # every image shows a head
    index = store.index.set_index("sample_id")
    assert index.loc["010_2HC", "group"] == index.loc["010_HC", "group"] == "010"
    assert index.loc["011_HC", "group"] == "011"
    assert index.loc["133_4HC", "group"] == index.loc["133_HC", "group"]
    first = np.asarray(
        Image.open(HC18 / "training_set/000_HC.png").convert("L").resize((64, 64), Image.BILINEAR)
    )
    assert np.array_equal(store.pixels[list(index.index).index("000_HC")], first)


def test_five_clients_get_disjoint_seeded_subject_sets(store):
    spec = SplitSpec.from_config(
        {"clients": 5, "partition": {"name": "groups"}, "split": {"val": 0.1, "test": 0.2}}
    )
    table = make_split(store, spec)
    subjects = table.groupby("client")["group"].agg(set)
    assert len(subjects) == 5
    for a in range(5):
        for b in range(a + 1, 5):
            assert not subjects[a] & subjects[b]
    assert table.equals(make_split(store, spec))


def test_damaged_folder_fails_with_one_error(tmp_path):
    copy = tmp_path / "hc18"
    shutil.copytree(HC18, copy)
    (copy / "training_set/005_HC_Annotation.png").write_bytes(b"\x89PNG broken")
    with pytest.raises(BenchlibError, match=r"005_HC_Annotation\.png does not match .*SHA256SUMS"):
        get_dataset("hc18").prepare(tmp_path / "store", {"path": str(copy)})
    assert not (tmp_path / "store").exists()
    shutil.copy(HC18 / "training_set/005_HC_Annotation.png", copy / "training_set")
    (copy / "training_set/007_HC.png").unlink()  # an image gone: SHA256SUMS still lists it
    with pytest.raises(BenchlibError, match=r"007_HC\.png is listed in .*SHA256SUMS but missing"):
        get_dataset("hc18").prepare(tmp_path / "store", {"path": str(copy)})
    (copy / "training_set/005_HC_Annotation.png").unlink()
    (copy / "SHA256SUMS").unlink()  # without the list, the pairs are still checked
    with pytest.raises(BenchlibError, match=r"has no annotation 005_HC_Annotation\.png"):
        get_dataset("hc18").prepare(tmp_path / "store", {"path": str(copy)})
