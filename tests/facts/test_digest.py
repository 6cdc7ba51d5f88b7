"""Digests of a run's numbers: what they cover, and `benchlib digest` / `benchlib verify`."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import REPO, ops_benchlib

from benchlib.facts.digest import (
    cell_key,
    compare,
    flat_provenance,
    numbers_digest,
    read_digest,
    read_run,
)
from benchlib.primitives.errors import BenchlibError

PROVENANCE = {
    "benchlib": "0.1.0",
    "commit": "a" * 40,
    "dirty": False,
    "python": "3.11.7",
    "torch": "2.14.1",
    "torchvision": "0.29.1",
    "numpy": "2.4.6",
    "cuda": None,
    "cudnn": None,
    "device": "cpu",
    "threads": 1,
    "cpu_kernels": {"setting": "portable", "aten": "AVX2", "onednn": "Intel AVX2", "caps": {}},
}


def metrics(method: str = "fedavg", k: int = 1, accuracy: float = 0.75) -> dict:
    return {
        "cell": {
            "experiment": "demo",
            "dataset": "mnist5k",
            "method_id": method,
            "method": method,
            "malfunction": "sfa",
            "k": k,
            "seed": 0,
        },
        "config": {"training": {"rounds": 2}},
        "config_hash": "h1",
        "clients": [
            {"client": 0, "malicious": True, "n_test": 4, "test_accuracy": 0.5},
            {"client": 1, "malicious": False, "n_test": 4, "test_accuracy": accuracy},
        ],
        "history": {"val_accuracy": [[0.25, 0.5], [0.5, 0.75]], "selections": [[[1], [0]]]},
        "malicious_clients": [0],
        "method_summary": {},
        "provenance": copy.deepcopy(PROVENANCE),
    }


def write_run(root: Path, cells: list[dict]) -> Path:
    for entry in cells:
        folder = root / cell_key(entry)
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps(entry))
    return root


def test_cell_key_names_the_cell_and_its_axes():
    entry = metrics()
    assert cell_key(entry) == "demo/sfa/fedavg/k1/seed0"
    entry["cell"]["axis_corruption_fraction"] = 0.3
    assert cell_key(entry) == "demo/sfa/fedavg/k1/seed0/corruption_fraction=0.3"


def test_digest_covers_the_numbers_and_nothing_else():
    base = numbers_digest(metrics())
    moved = metrics()  # settings, hashes and provenance are not numbers of the run
    moved["config"]["training"]["rounds"] = 3
    moved["config_hash"] = "h2"
    moved["provenance"]["commit"] = "b" * 40
    assert numbers_digest(moved) == base
    for change in (
        lambda m: m["clients"][1].update(test_accuracy=0.7500000000000001),  # last bit
        lambda m: m["history"]["val_accuracy"][0].__setitem__(0, 0.3),
        lambda m: m["history"]["selections"][0].__setitem__(0, [0]),
        lambda m: m.update(malicious_clients=[1]),
        lambda m: m["clients"][0].update(n_test=5),
    ):
        changed = metrics()
        change(changed)
        assert numbers_digest(changed) != base


def test_verify_counts_matches_and_names_differences(tmp_path):
    reference = write_run(tmp_path / "ref", [metrics("fedavg"), metrics("lightyear")])
    digest = tmp_path / "digest.json"
    done = ops_benchlib("digest", str(reference), "--out", str(digest), "--description", "t")
    assert done.returncode == 0, done.stderr
    assert sorted(read_digest(digest)["cells"]) == [
        "demo/sfa/fedavg/k1/seed0",
        "demo/sfa/lightyear/k1/seed0",
    ]

    same = write_run(tmp_path / "same", [metrics("lightyear"), metrics("fedavg")])
    done = ops_benchlib("verify", str(same), "--digest", str(digest))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "2 of 2 cells match the reference numbers"

    other = metrics("lightyear", accuracy=0.8)
    other["provenance"]["torch"] = "2.15.0"
    other["provenance"]["cpu_kernels"]["aten"] = "AVX512"
    ahead = metrics("fedavg", k=2)  # a cell the reference does not have
    differing = write_run(tmp_path / "diff", [other, ahead])
    done = ops_benchlib("verify", str(differing), "--digest", str(digest))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == "0 of 2 cells match the reference numbers (1 differ, 1 not run)"
    assert "  differs: demo/sfa/lightyear/k1/seed0" in lines
    assert "  not run: demo/sfa/fedavg/k1/seed0" in lines
    assert "  1 cells of the run are not in the reference" in lines
    assert "    torch: 2.15.0 vs 2.14.1" in lines
    assert "    cpu_kernels.aten: AVX512 vs AVX2" in lines
    assert not any(line.startswith("    commit") for line in lines)


def test_varying_provenance_is_reported_as_such(tmp_path):
    first, second = metrics("fedavg"), metrics("lightyear", accuracy=0.1)
    second["provenance"]["threads"] = 4
    run = read_run([write_run(tmp_path / "r", [first, second])])
    reference = {"cells": {cell_key(first): "0" * 64}, "provenance": flat_provenance(PROVENANCE)}
    comparison = compare(run, {**reference, "format": 1})
    assert comparison.differing == [cell_key(first)]
    assert comparison.provenance_changes == {}  # the compared cell alone has threads 1

    comparison = compare(run, {"format": 1, "cells": {}, "provenance": {}})
    assert comparison.extra == sorted([cell_key(first), cell_key(second)])


def test_bad_digest_and_results_are_clear_errors(tmp_path):
    with pytest.raises(BenchlibError, match=r"digest file .* not found"):
        read_digest(tmp_path / "none.json")
    (tmp_path / "x.json").write_text('{"cells": {}}')
    with pytest.raises(BenchlibError, match="is not a benchlib digest"):
        read_digest(tmp_path / "x.json")
    with pytest.raises(BenchlibError, match="does not exist"):
        read_run([tmp_path / "missing"])
    done = ops_benchlib("verify", str(tmp_path / "missing"))
    assert done.returncode == 2 and done.stderr.startswith("error: ")


def test_the_demo_reference_digest_covers_every_demo_cell():
    from benchlib.configuration.config import load_config

    config = load_config(REPO / "config" / "demo.yaml")
    expected = {
        f"{c.experiment}/{c.malfunction}/{c.method}/k{c.k}/seed{c.seed}"
        for e in config.experiments
        for c in config.cells(e)
    }
    digest = read_digest(REPO / "config" / "reference" / "demo_digest.json")
    assert set(digest["cells"]) == expected
    assert digest["provenance"]["cpu_kernels.portable"] is True
