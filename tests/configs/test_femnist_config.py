"""The LIGHTYEAR FEMNIST configs (paper grid, default config, CPU sample), the filtering of
methods that are not implemented, the new config keys, and the tables rendered from a config:
training details (paper Table 1) and the FEMNIST result layout (paper Tables 2-5), both pinned by
golden files."""

from __future__ import annotations

import copy
import logging

import pandas as pd
import pytest
from conftest import REPO
from helpers.builders import build_model
from helpers.paths import GOLDEN

from benchlib import __version__
from benchlib.configuration.config import Config, load_config, load_config_file
from benchlib.grid.paper_configs import load_paper_config
from benchlib.methods.base import method_names
from benchlib.primitives.errors import BenchlibError
from benchlib.report.kinds.common.robustness_table import render_table
from benchlib.report.kinds.lightyear.training_details import (
    format_number,
    render_training_details,
    training_details_spec,
)

PAPER_LIGHTYEAR = REPO / "config" / "paper" / "lightyear.yaml"
PAPER_ORDER = [
    "fedavg",
    "afa",
    "asmr",
    "cfl",
    "ditto",
    "fedprox",
    "krum",
    "balance",
    "scclip",
    "lightyear",
]
PAPER_LABELS = [
    "FedAvg",
    "AFA",
    "ASMR",
    "CFL",
    "Ditto",
    "FedProx",
    "Krum",
    "BALANCE",
    "SCCLIP",
    "LIGHTYEAR",
]


@pytest.fixture(scope="module")
def paper() -> Config:
    return load_config(PAPER_LIGHTYEAR)


def test_paper_grid(paper):
    implemented = [m for m in PAPER_ORDER if m in method_names()]
    experiment = paper.experiments["femnist"]
    # the paper tables run each baseline as the authors' code did (LIGHTYEAR and FedProx as
    # their papers); the *_faithful twin runs every method as its original paper defines it
    assert [paper.methods[m].get("method", m) for m in experiment["methods"]] == implemented
    assert paper.experiments["femnist_faithful"]["methods"] == implemented
    assert paper.methods["krum_authors"]["params"] == {"f": None, "m": 1, "variant": "authors"}
    assert [paper.method_label(m) for m in experiment["methods"]] == [
        label for m, label in zip(PAPER_ORDER, PAPER_LABELS, strict=True) if m in implemented
    ]
    assert experiment["malfunctions"] == ["ana", "sfa", "random", "dynamic"]
    assert experiment["k"] == [1, 2, 3, 4, 5, 6, 7]
    paper_tables = [  # LIGHTYEAR Tables 1-21 (the config has more: figures' own experiments)
        f"{dataset}_{malfunction}"
        for dataset in ("femnist", "camelyon17", "isic19", "ultrasound", "xray")
        for malfunction in ("ana", "sfa", "random", "dynamic")
    ] + ["training_details"]
    tables = paper.table_names()
    assert set(paper_tables) <= set(tables)
    assert tables[:4] == paper_tables[:4]  # FEMNIST's tables first, in the paper's order
    cells = paper.cells("femnist", "ana")
    assert {(c.method, c.k) for c in cells} == {
        (m, k) for m in experiment["methods"] for k in range(1, 8)
    }
    assert paper.method_label("lightyear") == "LIGHTYEAR"
    assert paper.methods["lightyear"].params == {"tau": 0.75, "gamma": 0.95, "variant": "paper"}


def test_paper_dataset_training_and_model(paper):
    ds = paper.datasets["femnist"]
    assert ds["clients"] == 8
    assert ds["partition"] == {"name": "writers", "writers_per_client": 100, "min_size": 1}
    split = {  # the defaults filled in, in the entry and the dataset spec
        "mode": "source",
        "val": 0.0,
        "test": 0.0,
        "seed": 0,
        "val_from_test": "1/3",
        "val_from_train": None,
    }
    assert dict(ds.split) == split
    assert paper.dataset_spec("femnist")["split"] == split
    assert {k: ds["training"][k] for k in paper.raw["datasets"]["femnist"]["training"]} == {
        "optimizer": "adam",
        "lr": 0.001,
        "weight_decay": 0.0001,
        "batch_size": 32,
        "local_epochs": 1,
        "rounds": 12,
        "persist_optimizer": True,
        "loss": "cross_entropy",
    }
    assert ds.malfunction.params["ana"]["scale"] == 120.5
    model = build_model(ds.model.name, 62, (1, 28, 28), ds.model.params)
    assert sum(p.numel() for p in model.parameters()) == 1_690_046  # the authors' CNN
    spec = paper.dataset_spec("femnist")
    assert spec["params"]["download_dir"] == "results/downloads/femnist"
    assert (
        spec["params"]["sha256"]
        == "fe1ed5a502cea3a952eb105920bff8cffb32836b5173cb18a57a32c3606f3ea0"
    )
    assert paper.download_files("femnist") == ["results/downloads/femnist/fed_emnist.tar.bz2"]


