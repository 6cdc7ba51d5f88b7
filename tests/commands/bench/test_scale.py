"""The paper-scale benchmark's mechanics on CPU (no timing is asserted)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
import torch

from benchlib.commands.bench.packing import measure_packing
from benchlib.commands.bench.scale import (
    WORKLOADS,
    _spec,
    bench_data,
    check_methods,
    measure_workload,
    project_grids,
)

TINY = dataclasses.replace(
    WORKLOADS["femnist_cnn"],
    model={"name": "femnist_cnn", "params": {"conv1": 4, "conv2": 8, "hidden": 32}},
)


def test_projection_scales_the_fastest_engine_round_to_the_paper_grid():
    measured = {
        "femnist_cnn": {
            "fedavg/bare": 10.0,
            "fedavg/engine sequential": 4.0,
            "fedavg/engine batched": 2.0,
            "lightyear/bare": 12.0,
            "lightyear/engine sequential": 6.0,
            "lightyear/engine batched": 3.0,
        }
    }
    said: list[str] = []
    hours = project_grids(measured, {"femnist_cnn": 1_975}, out=said.append)
    # 19,750 / 1,975 = 10x the measured size; mean(2, 3) s -> 25 s per round;
    # 280 cells x 12 rounds x 25 s = 84,000 s
    assert hours == {"LIGHTYEAR Tables 2-5 (FEMNIST)": pytest.approx(84_000 / 3600)}
    assert any("23.33 h" in line for line in said)


def test_projection_takes_packed_cells_when_they_are_faster():
    measured = {"femnist_cnn": {"fedavg/engine batched": 2.0, "lightyear/engine batched": 3.0}}
    # 2 cells at once: 2.0 s per cell-round < mean(2, 3) = 2.5 s; 4 cells: 2.2 s (slower)
    packed = {"femnist_cnn": {1: 2.6, 2: 2.0, 4: 2.2}}
    said: list[str] = []
    hours = project_grids(measured, {"femnist_cnn": 1_975}, packed, out=said.append)
    # 2.0 s x 10 (paper size) = 20 s; 280 x 12 x 20 s = 67,200 s
    assert hours == {"LIGHTYEAR Tables 2-5 (FEMNIST)": pytest.approx(67_200 / 3600)}
    assert any("(2 cells per device)" in line for line in said)


def test_reduced_precisions_are_projected_apart_from_the_float32_figure():
    measured = {
        "femnist_cnn": {
            "fedavg/engine batched": 2.0,
            "lightyear/engine batched": 3.0,
            "fedavg/engine batched bf16": 1.0,
            "lightyear/engine batched bf16": 2.0,
            "fedavg/engine batched tf32": 1.8,
            "lightyear/engine batched tf32": 4.0,
        }
    }
    said: list[str] = []
    hours = project_grids(measured, {"femnist_cnn": 1_975}, out=said.append)
    grid = "LIGHTYEAR Tables 2-5 (FEMNIST)"
    # float32: mean(2, 3) x 10 = 25 s; bf16: mean(1, 2) x 10 = 15 s; tf32: mean(1.8, 4) x 10
    assert hours == {
        grid: pytest.approx(280 * 12 * 25 / 3600),
        f"{grid} [tf32]": pytest.approx(280 * 12 * 29 / 3600),
        f"{grid} [bf16]": pytest.approx(280 * 12 * 15 / 3600),
    }
    assert any("(training.precision: bf16)" in line for line in said)


def test_packed_cells_run_as_concurrent_processes(tmp_path):
    store, split = bench_data(tmp_path, "pack", 8, 32, 32, TINY.shape, out=lambda _: None)
    said: list[str] = []
    effective = measure_packing(
        lambda method: _spec(TINY, method, "off"),
        store,
        split,
        torch.device("cpu"),
        cells=(1, 2),
        rounds=1,
        out=said.append,
    )
    assert sorted(effective) == [1, 2] and all(value > 0 for value in effective.values())
    assert [line.split(" cell")[0].strip() for line in said] == ["1", "2"]


def test_measure_workload_times_bare_sequential_and_batched_rounds(tmp_path):
    said: list[str] = []
    seconds = measure_workload(TINY, torch.device("cpu"), 32, 1, tmp_path, out=said.append)
    assert sorted(seconds) == sorted(
        f"{method}/{variant}"
        for method in ("fedavg", "lightyear")
        for variant in ("bare", "engine sequential", "engine batched")
    )
    assert all(value > 0 for value in seconds.values())
    assert sum("batched speed-up over sequential" in line for line in said) == 2


def test_measure_workload_also_times_a_reduced_precision_on_the_fastest_path(tmp_path):
    seconds = measure_workload(
        TINY, torch.device("cpu"), 32, 1, tmp_path, out=lambda _: None, precisions=("bf16",)
    )
    assert {"fedavg/engine batched bf16", "lightyear/engine batched bf16"} <= set(seconds)
    assert len(seconds) == 8


def test_every_cataloged_method_runs_two_rounds(tmp_path):
    results = check_methods(torch.device("cpu"), tmp_path, out=lambda _: None)
    assert results and all(result == "ok" for result in results.values()), results


def test_the_scale_benchmark_imports_no_workflow_plotting_or_download_libraries():
    """A GPU machine may lack them (torchmetrics itself imports matplotlib where installed)."""
    code = (
        "import sys, benchlib.commands.bench.scale, benchlib.fl.engine\n"
        "from benchlib.tasks import get_task\n"
        "get_task('classification')\n"
        "heavy = ('snakemake', 'pooch', 'seaborn', 'monai', 'jsonschema')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
