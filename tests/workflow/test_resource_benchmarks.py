"""Resource facts from Snakemake itself: run_cell and the data-preparation rules write
`benchmark:` files under benchmarks/ (wall time, peak memory, CPU time per job)."""

from __future__ import annotations

import csv

import pytest
from conftest import (
    OPS_EXPERIMENT,
    OPS_TABLE,
    ops_cell_dirs,
    ops_config,
    ops_snakemake,
    ops_write_config,
)

pytestmark = [pytest.mark.slow, pytest.mark.workflow]  # runs snakemake

COLUMNS = {"s", "max_rss", "max_vms", "cpu_time"}


def test_the_plan_names_a_benchmark_file_per_cell_and_per_data_step(tmp_path):
    configfile = ops_write_config(tmp_path / "ops.yaml", ops_config())
    result = ops_snakemake(tmp_path, configfile, "-n", "--", OPS_TABLE, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    planned = {
        line.split(":", 1)[1].strip()
        for line in result.stdout.splitlines()
        if line.strip().startswith("benchmark:")
    }
    cells = {f"benchmarks/run_cell/{OPS_EXPERIMENT}/{name}.tsv" for name in ops_cell_dirs(tmp_path)}
    data = {"benchmarks/prepare_data/mnist5k.tsv", "benchmarks/split_data/mnist5k.tsv"}
    assert planned == cells | data


def test_a_finished_run_has_a_benchmark_row_for_every_cell(ops_reference_run):
    workdir = ops_reference_run.workdir
    names = [f"run_cell/{OPS_EXPERIMENT}/{cell}" for cell in ops_cell_dirs(workdir)]
    for name in [*names, "prepare_data/mnist5k", "split_data/mnist5k"]:
        path = workdir / "benchmarks" / f"{name}.tsv"
        assert path.is_file(), f"{path} is missing"
        rows = list(csv.DictReader(path.read_text().splitlines(), delimiter="\t"))
        assert len(rows) == 1 and set(rows[0]) >= COLUMNS, rows
        assert float(rows[0]["s"]) > 0
    for name in names:  # a training cell loads torch: well over 50 MB resident at its peak
        row = next(csv.DictReader((workdir / f"benchmarks/{name}.tsv").open(), delimiter="\t"))
        assert float(row["max_rss"]) > 50, row