def test_default_config_is_the_paper_grid():
    default = load_paper_config(REPO / "config" / "paper")
    assert (
        default["experiments"]["femnist"]
        == load_config_file(PAPER_LIGHTYEAR)["experiments"]["femnist"]
    )


def test_femnist_sample_config():
    raw = load_config_file(REPO / "config" / "femnist_sample.yaml")
    config = Config(raw)
    assert config.table_names() == [
        f"femnist_sample_{m}" for m in ("ana", "sfa", "random", "dynamic")
    ]
    experiment = config.experiments["femnist_sample"]
    assert experiment["k"] == [0, 1, 4, 7]
    assert raw["experiments"]["femnist_sample"]["methods"] == PAPER_ORDER
    assert "not comparable to the paper" in experiment["caption_note"]
    ds = raw["datasets"]["femnist_sample"]
    assert ds["source"] == "femnist_leaf" and ds["partition"] == {"name": "leaf-shards"}
    assert ds["params"] == {"path": "../shared/data/femnist_leaf_sample"}
    assert ds["training"]["rounds"] < 12
    assert {k: v for k, v in ds["training"].items() if k != "rounds"} == {
        k: v
        for k, v in load_config_file(PAPER_LIGHTYEAR)["datasets"]["femnist"]["training"].items()
        if k != "rounds"
    }
    assert config.download_files("femnist_sample") == []
    assert "download_dir" not in config.dataset_spec("femnist_sample")["params"]


# --------------------------------------------------------------------------- method filtering
def small_raw() -> dict:
    raw = load_config_file(REPO / "config" / "femnist_sample.yaml")
    raw["methods"]["future"] = {
        "method": "fedfuture",
        "label": "Future",
        "not_implemented": "no public code",
    }
    raw["experiments"]["femnist_sample"]["methods"] = ["fedavg", "future", "lightyear"]
    return raw


def test_methods_marked_not_implemented_are_left_out_and_listed(caplog):
    with caplog.at_level(logging.WARNING, logger="benchlib"):
        config = Config(small_raw())
    assert config.experiments["femnist_sample"]["methods"] == ["fedavg", "lightyear"]
    assert "future" not in config.methods
    assert config.skipped_methods == {"future": "no public code"}
    assert all(c.method != "future" for c in config.cells("femnist_sample"))
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        "method future (fedfuture) is not implemented: no public code" in m
        and "left out of experiments: femnist_sample" in m
        for m in messages
    )


def test_a_misspelled_method_stops_the_config_with_the_closest_name():
    raw = small_raw()
    raw["methods"]["fedavg"]["method"] = "fedavgg"
    with pytest.raises(BenchlibError) as error:
        Config(raw)
    message = str(error.value)
    assert message.startswith("methods.fedavg: unknown method 'fedavgg' (did you mean 'fedavg'?)")
    assert "no plugins installed" in message and "\n" not in message


def test_not_implemented_on_an_implemented_method_is_an_error():
    raw = small_raw()
    raw["methods"]["fedavg"]["not_implemented"] = "stale mark"
    with pytest.raises(BenchlibError, match="method 'fedavg' is implemented; remove not_impl"):
        Config(raw)


def test_undefined_method_ids_stay_an_error():
    raw = small_raw()
    raw["experiments"]["femnist_sample"]["methods"] = ["fedavg", "typo"]
    with pytest.raises(BenchlibError, match="method 'typo' is not defined under methods"):
        Config(raw)
    raw["experiments"]["femnist_sample"]["methods"] = ["future"]
    with pytest.raises(BenchlibError, match="none of its methods is implemented"):
        Config(raw)


# ------------------------------------------------------------------------------- config keys
@pytest.mark.parametrize(
    "change,message",
    [
        (
            lambda d: d.update(split={"mode": "source"}),
            "split.mode source needs split.val_from_test or split.val_from_train",
        ),
        (
            lambda d: d.update(split={"val": 0.1}),
            "split.mode random needs split.val and split.test",
        ),
        (
            lambda d: d.update(split={"mode": "shards", "val": 0.1, "test": 0.1}),
            "config error at datasets.femnist.split.mode",
        ),
        (
            lambda d: d.update(split={"mode": "source", "val_from_test": "1/3", "val": 0.1}),
            "takes split.val_from_test, not split.val",
        ),
        (lambda d: d["partition"].update(writers_per_client=0), "writers_per_client"),
        (lambda d: d["partition"].pop("writers_per_client"), "writers_per_client must be given"),
        (lambda d: d["partition"].update(alpha=0.5), r"'writers' params: unknown parameter"),
        (lambda d: d["params"].update(download_dir="/tmp/x"), "download_dir is set by benchlib"),
        (lambda d: d["params"].update(url="ftp:/broken"), "fix datasets.femnist.params.url"),
        (lambda d: d["params"].update(sha256="beef"), "fix datasets.femnist.params.sha256"),
        (lambda d: d.update(source="femnist_json"), "unknown dataset source 'femnist_json'"),
    ],
)
def test_bad_dataset_settings_give_clear_errors(change, message):
    raw = load_config_file(PAPER_LIGHTYEAR)
    change(raw["datasets"]["femnist"])
    with pytest.raises(BenchlibError, match=message):
        Config(raw)


