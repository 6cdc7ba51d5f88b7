"""`benchlib run-cell CONFIG CELL`: one cell of a config by its id, as the workflow would run it."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import benchlib_exe, tool_env

from benchlib.facts.digest import numbers_digest
from benchlib.primitives.cpu_kernels import PORTABLE_ENV, is_x86_64

pytestmark = pytest.mark.slow
CELL = "smoke/sfa/fedavg/k1/seed0"


def run_cell_command(smoke_workdir, *args: str) -> subprocess.CompletedProcess[str]:
    """`benchlib run-cell` as a user starts it: without the kernel caps that the test session
    exports (run-cell must set them itself)."""
    env = {k: v for k, v in tool_env().items() if k not in PORTABLE_ENV}
    return subprocess.run(
        [benchlib_exe(), "run-cell", "c.yaml", *args],
        cwd=smoke_workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_run_cell_writes_where_the_workflow_would_and_matches_benchlib_run(smoke_workdir):
    done = run_cell_command(smoke_workdir, CELL)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((smoke_workdir / f"results/runs/{CELL}/metrics.json").read_text())
    assert metrics["cell"]["method_id"] == "fedavg" and metrics["cell"]["k"] == 1
    assert (smoke_workdir / f"results/runs/{CELL}/timing.json").is_file()
    # the config's portable kernels are in force, as in `benchlib run` (the caps are set before
    # numpy and torch load; only x86-64 has caps to set)
    kernels = metrics["provenance"]["cpu_kernels"]
    assert kernels["setting"] == "portable"
    assert kernels["caps"] == (dict(PORTABLE_ENV) if is_x86_64() else {})
    assert "torch was imported before the caps were set" not in done.stderr

    other = run_cell_command(smoke_workdir, CELL, "--out-dir", "elsewhere")
    assert other.returncode == 0, other.stderr[-3000:]
    again = json.loads((smoke_workdir / "elsewhere" / "metrics.json").read_text())
    assert numbers_digest(again) == numbers_digest(metrics)  # the same cell, the same numbers


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        (
            "smoke/sfa/fedavg/k9/seed0",
            "cell smoke/sfa/fedavg/k9/seed0 is not in the grid of c.yaml",
        ),
        ("nosuch/sfa/fedavg/k1/seed0", "is not in the grid of c.yaml"),
        ("smoke/sfa/fedavg", "is not experiment/malfunction/method/kK/seedS"),
    ],
)
def test_a_cell_outside_the_grid_is_one_clear_error(smoke_workdir, cell, message):
    done = run_cell_command(smoke_workdir, cell)
    assert done.returncode == 2
    assert message in done.stderr.strip().splitlines()[-1]


def test_a_missing_split_names_the_command_that_makes_it(smoke_workdir):
    (smoke_workdir / "results" / "splits" / "mnist5k.csv").unlink()
    done = run_cell_command(smoke_workdir, CELL)
    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert "results/splits/mnist5k.csv is missing" in line
    assert "snakemake --configfile=c.yaml --cores 1 results/splits/mnist5k.csv" in line
    assert not (smoke_workdir / "results" / "runs").exists()
