"""The CheXmask + MIMIC-CXR-JPG source: RLE decoding by hand, the quality filter, a seeded
selection, a fake MIMIC folder of real X-rays (../shared/data/lung_xray_demo), a CheXmask CSV
downloaded from 127.0.0.1, and one clear error for a missing or incomplete MIMIC copy."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.http_server import serve_directory
from helpers.paths import SHARED_DATA
from PIL import Image

from benchlib.data.registry import check_local_copy, get_dataset
from benchlib.data.sources.chexmask import MIMIC_PAGE, decode_rle
from benchlib.data.split import SplitSpec, make_split
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError

DEMO = SHARED_DATA / "lung_xray_demo"
SUBJECTS = ["p10000032", "p10000032", "p10000764", "p11000183"]


def encode_rle(mask: np.ndarray) -> str:
    """CheXmask's RLE: 1-based ``start length`` pairs over the row-major flattened mask."""
    flat = np.concatenate([[0], mask.reshape(-1).astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(flat))
    starts, ends = edges[0::2], edges[1::2]
    return " ".join(f"{s + 1} {e - s}" for s, e in zip(starts, ends, strict=True))


def test_decode_a_hand_made_rle():
    # 3x4 mask; runs: pixels 2-4 (1-based) and 9-10 -> flat indices 1..3 and 8..9
    mask = decode_rle("2 3 9 2", 3, 4)
    expected = np.array([[0, 1, 1, 1], [0, 0, 0, 0], [1, 1, 0, 0]], dtype=bool)
    assert np.array_equal(mask, expected)
    assert not decode_rle("", 2, 2).any()
    with pytest.raises(BenchlibError, match="outside the 3x4 mask"):
        decode_rle("12 2", 3, 4)
    with pytest.raises(BenchlibError, match="odd number"):
        decode_rle("1 2 3", 3, 4)


def test_encoder_round_trip_on_a_real_lung_mask():
    mask = np.asarray(Image.open(DEMO / "1-mask.png")) > 0
    assert np.array_equal(decode_rle(encode_rle(mask), *mask.shape), mask)


def build_mimic(root: Path, present=(0, 1, 2, 3)) -> list[str]:
    """A MIMIC-CXR-JPG layout of the 4 demo X-rays; returns their dicom ids."""
    ids, listing = [], []
    for i in range(4):
        dicom = f"{i:08x}-5f2c0b1e-8d7a6b4c-3e2f1a0d-9c8b7a6{i}"
        subject = SUBJECTS[i]
        relative = f"files/{subject[:3]}/{subject}/s5{i:07d}/{dicom}.jpg"
        listing.append(relative)
        ids.append(dicom)
        if i in present:
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(DEMO / f"{i + 1}.jpg", root / relative)
    (root / "IMAGE_FILENAMES").write_text("\n".join(listing) + "\n")
    return ids


def build_csv(path: Path, ids: list[str]) -> None:
    """CheXmask columns; lungs = the demo mask split at the middle column; 2 low-quality rows."""
    rows = []
    for i, dicom in enumerate(ids):
        mask = np.asarray(Image.open(DEMO / f"{i + 1}-mask.png")) > 0
        right, left = mask.copy(), mask.copy()
        right[:, 256:] = False
        left[:, :256] = False
        heart = np.zeros_like(mask)
        heart[300:400, 200:300] = True
        rows.append(
            {
                "dicom_id": dicom,
                "Dice RCA (Max)": 0.9,
                "Dice RCA (Mean)": 0.8 + 0.01 * i,
                "Landmarks": "[[1, 2], [3, 4]]",
                "Left Lung": encode_rle(left),
                "Right Lung": encode_rle(right),
                "Heart": encode_rle(heart),
                "Height": 512,
                "Width": 512,
            }
        )
    for j in range(2):  # below the 0.7 quality filter, and not in the MIMIC folder
        rows.append(
            {
                "dicom_id": f"ffff{j}",
                "Dice RCA (Max)": 0.7,
                "Dice RCA (Mean)": 0.69,
                "Landmarks": "[]",
                "Left Lung": "1 10",
                "Right Lung": "",
                "Heart": "",
                "Height": 512,
                "Width": 512,
            }
        )
    pd.DataFrame(rows).to_csv(path, index=False)


@pytest.fixture
def mimic(tmp_path):
    root = tmp_path / "mimic-cxr-jpg" / "2.1.0"
    root.mkdir(parents=True)
    ids = build_mimic(root)
    build_csv(tmp_path / "MIMIC-CXR-JPG.csv", ids)
    return root, ids, tmp_path / "MIMIC-CXR-JPG.csv"


def test_prepare_from_a_local_csv_and_a_fake_mimic_copy(mimic, tmp_path):
    root, ids, csv = mimic
    out = tmp_path / "results/data/xray"
    params = {"path": str(root), "chexmask_csv": str(csv), "num_images": 4}
    get_dataset("chexmask_mimic").prepare(out, params)
    store = load_store(out)
    assert store.task == "segmentation" and store.pixels.shape == (4, 64, 64)
    assert list(store.index["sample_id"]) == sorted(ids)  # low-quality rows filtered out
    assert list(store.index["group"]) == [SUBJECTS[ids.index(i)] for i in sorted(ids)]
    for row, dicom in enumerate(store.index["sample_id"]):
        i = ids.index(dicom)
        lungs = Image.fromarray(np.asarray(Image.open(DEMO / f"{i + 1}-mask.png")))
        want = (np.asarray(lungs.resize((64, 64), Image.NEAREST)) > 0).astype(np.uint8)
        assert np.array_equal(store.arrays["masks"][row], want)  # both lungs, heart excluded
        image = Image.open(DEMO / f"{i + 1}.jpg").convert("L").resize((64, 64), Image.BILINEAR)
        assert np.array_equal(store.pixels[row], np.asarray(image))
    table = make_split(
        store,
        SplitSpec.from_config(
            {"clients": 2, "partition": {"name": "iid"}, "split": {"val": 0.0, "test": 0.0}}
        ),
    )
    assert table.groupby("client").size().tolist() == [2, 2]


def test_seeded_selection_and_quality_filter(mimic, tmp_path):
    root, ids, csv = mimic
    chosen = []
    for seed in (0, 0, 1, 2, 3):
        out = tmp_path / f"store{len(chosen)}"
        get_dataset("chexmask_mimic").prepare(
            out, {"path": str(root), "chexmask_csv": str(csv), "num_images": 2, "seed": seed}
        )
        chosen.append(tuple(load_store(out).index["sample_id"]))
    assert chosen[0] == chosen[1] and len(set(chosen)) > 1
    assert all(set(c) <= set(ids) for c in chosen)
    with pytest.raises(BenchlibError, match=r"only 4 images with Dice RCA \(Mean\) >= 0\.7"):
        get_dataset("chexmask_mimic").prepare(
            tmp_path / "s", {"path": str(root), "chexmask_csv": str(csv), "num_images": 5}
        )


def test_download_of_the_csv_from_loopback(mimic, tmp_path):
    root, _, csv = mimic
    www = tmp_path / "www"
    www.mkdir()
    shutil.copy(csv, www / "MIMIC-CXR-JPG.csv")
    digest = hashlib.sha256(csv.read_bytes()).hexdigest()
    out = tmp_path / "work/results/data/xray"
    with serve_directory(www) as (url, requests):
        params = {
            "path": str(root),
            "chexmask_url": f"{url}/MIMIC-CXR-JPG.csv",
            "chexmask_sha256": digest,
            "num_images": 4,
            "retries": 0,
        }
        get_dataset("chexmask_mimic").prepare(out, params)
        wrong = hashlib.sha256(b"x").hexdigest()
        with pytest.raises(BenchlibError, match=f"checksum mismatch .*expected .*{wrong}"):
            get_dataset("chexmask_mimic").prepare(
                tmp_path / "other/results/data/xray", {**params, "chexmask_sha256": wrong}
            )
    assert requests == ["/MIMIC-CXR-JPG.csv"] * 2
    assert (tmp_path / "work/results/downloads/xray/MIMIC-CXR-JPG.csv").is_file()
    assert load_store(out).manifest["sources"] == [
        {"name": f"{url}/MIMIC-CXR-JPG.csv", "sha256": digest}
    ]
    assert not (tmp_path / "other/results/data/xray").exists()
    assert list((tmp_path / "other/results/downloads/xray").glob("*")) == []


def test_missing_or_incomplete_mimic_copy_gives_one_error(mimic, tmp_path):
    root, ids, csv = mimic
    source = get_dataset("chexmask_mimic")
    with pytest.raises(BenchlibError, match=rf"{MIMIC_PAGE}.*datasets\.xray\.params\.path"):
        check_local_copy(source, "xray", {"path": str(tmp_path / "nowhere")})
    (root / "files" / "p10" / "p10000764").rename(tmp_path / "moved")
    with pytest.raises(BenchlibError) as info:
        source.prepare(
            tmp_path / "s", {"path": str(root), "chexmask_csv": str(csv), "num_images": 4}
        )
    message = str(info.value)
    assert f"lacks 1 of the 4 selected images (e.g. {ids[2]})" in message
    assert (
        MIMIC_PAGE in message and "IMAGE_FILENAMES" in message and "files/pXX/p<subject>" in message
    )
    with pytest.raises(BenchlibError, match=r"params\.chexmask_csv .*params\.chexmask_sha256"):
        source.prepare(tmp_path / "s", {"path": str(root)})
    (root / "IMAGE_FILENAMES").unlink()
    with pytest.raises(BenchlibError, match=rf"no IMAGE_FILENAMES.*{MIMIC_PAGE}"):
        source.prepare(tmp_path / "s", {"path": str(root), "chexmask_csv": str(csv)})
    assert not (tmp_path / "s").exists()