# -------------------------------------------------------------------------- training details
def normalised(text: str) -> str:
    return text.replace(f"benchlib {__version__} ", "benchlib VERSION ")


def test_training_details_golden(paper):
    text = render_training_details(paper.reports["training_details"].spec)  # Table 1's columns
    assert normalised(text) == (GOLDEN / "training_details.tex").read_text()
    rows = {line.split(" & ")[0]: line.split(" & ")[1:] for line in text.splitlines()}
    assert rows["Learning Rate"][0] == "1e-3" and rows["Weight Decay"][0] == "1e-4"  # FEMNIST


def test_training_details_columns_follow_the_config():
    raw = copy.deepcopy(load_config_file(PAPER_LIGHTYEAR))
    camelyon = copy.deepcopy(raw["datasets"]["femnist"])
    camelyon["label"] = "Camelyon17"
    camelyon["training"] = {
        "optimizer": "sgd",
        "lr": 0.001,
        "weight_decay": 0.0005,
        "momentum": 0.9,
        "batch_size": 32,
        "local_epochs": 1,
        "rounds": 12,
    }
    raw["datasets"] = {"femnist": raw["datasets"]["femnist"], "camelyon": camelyon}
    femnist = raw["experiments"]["femnist"]
    raw["experiments"] = {"femnist": femnist, "camelyon": {**femnist, "dataset": "camelyon"}}
    raw.pop("reports")
    text = render_training_details(training_details_spec(Config(raw)))
    rows = {
        line.split(" & ")[0]: line.split(" & ")[1:] for line in text.splitlines() if " & " in line
    }
    assert rows["Setting"] == ["FEMNIST", "Camelyon17 \\\\"]
    assert rows["Optimizer"] == ["Adam", "SGD \\\\"]
    assert rows["Weight Decay"] == ["1e-4", "5e-4 \\\\"]
    assert rows["Momentum"] == ["-", "0.9 \\\\"]
    assert rows["Loss Function"] == ["Cross Entropy", "Cross Entropy \\\\"]


@pytest.mark.parametrize(
    "value,text",
    [(0.001, "1e-3"), (0.0005, "5e-4"), (0.0015, "1.5e-3"), (0, "0"), (0.9, "0.9"), (32, "32")],
)
def test_number_format(value, text):
    assert format_number(value) == text


# ------------------------------------------------------------------- result table (Tables 2-5)
def test_femnist_table_layout_golden():
    """Render the ANA table of femnist_sample from a fixed collected CSV (no training)."""
    raw = load_config_file(REPO / "config" / "femnist_sample.yaml")
    experiment = raw["experiments"]["femnist_sample"]
    methods = [(m, raw["methods"][m]["label"]) for m in experiment["methods"]]
    collected = pd.read_csv(GOLDEN / "femnist_sample_collected.csv")
    text = render_table(
        collected,
        "femnist_sample",
        "ana",
        methods,
        experiment["k"],
        f"{experiment['title']} -- ANA",
        raw["datasets"]["femnist_sample"]["clients"],
        experiment["caption_note"],
    )
    assert normalised(text) == (GOLDEN / "femnist_sample_ana.tex").read_text()
    body = [line for line in text.splitlines() if "$\\pm$" in line and " & " in line]
    assert [line.split(" & ")[0] for line in body] == PAPER_LABELS
    assert all(len(line.split(" & ")) == 5 for line in body)  # label + k = 0, 1, 4, 7
    assert "Method & 0 & 1 & 4 & 7 \\\\" in text
    # FedAvg at k = 1: per-client accuracies from the CSV, mean and population std in %
    fedavg = collected[
        (collected.method_id == "fedavg") & (collected.malfunction == "ana") & (collected.k == 1)
    ]
    mean, std = 100 * fedavg.test_accuracy.mean(), 100 * fedavg.test_accuracy.std(ddof=0)
    assert body[0].split(" & ")[2] == f"{mean:.1f} $\\pm$ {std:.1f}"
