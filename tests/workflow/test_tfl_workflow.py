"""TFL reports (IF/OOF table, learned-topology figure) against hand-made metrics.json files, the
default config's TFL targets, and the whole chain on a tiny leave-one-domain-out PACS run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import REPO, ops_snakemake

from benchlib.configuration.config import Config
from benchlib.grid.paper_configs import load_paper_config
from benchlib.primitives.errors import BenchlibError
from benchlib.report.base import get_kind

SAMPLE = REPO.parent / "shared" / "data" / "pacs_sample"


def metrics(clients: list[float], held_out: list[float], summary: dict | None = None) -> dict:
    return {
        "clients": [{"client": i, "test_mse": v} for i, v in enumerate(clients)],
        "held_out_clients": [{"client": 10 + i, "test_mse": v} for i, v in enumerate(held_out)],
        "method_summary": summary or {},
    }


def table_spec(tmp_path: Path, values: dict[str, list[tuple[list, list]]]) -> tuple[dict, list]:
    """A tfl_table spec over method -> per-seed (IF values, OOF values), files written."""
    cells, inputs = {}, []
    for method, seeds in values.items():
        for seed, (clients, held) in enumerate(seeds):
            path = tmp_path / method / f"seed{seed}" / "metrics.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(metrics(clients, held)))
            cells.setdefault(f"exp/{method}", []).append(str(path))
            inputs.append(path)
    spec = {
        "name": "t",
        "metric": "mse",
        "metric_label": "MSE",
        "percent": False,
        "decimals": 3,
        "methods": [[m, m.upper()] for m in values],
        "centralized": [],
        "best_round": False,
        "transmissions": {},
        "rows": [
            {"label": "OOF row", "experiment": "exp", "scope": "oof", "block": "OOF"},
            {"label": "IF row", "experiment": "exp", "scope": "if", "block": "IF"},
        ],
        "columns": "methods",
        "average": False,
        "pooling": "clients",  # these files hold per-client values only
        "cells": cells,
        "title": "T",
        "caption_note": "",
        "quoted": {"OOF row": {"a": 0.5}},
    }
    return spec, inputs


def test_table_values_by_hand(tmp_path):
    # method a: seed means OOF (1+3)/2 = 2 and (2+2)/2 = 2 -> 2.000 +- 0; IF 0.5 and 1.5 -> 1 +- 0.5
    spec, inputs = table_spec(
        tmp_path,
        {"a": [([0.5, 0.5], [1.0, 3.0]), ([1.0, 2.0], [2.0, 2.0])], "b": [([0.1], [0.25])] * 2},
    )
    kind = get_kind("tfl_table")
    out = tmp_path / "t.tex"
    kind.render(spec, inputs, [out])
    text = out.read_text()
    assert r"OOF row & 2.000 $\pm$ 0.000 & 0.250 $\pm$ 0.000 \\" in text
    assert r"IF row & 1.000 $\pm$ 0.500 & 0.100 $\pm$ 0.000 \\" in text
    assert r"OOF row & 0.5 & -- \\" in text and "paper (quoted)" in text
    # methods as rows with the average column
    spec2 = {**spec, "columns": "rows", "average": True, "quoted": {}}
    kind.render(spec2, inputs, [out])
    assert r"A & 2.000 $\pm$ 0.000 & 1.000 $\pm$ 0.500 & 1.500 \\" in out.read_text()


def test_an_oof_row_needs_held_out_clients(tmp_path):
    spec, inputs = table_spec(tmp_path, {"a": [([0.5], [])]})
    with pytest.raises(BenchlibError, match="held_out_clients"):
        get_kind("tfl_table").render(spec, inputs, [tmp_path / "t.tex"])


def test_topology_figure_from_a_summary(tmp_path):
    summary = {
        "federation": [0, 1, 2],
        "lambda": [[0.3, 0.4, 0.3], [0.2, 0.5, 0.3]],
        "topology": [
            {"round": 1, "nodes": [0, 1, 2], "edges": [[0, 1], [1, 2]],
             "prior": [0.2, 0.6, 0.2], "prior_all": [0.2, 0.6, 0.2]},
        ],
    }  # fmt: skip
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(metrics([0.1], [0.2], summary)))
    spec = {"name": "f", "metrics": str(path), "update": -1, "title": "t",
            "node_groups": {"x": [0, 1], "y": [2]}}  # fmt: skip
    outs = [tmp_path / "f.pdf", tmp_path / "f.png"]
    get_kind("tfl_topology_figure").render(spec, [path], outs)
    assert outs[0].read_bytes()[:4] == b"%PDF" and outs[1].read_bytes()[:4] == b"\x89PNG"
    path.write_text(json.dumps(metrics([0.1], [0.2], {"federation": [0, 1, 2]})))
    with pytest.raises(BenchlibError, match="no topology updates"):
        get_kind("tfl_topology_figure").render(spec, [path], outs)


def test_default_config_has_the_tfl_tables():
    config = Config(load_paper_config())  # merged with the other papers: no conflicting ids
    assert {"tfl_table1", "tfl_table4", "tfl_table5"} <= set(config.reports)
    table1 = config.reports["tfl_table1"]
    # 4 held-out domains x 5 methods x 3 seeds
    assert len(table1.inputs) == 60
    assert config.datasets["tfl_pacs__held_out_15_16_17_18_19"]["held_out"] == (15, 16, 17, 18, 19)
    assert len(config.reports["tfl_table5"].inputs) == 4 * 4 * 3
    table9 = config.reports["tfl_table9"]  # OfficeHome: as PACS, ResNet50, batch 64
    assert len(table9.inputs) == 60
    officehome = config.datasets["tfl_officehome__held_out_15_16_17_18_19"]
    assert (officehome["model"]["name"], officehome["training"]["batch_size"]) == ("resnet50", 64)
    for dataset in ("tfl_pacs__held_out_0_1_2_3_4", "tfl_officehome__held_out_0_1_2_3_4"):
        assert config.datasets[dataset]["model"]["params"]["pretrained"] is True  # ImageNet


def test_fedsr_z_dim_per_backbone_and_the_quoted_tables_8_and_9():
    """Issue 24 item 11: FedSR's z_dim is the width its head reads (ResNet18 512, ResNet50
    2048); Table 8 quotes the paper's f = 5 run (58.28); Table 9 quotes the paper's numbers."""
    config = Config(load_paper_config())
    table9 = config.reports["tfl_table9"].spec
    fedsr9 = [m for m, _ in table9["methods"] if m.startswith("fedsr")]
    assert [config.methods[m]["params"]["z_dim"] for m in fedsr9] == [2048]
    assert config.methods["fedsr"]["params"]["z_dim"] == 512  # PACS: ResNet18
    quoted = table9["quoted"]
    assert quoted["A"] == {"fedavg": 24.10, "fedprox": 23.16, "drfa": 25.29, fedsr9[0]: 23.51,
                           "tfl": 26.37}  # fmt: skip
    assert [quoted[d]["tfl"] for d in "CPR"] == [24.47, 43.96, 44.74]
    assert [quoted[d]["fedavg"] for d in "CPR"] == [23.16, 40.19, 43.47]
    table8 = config.reports["tfl_table8"].spec
    f5 = [m for m, label in table8["methods"] if label == "f = 5"]
    assert len(f5) == 1 and config.raw["methods"][f5[0]]["params"] == {"update_every": 5}
    assert table8["quoted"]["A (OOF)"][f5[0]] == 58.28
    assert table8["quoted"]["A (OOF)"]["tfl"] == 59.05


TINY = {
    "datasets": {
        "pacs": {
            "source": "pacs_local",
            "params": {"path": str(SAMPLE), "expected_images": 840, "image_size": 8,
                       "clients_per_domain": 2},
            "clients": 8,
            "partition": {"name": "groups"},
            "split": {"val": 0.1, "test": 0.2, "seed": 0},
            "held_out": [6, 7],
            "model": {"name": "fedavg_cnn", "params": {"channels": [2, 4], "hidden": 8}},
            "training": {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 64,
                         "local_epochs": 1, "rounds": 2},
        }
    },
    "methods": {"fedavg": {"label": "FedAvg"},
                "tfl": {"label": "TFL", "params": {"update_every": 1}}},
    "experiments": {"pacs": {"dataset": "pacs", "methods": ["fedavg", "tfl"],
                             "malfunctions": ["none"], "k": [0], "seeds": [0]}},
    "reports": {
        "tiny_table": {"kind": "tfl_table", "metric": "accuracy", "columns": "rows",
                       "methods": ["fedavg", "tfl"],
                       "rows": [{"label": "S", "experiment": "pacs", "scope": "oof"},
                                {"label": "IF", "experiment": "pacs", "scope": "if"}]},
        "tiny_topology": {"kind": "tfl_topology_figure", "experiment": "pacs", "method": "tfl",
                          "node_groups": {"art": [0, 1], "cartoon": [2, 3], "photo": [4, 5]}},
    },
}  # fmt: skip


@pytest.mark.workflow
def test_tiny_leave_one_domain_out_chain(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    result = ops_snakemake(
        tmp_path, config, "-c1", "tables/tiny_table.tex", "figures/tiny_topology.pdf"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    text = (tmp_path / "tables" / "tiny_table.tex").read_text()
    assert text.count(r"\\") >= 3 and "FedAvg" in text and "TFL" in text
    run = tmp_path / "results/runs/pacs/none/tfl/k0/seed0/metrics.json"
    summary = json.loads(run.read_text())["method_summary"]
    assert summary["federation"] == [0, 1, 2, 3, 4, 5]
    assert [t["round"] for t in summary["topology"]] == [0, 1]
    assert (tmp_path / "figures" / "tiny_topology.png").stat().st_size > 0


def test_eicu_is_bring_your_own_and_orders_west_hospitals_last(tmp_path, capsys):
    import numpy as np
    import pandas as pd

    from benchlib.commands.cli import main
    from benchlib.data.store import load_store

    config = Config(load_paper_config())
    spec = {**config.dataset_spec("tfl_eicu"), "params": {"path": str(tmp_path / "none.csv")}}
    assert main(["prepare", "--spec", json.dumps(spec), "--out", str(tmp_path / "s")]) == 2
    error = capsys.readouterr().err.strip()
    assert "datasets.tfl_eicu.params.path" in error and "physionet.org/content/eicu-crd" in error
    assert not (tmp_path / "s").exists()
    rows = pd.DataFrame(
        {
            "hospitalid": [7, 7, 3, 9, 9, 5],
            "region": ["WEST", "WEST", "SOUTH", "MIDWEST", "MIDWEST", "NORTHEAST"],
            "age": [60.0, 70.0, np.nan, 50.0, 40.0, 80.0],
            "hospital_mortality": [0, 1, 0, 0, 1, 1],
        }
    )
    rows.to_csv(tmp_path / "stays.csv", index=False)
    spec["params"] = {"path": str(tmp_path / "stays.csv")}
    assert main(["prepare", "--spec", json.dumps(spec), "--out", str(tmp_path / "s")]) == 0
    store = load_store(tmp_path / "s")
    groups = sorted(store.index["group"].unique())
    assert groups == ["0MIDWEST_00009", "1NORTHEAST_00005", "2SOUTH_00003", "3WEST_00007"]
    age = np.asarray(store.inputs)[:, 0]
    mean = np.mean([60, 70, 60, 50, 40, 80])  # the missing age becomes the mean (60)
    std = np.std([60, 70, 60, 50, 40, 80])
    np.testing.assert_allclose(age, (np.array([60, 70, 60, 50, 40, 80]) - mean) / std, rtol=1e-6)
