"""Issue 24 items 10 and 12: held-out clients scored on all of their rows, and the scores of
the pooled predictions per scope (metrics.json ``pooled``), read by tfl_table's ``pooling``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.task_stores import groups_split, regression_store, task_cell_spec

from benchlib.fl.engine import run_cell
from benchlib.primitives.errors import BenchlibError
from benchlib.report.base import get_kind
from benchlib.report.kinds.tfl.runs import cell_value


def _cell(tmp_path: Path, name: str, **training) -> dict:
    store = regression_store(tmp_path / "store", n=150, groups=5)
    split = groups_split(store, tmp_path / "split.csv", clients=5)
    spec = task_cell_spec("regression", "fedavg", clients=5, held_out=[3, 4])
    spec["training"].update(rounds=1, **training)
    metrics = run_cell(spec, store, split, tmp_path / f"{name}.json", tmp_path / f"ck_{name}")
    assert metrics is not None
    return metrics


def _weighted(entries: list[dict], size: str) -> float:
    total = sum(e[size] for e in entries)
    return sum(e["test_mse"] * e[size] for e in entries) / total


def test_held_out_clients_are_scored_on_all_of_their_rows(tmp_path):
    metrics = _cell(tmp_path, "all")
    for entry in metrics["held_out_clients"]:
        assert entry["n_scored"] == entry["n_train"] + entry["n_val"] + entry["n_test"] == 30
    assert all("n_scored" not in entry for entry in metrics["clients"])
    only_test = _cell(tmp_path, "test", held_out_rows="test")
    for entry in only_test["held_out_clients"]:
        assert entry["n_scored"] == entry["n_test"] == 6
    # the same model: federation clients score alike, held-out ones on other rows
    assert only_test["clients"] == metrics["clients"]
    assert [e["test_mse"] for e in only_test["held_out_clients"]] != [
        e["test_mse"] for e in metrics["held_out_clients"]
    ]
    with pytest.raises(BenchlibError, match="held_out_rows"):
        _cell(tmp_path / "bad", "bad", held_out_rows="val")


def test_pooled_scores_are_the_scopes_pooled_predictions(tmp_path):
    metrics = _cell(tmp_path, "m")
    pooled = metrics["pooled"]
    assert sorted(pooled) == ["if", "oof"]
    # pooled MSE (one output per row) = the per-client MSEs weighted by their scored rows
    assert pooled["if"]["mse"] == pytest.approx(_weighted(metrics["clients"], "n_test"), 1e-6)
    oof = _weighted(metrics["held_out_clients"], "n_scored")
    assert pooled["oof"]["mse"] == pytest.approx(oof, rel=1e-6)
    assert cell_value(metrics, "oof", "test_mse", "m", "pooled") == pooled["oof"]["mse"]


def _table_metrics(client_aucs: list[float | None], pooled_auc: float | None) -> dict:
    return {
        "clients": [{"client": 0, "test_roc_auc": 0.9}],
        "held_out_clients": [
            {"client": 1 + i, "test_roc_auc": v} for i, v in enumerate(client_aucs)
        ],
        "pooled": {"if": {"roc_auc": 0.9}, "oof": {"roc_auc": pooled_auc}},
    }


def test_tfl_table_pooling_option(tmp_path):
    """Two seeds; OOF clients (0.6, 0.8, one undefined) vs pooled ROC-AUC 0.75 / 0.65."""
    paths = []
    for seed, (aucs, pooled) in enumerate([([0.6, 0.8, None], 0.75), ([0.5, 0.7, None], 0.65)]):
        path = tmp_path / f"seed{seed}" / "metrics.json"
        path.parent.mkdir()
        path.write_text(json.dumps(_table_metrics(aucs, pooled)))
        paths.append(path)
    spec = {
        "name": "t", "metric": "roc_auc", "metric_label": "ROC-AUC", "percent": True,
        "decimals": 1, "centralized": [], "methods": [["fedavg", "FedAvg"]],
        "best_round": False, "transmissions": {}, "columns": "methods", "average": False,
        "rows": [{"label": "OOF", "experiment": "exp", "scope": "oof", "block": ""}],
        "pooling": "pooled", "cells": {"exp/fedavg": [str(p) for p in paths]},
        "title": "T", "caption_note": "", "quoted": {},
    }  # fmt: skip
    kind = get_kind("tfl_table")
    out = tmp_path / "pooled.tex"
    kind.render(spec, paths, [out])
    assert r"OOF & 70.0 $\pm$ 5.0 \\" in out.read_text()  # (75 + 65) / 2
    assert "pooled predictions" in out.read_text()
    kind.render({**spec, "pooling": "clients"}, paths, [out])
    assert r"OOF & 65.0 $\pm$ 5.0 \\" in out.read_text()  # (70 + 60) / 2
    (paths[0]).write_text(json.dumps({k: v for k, v in _table_metrics([0.6], 0.7).items()
                                       if k != "pooled"}))  # fmt: skip
    with pytest.raises(BenchlibError, match="pooling: clients"):
        kind.render(spec, paths, [out])
