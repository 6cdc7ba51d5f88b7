"""PACS: the release zip (DomainBed's ``kfold/<domain>/<class>/`` layout) downloaded from a
loopback server, count checks, checksum mismatch, and the local folder on the real sample."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from helpers.http_server import serve_directory
from PIL import Image

from benchlib.data.registry import get_dataset
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError

SAMPLE = REPO.parent / "shared" / "data" / "pacs_sample"
DOMAINS = ["art_painting", "cartoon", "photo", "sketch"]
CLASSES = ["dog", "elephant", "giraffe", "guitar", "horse", "house", "person"]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def jpeg(colour: tuple[int, int, int], size: int = 20) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def release_zip(path: Path, per_pair: int = 2) -> int:
    """A zip in the release layout: kfold/<domain>/<class>/pic_NNN.jpg (sketches as PNG)."""
    count = 0
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("kfold/", "")
        for d, domain in enumerate(DOMAINS):
            for c, label in enumerate(CLASSES):
                for i in range(per_pair):
                    colour = (40 * d, 30 * c, 100 + 50 * i)
                    if domain == "sketch":
                        buffer = io.BytesIO()
                        Image.new("RGB", (20, 20), colour).save(buffer, format="PNG")
                        archive.writestr(f"kfold/{domain}/{label}/{i + 1}.png", buffer.getvalue())
                    else:
                        archive.writestr(f"kfold/{domain}/{label}/pic_{i:03d}.jpg", jpeg(colour))
                    count += 1
        archive.writestr("__MACOSX/kfold/._x.jpg", b"junk")
    return count


def test_download_over_loopback_counts_and_checksum(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    n = release_zip(www / "PACS.zip")
    digest = hashlib.sha256((www / "PACS.zip").read_bytes()).hexdigest()
    with serve_directory(www) as (url, requests):
        params = {
            "url": f"{url}/PACS.zip",
            "download_dir": str(tmp_path / "dl"),
            "expected_images": n,
            "image_size": 16,
        }
        get_dataset("pacs").prepare(tmp_path / "store", params)
        assert requests == ["/PACS.zip"]
        store = load_store(tmp_path / "store")
        assert len(store.index) == 56 and store.pixels.shape == (56, 16, 16, 3)
        assert store.manifest["classes"] == CLASSES
        assert store.manifest["domain_sizes"] == dict.fromkeys(DOMAINS, 14)
        # 14 images per domain dealt round-robin to 5 clients: 3, 3, 3, 3, 2
        sizes = store.index.groupby("group").size()
        assert sizes["cartoon_0"] == 3 and sizes["cartoon_4"] == 2
        row = list(store.index["sample_id"]).index("photo/giraffe/pic_001")
        assert store.index.at[row, "label"] == CLASSES.index("giraffe")
        # a flat colour survives JPEG and resizing within a few levels
        assert np.abs(store.pixels[row].astype(int) - [80, 60, 150]).max() <= 4

        # a pinned checksum that does not match: one error, no store, no file
        bad = {**params, "sha256": "f" * 64, "download_dir": str(tmp_path / "dl2")}
        with pytest.raises(BenchlibError, match="checksum mismatch"):
            get_dataset("pacs").prepare(tmp_path / "store2", bad)
        assert not (tmp_path / "store2").exists() and not (tmp_path / "dl2" / "PACS.zip").exists()
        # the right pinned checksum is accepted
        ok = {**params, "sha256": digest, "download_dir": str(tmp_path / "dl3")}
        get_dataset("pacs").prepare(tmp_path / "store3", ok)
    # the default count (9,991) rejects the small archive with one clear error
    with pytest.raises(BenchlibError, match=r"images 56 \(expected 9991\)"):
        get_dataset("pacs").prepare(
            tmp_path / "store4", {**params, "expected_images": 9991, "url": "http://127.0.0.1:9/x"}
        )
    assert not (tmp_path / "store4").exists()


def test_a_web_page_instead_of_the_zip_is_reported(tmp_path):
    dl = tmp_path / "dl"
    dl.mkdir()
    (dl / "PACS.zip").write_text("<html>Google Drive - quota exceeded</html>")
    with pytest.raises(BenchlibError, match=r"not a readable zip archive.*pacs_local"):
        get_dataset("pacs").prepare(tmp_path / "store", {"download_dir": str(dl)})


def test_the_real_sample_folder(tmp_path):
    params = {"path": str(SAMPLE), "expected_images": 840, "image_size": 24}
    get_dataset("pacs_local").prepare(tmp_path / "store", params)
    store = load_store(tmp_path / "store")
    assert len(store.index) == 840 and store.index["label"].nunique() == 7
    assert sorted(store.index["group"].unique()) == [f"{d}_{k}" for d in DOMAINS for k in range(5)]
    assert (store.index.groupby("group").size() == 42).all()
    with pytest.raises(BenchlibError, match=r"images 840 \(expected 9991\)"):
        get_dataset("pacs_local").prepare(tmp_path / "s2", {"path": str(SAMPLE)})
    with pytest.raises(BenchlibError, match="not found"):
        get_dataset("pacs_local").prepare(tmp_path / "s3", {"path": str(tmp_path / "none")})


def test_officehome_download_over_loopback(tmp_path):
    """OfficeHome's zip (OfficeHomeDataset_10072016/<domain>/<class>/) through the same reader."""
    www = tmp_path / "www"
    www.mkdir()
    domains = ["Art", "Clipart", "Product", "Real World"]
    with zipfile.ZipFile(www / "OfficeHome.zip", "w") as archive:
        for d, domain in enumerate(domains):
            for c, label in enumerate(["Alarm_Clock", "Backpack", "Batteries"]):
                data = jpeg((60 * d, 80 * c, 90))
                archive.writestr(f"OfficeHomeDataset_10072016/{domain}/{label}/00001.jpg", data)
    with serve_directory(www) as (url, _):
        params = {"url": f"{url}/OfficeHome.zip", "download_dir": str(tmp_path / "dl"),
                  "image_size": 8, "expected_images": 12, "expected_classes": 3}  # fmt: skip
        get_dataset("officehome").prepare(tmp_path / "store", params)
        with pytest.raises(BenchlibError, match=r"classes 3 \(expected 65\)"):
            get_dataset("officehome").prepare(tmp_path / "s2", {**params, "expected_classes": 65})
        bad = {**params, "sha256": "a" * 64, "download_dir": str(tmp_path / "dl2")}
        with pytest.raises(BenchlibError, match="checksum mismatch"):
            get_dataset("officehome").prepare(tmp_path / "s3", bad)
    store = load_store(tmp_path / "store")
    assert store.manifest["domains"] == domains and len(store.index) == 12
    assert not (tmp_path / "s2").exists() and not (tmp_path / "s3").exists()
