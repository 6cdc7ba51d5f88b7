"""ISIC 2019 (Fed-ISIC2019) for real: small files in the genuine formats (the challenge's
ISIC_2019_Training_Input.zip of JPEGs, ground-truth and metadata CSVs, FLamby's split file) are
served from 127.0.0.1, downloaded and prepared; colour constancy is checked against hand-computed
values; a wrong count, a truncated archive and a missing image each stop with one clear error and
leave no store; the local-folder mode reads the real sample in ../shared/data/isic2019_sample."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from helpers.http_server import serve_directory
from PIL import Image

from benchlib.data.colour_constancy import centre_crop_or_pad, shades_of_gray, shorter_side_size
from benchlib.data.registry import get_dataset
from benchlib.data.sources import isic2019
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError

SAMPLE = REPO.parent / "shared" / "data" / "isic2019_sample"
CLASSES = ["MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC", "UNK"]
# (image, target, center, fold); two more archive images have no lesion id (FLamby drops them)
ROWS = [
    ("ISIC_0000001", 0, 0, "train"),
    ("ISIC_0000002", 1, 0, "train"),
    ("ISIC_0000003", 2, 0, "test"),
    ("ISIC_0000004", 3, 1, "train"),
    ("ISIC_0000005", 4, 1, "test"),
    ("ISIC_0000006", 5, 2, "train"),
    ("ISIC_0000007_downsampled", 7, 2, "test"),
]
EXTRA = ["ISIC_0000008", "ISIC_0000009"]
COLOURS = {name: (20 + 25 * i, 200 - 20 * i, 90 + 10 * i) for i, (name, *_) in enumerate(ROWS)}


def jpeg(colour: tuple[int, int, int], size: tuple[int, int] = (48, 36)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def build_release(root: Path, *, drop_image: str = "", labels_rows: int | None = None) -> None:
    """The four files of the release in their real formats under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    names = [r[0] for r in ROWS] + EXTRA
    with zipfile.ZipFile(root / isic2019.IMAGES_ZIP, "w") as archive:
        archive.writestr("ISIC_2019_Training_Input/LICENSE.txt", "CC BY-NC")
        for name in names:
            if name != drop_image:
                colour = COLOURS.get(name, (128, 128, 128))
                archive.writestr(f"ISIC_2019_Training_Input/{name}.jpg", jpeg(colour))
    targets = {r[0]: r[1] for r in ROWS} | {name: 8 for name in EXTRA}
    onehot = pd.DataFrame(
        [[name, *np.eye(9)[targets[name]]] for name in names], columns=["image", *CLASSES]
    )
    onehot.iloc[: labels_rows or len(onehot)].to_csv(root / isic2019.LABELS_CSV, index=False)
    pd.DataFrame(
        {
            "image": names,
            "age_approx": 50,
            "anatom_site_general": "head/neck",
            "lesion_id": [f"BCN_{i:07d}" for i in range(len(ROWS))] + [None] * len(EXTRA),
            "sex": "female",
        }
    ).to_csv(root / isic2019.METADATA_CSV, index=False)
    split = pd.DataFrame(
        [[n, *np.eye(9)[t], t, c, f, f"{f}_{c}"] for n, t, c, f in ROWS],
        columns=isic2019.SPLIT_COLUMNS,
    )
    split.to_csv(root / isic2019.SPLIT_FILE, index=False)


def params_for(url: str, root: Path, downloads: Path) -> dict:
    digest = hashlib.sha256((root / isic2019.SPLIT_FILE).read_bytes()).hexdigest()
    return {
        "download_dir": str(downloads),
        "split_url": f"{url}/{isic2019.SPLIT_FILE}",
        "split_sha256": digest,
        "labels_url": f"{url}/{isic2019.LABELS_CSV}",
        "metadata_url": f"{url}/{isic2019.METADATA_CSV}",
        "images_url": f"{url}/{isic2019.IMAGES_ZIP}",
        "archive_images": len(ROWS) + len(EXTRA),
        "split_rows": len(ROWS),
        "side": 24,
        "store_side": 24,
        "retries": 0,
        "timeout": 20,
    }


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


