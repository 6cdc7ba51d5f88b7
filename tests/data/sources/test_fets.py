"""FeTS (TFL Table 3, Figures 5 and 9): the bring-your-own source on a tiny FeTS-format folder
written with nibabel (real .nii.gz volumes and a partitioning CSV), the U-Net, saved predictions,
the qualitative figure and a real two-round Snakemake run of the table and a figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ops_snakemake
from helpers.fets_folder import tiny_config, tumour, write_fets

from benchlib.commands.cli import main
from benchlib.configuration.config import Config
from benchlib.data.registry import get_dataset
from benchlib.data.sources import fets
from benchlib.data.store import load_store
from benchlib.facts.saved_predictions import chosen_positions, decode_array, encode_array
from benchlib.grid.paper_configs import load_paper_config
from benchlib.primitives.errors import BenchlibError


@pytest.fixture(scope="module")
def fets_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fets") / "MICCAI_FeTS2022_TrainingData"
    write_fets(root)
    return root


@pytest.fixture(scope="module")
def fets_store(fets_root, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("store") / "fets"
    get_dataset("fets").prepare(out, {"path": str(fets_root), "size": 16, "min_tumor_pixels": 2})
    return out


# ----------------------------------------------------------------------------- the source
def test_store_slices_clients_and_labels_by_hand(fets_store):
    data = load_store(fets_store)
    index = data.index
    # z = 1, 2, 3 have 25 tumour voxels, z = 4 one (< min_tumor_pixels 2): 3 slices x 8 subjects
    assert len(index) == 24 and data.pixels.shape == (24, 16, 16, 4)
    assert list(index["sample_id"][:3]) == [f"FeTS2022_00000/z00{z}" for z in (1, 2, 3)]
    assert sorted(index["group"].unique()) == ["inst_001", "inst_002", "inst_003", "inst_004"]
    assert (index.groupby("group").size() == 6).all()
    assert data.num_classes == 4 and data.manifest["classes"][3] == "enhancing"
    mask = data.arrays["masks"][0]  # mask[y, x] = class of seg[x, y, z]
    assert (mask[5, 5], mask[6, 6], mask[4, 4], mask[5, 7], mask[7, 5]) == (1, 1, 2, 3, 2)
    assert (mask[0, 0], mask[10, 10], mask[9, 4]) == (0, 0, 0)
    counts = np.bincount(mask.ravel(), minlength=4)
    assert counts.tolist() == [256 - 25, 4, 25 - 4 - 2, 2]
    # flair high where x < 8, t1 where y < 8, t1ce where x + y even, t2 where x >= 8
    pixels = data.pixels[0]
    assert pixels[3, 2].tolist() == [255, 255, 0, 0]  # y = 3, x = 2
    assert pixels[10, 12].tolist() == [0, 0, 255, 255]  # y = 10, x = 12
    assert pixels[0, 0].tolist() == [0, 0, 0, 0]  # outside the brain
    # per institution: one of its two subjects is test; no subject on both sides
    subjects = index["sample_id"].str.split("/").str[0]
    sides = index.groupby(subjects)["source_split"].nunique()
    assert (sides == 1).all()
    tests = index[index["source_split"] == "test"].groupby("group")["sample_id"].size()
    assert tests.tolist() == [3, 3, 3, 3]
    assert len(data.manifest["sources"]) == 8 * 5 + 1


def test_whole_tumour_labels_and_resize(fets_root, tmp_path):
    out = tmp_path / "wt"
    params = {"path": str(fets_root), "size": 8, "labels": "whole_tumor",
              "institutions": [2, "03"], "slice_step": 2}  # fmt: skip
    get_dataset("fets").prepare(out, params)
    data = load_store(out)
    # z = 1, 2, 3, 4 have tumour (min 1 voxel), every 2nd: z = 1, 3; 2 institutions x 2 subjects
    assert list(data.index["sample_id"][:2]) == ["FeTS2022_00002/z001", "FeTS2022_00002/z003"]
    assert len(data.index) == 8 and data.num_classes == 2
    assert set(np.unique(data.arrays["masks"]).tolist()) == {0, 1}  # nearest: no new classes
    assert data.pixels.shape == (8, 8, 8, 4)


def test_scale_intensity_by_hand():
    volume = np.arange(0, 202, dtype=np.float64).reshape(1, 1, -1)  # brain = 1..201
    out = fets.scale_intensity(volume).ravel()
    # percentiles of 1..201: 0.5 % -> 2, 99.5 % -> 200; (101 - 2) / 198 * 255 = 127.5 -> 128
    assert (out[0], out[1], out[2], out[101], out[200], out[201]) == (0, 0, 0, 128, 255, 255)


def test_bad_labels_and_damaged_files_are_named(tmp_path):
    seg = tumour()
    seg[0, 0, 0] = 3
    write_fets(tmp_path / "bad", seg=seg)
    with pytest.raises(BenchlibError, match=r"labels \[3\] are not BraTS labels"):
        get_dataset("fets").prepare(tmp_path / "s", {"path": str(tmp_path / "bad")})
    subjects = write_fets(tmp_path / "broken")
    (tmp_path / "broken" / subjects[1] / f"{subjects[1]}_t1ce.nii.gz").write_bytes(b"\x1f\x8bxx")
    with pytest.raises(BenchlibError, match=r"t1ce\.nii\.gz is not a readable NIfTI file"):
        get_dataset("fets").prepare(tmp_path / "s", {"path": str(tmp_path / "broken")})
    (tmp_path / "broken" / subjects[2] / f"{subjects[2]}_t2.nii.gz").unlink()
    with pytest.raises(BenchlibError, match=f"{subjects[2]}_t2.nii.gz is missing"):
        get_dataset("fets").prepare(tmp_path / "s", {"path": str(tmp_path / "broken")})
    assert not (tmp_path / "s").exists()


def test_missing_data_names_the_registration_page_and_the_layout(tmp_path, capsys):
    config = Config(load_paper_config())
    spec = config.dataset_spec("tfl_fets")
    assert main(["prepare", "--spec", json.dumps(spec), "--out", str(tmp_path / "s")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "datasets.tfl_fets.params.path" in error
    assert "synapse.org" in error and "partitioning_1.csv" in error and "t2,seg}.nii.gz" in error
    (tmp_path / "empty").mkdir()
    spec["params"] = {**spec["params"], "path": str(tmp_path / "empty")}
    assert main(["prepare", "--spec", json.dumps(spec), "--out", str(tmp_path / "s")]) == 2
    error = capsys.readouterr().err
    assert "partitioning_1.csv not found" in error and "<Subject_ID>_{flair" in error
    assert not (tmp_path / "s").exists()


# ------------------------------------------------------------- model, Dice, saved predictions
def test_unet_has_the_paper_widths_and_keeps_the_image_size():
    import torch
    from helpers.builders import build_model

    model = build_model("unet", 4, (4, 32, 32))
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs[:10:2]] == [64, 128, 256, 512, 1024]
    assert model(torch.zeros(2, 4, 32, 32)).shape == (2, 4, 32, 32)
    with pytest.raises(BenchlibError, match="at least 32 x 32 pixels"):
        build_model("unet", 4, (4, 16, 16))


def test_figure_dice_matches_the_task_metric_by_hand():
    import torch

    from benchlib.report.kinds.tfl.segmentation_examples import dice
    from benchlib.tasks.segmentation import mean_dice

    truth = np.zeros((4, 4), dtype=np.uint8)
    truth[0, :2] = 1  # class 1: 2 pixels
    truth[3, 3] = 2  # class 2: 1 pixel; class 3 absent
    pred = np.zeros((4, 4), dtype=np.uint8)
    pred[0, 0] = 1  # class 1: 1 of 2 -> 2 * 1 / 3
    pred[2, 2] = 2  # class 2: miss -> 0; class 3 empty in both -> 1
    expected = (2 / 3 + 0 + 1) / 3
    assert dice(pred, truth, 4) == pytest.approx(expected)
    scores = torch.nn.functional.one_hot(torch.from_numpy(pred).long(), 4).permute(2, 0, 1)
    task = mean_dice(scores[None].float(), torch.from_numpy(truth)[None].long())
    assert task == pytest.approx(expected)


def test_prediction_codec_and_chosen_positions():
    masks = np.random.default_rng(0).integers(0, 4, size=(3, 5, 7)).astype(np.uint8)
    assert np.array_equal(decode_array(json.loads(json.dumps(encode_array(masks)))), masks)
    assert chosen_positions(3, 2) == [0, 2] and chosen_positions(10, 4) == [0, 3, 6, 9]
    assert chosen_positions(2, 5) == [0, 1] and chosen_positions(0, 3) == []
    with pytest.raises(BenchlibError, match="not a saved prediction array"):
        decode_array({"shape": [2], "dtype": "uint8", "zlib_base64": "AAAA"})


# ------------------------------------------------------------------------- whole chain


@pytest.mark.workflow
def test_two_round_chain_table_and_figure(fets_root, tmp_path):
    from benchlib.report.base import get_kind
    from benchlib.report.kinds.tfl.segmentation_examples import build_panels, dice

    config = tmp_path / "fets.yaml"
    config.write_text(yaml.safe_dump(tiny_config(fets_root)))
    result = ops_snakemake(tmp_path, config, "-c1", "tables/fets_table.tex", "figures/fets_fig.pdf")
    assert result.returncode == 0, result.stderr[-3000:]
    data = load_store(tmp_path / "results/data/fets")
    split = pd.read_csv(tmp_path / "results/splits/fets.csv", dtype={"sample_id": str})
    row_of = {s: i for i, s in enumerate(data.index["sample_id"])}
    metrics = {}
    for method in ("fedavg", "tfl"):
        path = tmp_path / f"results/runs/fets/none/{method}/k0/seed0/metrics.json"
        metrics[method] = json.loads(path.read_text())
        saved = metrics[method]["predictions"]
        assert saved["samples_per_client"] == 3 and sorted(saved["clients"]) == ["0", "1", "2", "3"]
        for client, entry in saved["clients"].items():
            test = split[(split["client"] == int(client)) & (split["subset"] == "test")]
            assert entry["rows"] == [row_of[s] for s in test["sample_id"]]  # all 3 test slices
        # the saved class maps are what the engine scored: their Dice is the client's test Dice
        held = saved["clients"]["3"]
        masks = decode_array(held["masks"])
        ours = np.mean([dice(p, data.arrays["masks"][r], 4) for p, r in
                        zip(masks, held["rows"], strict=True)])  # fmt: skip
        assert metrics[method]["held_out_clients"][0]["test_dice"] == pytest.approx(ours)
    text = (tmp_path / "tables/fets_table.tex").read_text()
    oof = [100 * metrics[m]["held_out_clients"][0]["test_dice"] for m in ("fedavg", "tfl")]
    assert f"OOF & {oof[0]:.1f} & {oof[1]:.1f} \\\\" in text and "OOF & 71.45 & 74.29" in text
    # the figure's data: held-out client 3, its 2 saved slices with the most tumour, as saved
    spec = Config(yaml.safe_load(config.read_text())).reports["fets_fig"].spec
    panels = build_panels(spec, data, metrics)
    assert [p.client for p in panels] == [3, 3]
    assert spec["clients"] == [] and spec["per_client"] == 2
    rows = metrics["tfl"]["predictions"]["clients"]["3"]["rows"]
    for panel in panels:
        i = rows.index(panel.row)
        saved = decode_array(metrics["tfl"]["predictions"]["clients"]["3"]["masks"])[i]
        assert np.array_equal(panel.predictions["tfl"], saved)
        assert np.array_equal(panel.truth, data.arrays["masks"][panel.row])
    assert (tmp_path / "figures/fets_fig.png").stat().st_size > 0
    assert get_kind("segmentation_examples").inputs(spec)[0].endswith("fets/manifest.json")


def test_figure_spec_errors(tmp_path):
    import copy

    base = tiny_config(tmp_path)
    config = copy.deepcopy(base)
    config["reports"]["fets_fig"]["clients"] = [0]  # a federation client, not OOF
    with pytest.raises(BenchlibError, match=r"clients \[0\] are not oof clients of fets"):
        Config(config)
    config = copy.deepcopy(base)
    del config["datasets"]["fets"]["training"]["save_predictions"]
    with pytest.raises(BenchlibError, match=r"training\.save_predictions"):
        Config(config)
    spec = Config(copy.deepcopy(base)).reports["fets_fig"].spec
    assert spec["metrics"] == [f"results/runs/fets/none/{m}/k0/seed0/metrics.json"
                               for m in ("fedavg", "tfl")]  # fmt: skip


def test_paper_config_plans_table_3_and_figures():
    config = Config(load_paper_config())
    dataset = config.datasets["tfl_fets"]
    assert (dataset.clients, dataset.held_out) == (23, (18, 19, 20, 21, 22))
    assert dataset["model"]["name"] == "unet"
    training = dataset["training"]
    assert (training["rounds"], training["local_epochs"], training["lr"]) == (20, 2, 0.01)
    assert training["batch_size"] == 64 and training["optimizer"] == "sgd"
    table = config.reports["tfl_table3"]
    assert len(table.inputs) == 6 * 3  # FedAvg, FedProx, DRFA, FedSR, TFL, ERM x 3 seeds
    assert table.spec["quoted"]["OOF"]["tfl"] == 74.29
    fig5, fig9 = config.reports["tfl_fig5"], config.reports["tfl_fig9"]
    assert fig5.inputs[0] == "results/data/tfl_fets/manifest.json" and len(fig5.inputs) == 5
    assert fig5.spec["clients"] == [18, 20, 22] and fig9.spec["per_client"] == 2
