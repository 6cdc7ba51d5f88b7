"""Determinism: the same cell, seed and thread count on CPU gives the same metrics.json bytes;
wall time and host live only in timing.json. The software the numbers depend on (torch version,
device, threads, CPU kernels) travels with them in metrics.json's ``provenance`` block, so that
`benchlib verify` can name it; nothing outside that block names it."""

from __future__ import annotations

import json
import platform

import pytest
from conftest import ops_benchlib, ops_run_args

pytestmark = pytest.mark.slow  # spawns `benchlib run` twice

TIMING_ONLY = ("wall_seconds", "round_seconds", "host", "device", "threads", "torch")


def test_same_cell_twice_gives_identical_metrics_bytes(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    spec = smoke_cell_spec("fedavg", "ana", k=1)  # ANA noise: keyed random draws every round
    spec["training"]["rounds"] = 3
    outputs = []
    for name in ("first", "second"):
        out = tmp_path / name
        result = ops_benchlib(*ops_run_args(spec, mnist_store, smoke_split, out))
        assert result.returncode == 0, result.stderr
        assert " on cpu: " in result.stderr  # the device is logged
        outputs.append(out)
    first, second = ((out / "metrics.json").read_bytes() for out in outputs)
    assert first == second
    metrics = json.loads(first)
    assert len(metrics["history"]["val_accuracy"]) == 3
    assert metrics["malicious_clients"] == [0]
    numbers = json.dumps({k: v for k, v in metrics.items() if k != "provenance"})
    for key in TIMING_ONLY:
        assert f'"{key}"' not in numbers, f"{key} belongs in timing.json or the provenance"
    provenance = metrics["provenance"]
    assert provenance["device"] == "cpu" and provenance["threads"] == 1
    assert not {"wall_seconds", "round_seconds", "host"} & set(provenance)
    assert f'"{platform.node()}"' not in first.decode()  # no host name anywhere in the bytes
    timing = json.loads((outputs[0] / "timing.json").read_text())
    assert set(TIMING_ONLY) <= set(timing)
    assert timing["device"] == "cpu" and timing["threads"] == 1