# ------------------------------------------------------------------------- preprocessing
def test_shades_of_gray_makes_a_uniform_colour_grey_by_hand():
    image = np.zeros((4, 5, 3), dtype=np.uint8)
    image[...] = (60, 120, 240)
    # e = (60, 120, 240), |e| = sqrt(75600); every channel becomes |e| / sqrt(3) = 158.745...
    np.testing.assert_array_equal(shades_of_gray(image), np.full((4, 5, 3), 159, np.uint8))


def test_shades_of_gray_uses_the_sixth_power_mean():
    image = np.zeros((1, 2, 3), dtype=np.uint8)
    image[0, 0] = (64, 32, 32)  # second pixel black: e_c = v_c / 2 ** (1/6)
    e = np.array([64, 32, 32]) / 2 ** (1 / 6)
    gains = np.sqrt((e**2).sum()) / (np.sqrt(3) * e)  # 1.0607 for red, 2.1213 for green/blue
    expected = np.rint(np.array([64, 32, 32]) * gains)
    np.testing.assert_array_equal(shades_of_gray(image)[0, 0], expected)  # 68, 68, 68
    assert (shades_of_gray(image)[0, 1] == 0).all()
    assert (shades_of_gray(np.zeros((2, 2, 3), np.uint8)) == 0).all()  # no division by zero


def test_shorter_side_and_centre_crop_or_pad():
    assert shorter_side_size(600, 450, 224) == (299, 224)
    assert shorter_side_size(450, 600, 224) == (224, 299)
    image = np.arange(5 * 7).reshape(5, 7, 1).astype(np.uint8)
    np.testing.assert_array_equal(centre_crop_or_pad(image, 3)[..., 0], image[1:4, 2:5, 0])
    padded = centre_crop_or_pad(image[:2, :2], 4)[..., 0]
    np.testing.assert_array_equal(padded[1:3, 1:3], image[:2, :2, 0])
    assert padded.sum() == image[:2, :2].sum()


# ------------------------------------------------------------------------- download + prepare
def test_download_and_prepare_from_loopback(tmp_path):
    root = tmp_path / "www"
    build_release(root)
    with serve_directory(root) as (url, requests):
        params = params_for(url, root, tmp_path / "downloads")
        get_dataset("isic2019").prepare(tmp_path / "store", params)
    assert sorted(requests) == sorted(
        f"/{n}"
        for n in (
            isic2019.SPLIT_FILE,
            isic2019.LABELS_CSV,
            isic2019.METADATA_CSV,
            isic2019.IMAGES_ZIP,
        )
    )
    store = load_store(tmp_path / "store")
    index = store.index
    assert index["sample_id"].tolist() == sorted(r[0] for r in ROWS)  # no lesion id: dropped
    truth = {r[0]: r for r in ROWS}
    for row, name in enumerate(index["sample_id"]):
        _, target, center, fold = truth[name]
        assert (index.at[row, "label"], index.at[row, "group"]) == (target, str(center))
        assert index.at[row, "source_split"] == fold
        # a uniform colour is grey after colour constancy: |colour| / sqrt(3) in every channel
        grey = np.sqrt(np.sum(np.square(COLOURS[name]))) / np.sqrt(3)
        assert np.abs(store.pixels[row].astype(float) - grey).max() <= 3
    assert store.pixels.shape == (len(ROWS), 24, 24, 3)
    assert store.manifest["num_classes"] == 8
    sources = {s["name"].rsplit("/", 1)[1]: s["sha256"] for s in store.manifest["sources"]}
    assert (
        sources[isic2019.IMAGES_ZIP]
        == hashlib.sha256((root / isic2019.IMAGES_ZIP).read_bytes()).hexdigest()
    )  # recorded, so a user can pin it


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("count", r"rows of .*GroundTruth.csv: found 8, expected 9"),
        ("truncated", r"not a readable zip archive .* truncated or corrupt: delete it"),
        ("missing", r"lacks split image ISIC_0000005.jpg"),
        ("pinned", r"checksum mismatch .*params\.images_sha256"),
    ],
)
def test_a_damaged_release_gives_one_clear_error_and_no_store(tmp_path, damage, message):
    root = tmp_path / "www"
    build_release(
        root,
        drop_image="ISIC_0000005" if damage == "missing" else "",
        labels_rows=8 if damage == "count" else None,
    )
    if damage == "truncated":
        data = (root / isic2019.IMAGES_ZIP).read_bytes()
        (root / isic2019.IMAGES_ZIP).write_bytes(data[: len(data) // 2])
    with serve_directory(root) as (url, _):
        params = params_for(url, root, tmp_path / "downloads")
        if damage == "pinned":
            params["images_sha256"] = "0" * 64
        with pytest.raises(BenchlibError, match=message):
            get_dataset("isic2019").prepare(tmp_path / "store", params)
    assert not (tmp_path / "store").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".store")] == []


# ------------------------------------------------------------------------- local folder
SAMPLE_PARAMS = {"path": str(SAMPLE), "num_images": 1437, "side": 12, "store_side": 12}


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("isic") / "store"
    get_dataset("isic2019_local").prepare(out, dict(SAMPLE_PARAMS))
    return out


def test_local_folder_reads_the_real_sample(sample_store, tmp_path):
    store = load_store(sample_store)
    params = dict(SAMPLE_PARAMS)
    labels = pd.read_csv(SAMPLE / "labels.csv", dtype={"image": str}).set_index("image")
    index = store.index.set_index("sample_id")
    assert len(index) == 1437 == len(labels)
    assert (index["label"] == labels.loc[index.index, "target"]).all()
    assert (index["group"] == labels.loc[index.index, "center"].astype(str)).all()
    fold = labels.loc[index.index, "fold2"].str.split("_").str[0]
    assert (index["source_split"] == fold).all()
    assert index["group"].value_counts().to_dict() == {"3": 855, "2": 421, "1": 147, "5": 14}
    get_dataset("isic2019_local").prepare(tmp_path / "again", params)  # deterministic
    assert load_store(tmp_path / "again").manifest["files"] == store.manifest["files"]


def test_local_folder_with_a_wrong_count_names_the_setting(tmp_path):
    with pytest.raises(BenchlibError, match=r"found 1437, expected 1400.*params.num_images"):
        get_dataset("isic2019_local").prepare(
            tmp_path / "store", {"path": str(SAMPLE), "num_images": 1400, "side": 8}
        )
    with pytest.raises(BenchlibError, match=r"lacks split image .*params.num_images"):
        get_dataset("isic2019_local").prepare(tmp_path / "store", {"path": str(SAMPLE)})
    assert not (tmp_path / "store").exists()


# ------------------------------------------------------------------------- loss and split
def test_focal_alpha_from_pooled_train_counts_by_hand():
    import math

    import torch

    from benchlib.tasks import get_task
    from benchlib.tasks.classification import inverse_train_frequency

    # FLamby's Fed-ISIC2019 weights are N / n_c of the pooled train (18,597 images)
    split = pd.read_csv(SAMPLE / "flamby_train_test_split.csv")
    train = split.loc[split["fold"] == "train", "target"].to_numpy()
    assert np.round(inverse_train_frequency(train, 8), 4).tolist() == [
        5.5813,
        2.0472,
        7.0204,
        26.1194,
        9.5369,
        101.0707,
        92.5224,
        38.3443,
    ]
    # class 2 absent from the training labels: weight 0, no division by zero
    assert inverse_train_frequency(np.array([0, 0, 0, 1]), 3) == [4 / 3, 4.0, 0.0]
    loss = get_task("classification").build_loss(
        "focal",
        {"gamma": 2.0, "alpha": "inverse_train_frequency"},
        train_labels=np.array([0, 0, 0, 1]),
        num_classes=3,
    )
    logits = torch.tensor([[math.log(3), 0.0, 0.0], [0.0, 0.0, 0.0]])
    # p_t = 0.6 and 1/3: alpha_t (1 - p_t)^2 (-log p_t), averaged over batch and classes (MONAI)
    by_hand = (4 / 3 * 0.4**2 * -math.log(0.6) + 4 * (2 / 3) ** 2 * math.log(3)) / (2 * 3)
    assert loss(logits, torch.tensor([0, 1])).item() == pytest.approx(by_hand, rel=1e-6)
    with pytest.raises(BenchlibError, match="needs the cell's training labels"):
        get_task("classification").build_loss(
            "focal", {"gamma": 2.0, "alpha": "inverse_train_frequency"}
        )


def test_validation_is_a_seeded_share_of_each_centres_train(sample_store):
    from benchlib.data.split import SplitSpec, make_split

    data = load_store(sample_store)
    config = {
        "clients": 4,
        "partition": {"name": "groups"},
        "split": {"mode": "source", "val_from_train": 0.2, "seed": 3},
    }
    table = make_split(data, SplitSpec.from_config(config))
    fold = data.index.set_index("sample_id")["source_split"]
    table["fold"] = fold.loc[table["sample_id"]].to_numpy()
    assert (table.loc[table["subset"] == "test", "fold"] == "test").all()  # test stays whole
    assert (table.loc[table["subset"] == "val", "fold"] == "train").all()
    for _client, rows in table.groupby("client"):
        n_train_source = int((rows["fold"] == "train").sum())
        assert (rows["subset"] == "val").sum() == int(0.2 * n_train_source)
    assert sorted(table["group"].unique()) == ["1", "2", "3", "5"]
    again = make_split(data, SplitSpec.from_config(config))
    assert again["subset"].tolist() == table["subset"].tolist()


def test_evaluation_batches_are_centre_cropped_and_resized_to_the_input_size():
    import torch

    from benchlib.fl.transforms import Transforms

    transforms = Transforms(
        {"input_size": 4, "eval_crop": 6, "train": [{"name": "RandomCrop", "size": 4}]}
    )
    image = torch.full((2, 3, 8, 8), 9.0)
    image[:, :, 1:7, 1:7] = 1.0  # a one-pixel frame of 9s around a 6x6 block of 1s
    # the centre 6x6 crop drops the frame, so the resized 4x4 input is all 1s
    assert torch.equal(transforms.normalize(image), torch.ones(2, 3, 4, 4))
    without_crop = Transforms({"input_size": 4}).normalize(image)
    assert without_crop.shape == (2, 3, 4, 4) and without_crop.max() > 1.5  # the frame leaks in
    crops, _ = transforms.augment(image, torch.zeros(2), seed=0)
    assert crops.shape == (2, 3, 4, 4)
    assert torch.equal(transforms.normalize(crops), crops)  # training crops already fit


@pytest.mark.workflow
@pytest.mark.slow
def test_download_prepare_and_split_through_snakemake(tmp_path):
    import subprocess

    import yaml
    from conftest import tool_env

    root = tmp_path / "www"
    build_release(root)
    with serve_directory(root) as (url, requests):
        params = params_for(url, root, tmp_path / "unused")
        del params["download_dir"]  # the workflow sets it
        config = {
            "datasets": {
                "isic": {
                    "source": "isic2019",
                    "params": params,
                    "clients": 3,
                    "partition": {"name": "groups"},
                    "split": {"mode": "source", "val_from_train": 0.5, "seed": 0},
                    "model": {"name": "efficientnet_b0"},
                    "training": {
                        "optimizer": "adam",
                        "lr": 5e-4,
                        "batch_size": 32,
                        "local_epochs": 1,
                        "rounds": 1,
                    },
                }
            },
            "methods": {"fedavg": {"label": "FedAvg"}},
            "experiments": {
                "isic": {
                    "dataset": "isic",
                    "methods": ["fedavg"],
                    "malfunctions": ["ana"],
                    "k": [0],
                    "seeds": [0],
                }
            },
        }
        (tmp_path / "isic.yaml").write_text(yaml.safe_dump(config))
        command = ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path / "work")]
        command += ["--cores", "1", "results/splits/isic.csv"]
        command += ["--configfile", str(tmp_path / "isic.yaml")]
        env = {**tool_env(), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(requests) == 4  # the four files, each once, by the download_data rule
    split = pd.read_csv(tmp_path / "work/results/splits/isic.csv", dtype={"group": str})
    truth = {name: (str(center), fold) for name, _, center, fold in ROWS}
    assert sorted(split["sample_id"]) == sorted(truth)
    for _, row in split.iterrows():
        center, fold = truth[row["sample_id"]]
        assert row["group"] == center and row["client"] == int(center)
        assert (row["subset"] == "test") == (fold == "test")  # val only from train
    # centre 0 has 2 train images: int(0.5 * 2) = 1 moves to val
    assert split.groupby(["client", "subset"]).size().to_dict()[(0, "val")] == 1
