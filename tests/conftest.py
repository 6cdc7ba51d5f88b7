"""Shared fixtures: a prepared mnist5k store, its split, and tiny cell specs.

The whole suite computes with portable (AVX2) CPU kernels whatever the host, so stored numbers match
on AVX2 and AVX-512 machines alike: the caps are set here, before anything imports torch or numpy,
and inherited by every subprocess (tests/primitives/test_cpu_kernels.py checks they took effect).
"""

from __future__ import annotations

from benchlib.primitives import (
    cpu_kernels,  # torch-free; must come before any torch or numpy import
)

if not cpu_kernels.apply("portable"):
    raise RuntimeError(
        "torch or numpy was imported before tests/conftest.py could cap the CPU kernels; "
        "run pytest from the repository root without plugins that import them"
    )

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml

from benchlib.configuration.config import Cell, load_config

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = REPO / ".venv" / "bin"

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------------
# Scheduling under `make test` (pytest-xdist, --dist loadfile --no-loadscope-reorder). A session
# fixture is built once per worker process, so the modules that read one of the shared workflow
# runs below go to one worker together, which builds the run once for all of them. Every other
# module is a work unit of its own (its fixtures stay in one process). Workers take units in
# collection order: the heavy ones are put first, and the many short unit-test modules fill the
# gaps at the end. tests/test_scheduling.py checks SHARED_RUN_MODULES against the fixtures' users.
SHARED_RUN_MODULES = {
    "tests/workflow/test_workflow_smoke.py": "smoke_run",
    "tests/report/test_report_browser.py": "smoke_run",
    "tests/workflow/test_slurm_workflow.py": "ops_reference_run",
    "tests/workflow/test_resume.py": "ops_reference_run",
    "tests/workflow/test_resource_benchmarks.py": "ops_reference_run",
    "tests/commands/test_status.py": "ops_reference_run",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadfile, with the modules of one shared run in one work unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedRunScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return SHARED_RUN_MODULES.get(module, module)

    return SharedRunScheduling(config, log)


def _unit_rank(items: list[pytest.Item]) -> int:
    """0: reads a shared run; 1: runs Snakemake or SLURM; 2: other slow tests; 3: the rest."""
    if items[0].nodeid.split("::")[0] in SHARED_RUN_MODULES:
        return 0
    marks = {mark.name for item in items for mark in item.iter_markers()}
    if marks & {"workflow", "slurm"}:
        return 1
    return 2 if "slow" in marks else 3


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # only on xdist workers: a plain run keeps its order
        return
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        units.setdefault(SHARED_RUN_MODULES.get(module, module), []).append(item)
    ordered = sorted(units.values(), key=_unit_rank)  # stable: collection order within a rank
    items[:] = [item for unit in ordered for item in unit]


def tool_env() -> dict[str, str]:
    """Environment for subprocesses: the project's venv first on PATH, CPU device."""
    env = dict(os.environ)
    if VENV_BIN.is_dir():
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["BENCHLIB_DEVICE"] = "cpu"
    return env


def benchlib_exe() -> str:
    found = shutil.which("benchlib", path=tool_env()["PATH"])
    assert found, "the benchlib console script is not installed (pip install -e .)"
    return found


@pytest.fixture(scope="session")
def smoke_config():
    return load_config(REPO / "config" / "smoke.yaml")


@pytest.fixture(scope="session")
def mnist_store(tmp_path_factory) -> Path:
    """The real mnist5k store, prepared once per test session."""
    from benchlib.data.registry import get_dataset

    out = tmp_path_factory.mktemp("store") / "mnist5k"
    get_dataset("mnist5k").prepare(out, {})
    return out


@pytest.fixture(scope="session")
def smoke_split(mnist_store, smoke_config, tmp_path_factory) -> Path:
    """The smoke config's split of mnist5k (4 clients, iid)."""
    from benchlib.data.split import SplitSpec, make_split, write_split
    from benchlib.data.store import load_store

    path = tmp_path_factory.mktemp("split") / "mnist5k.csv"
    spec = SplitSpec.from_config(smoke_config.dataset_spec("mnist5k"))
    write_split(make_split(load_store(mnist_store), spec), path)
    return path


@pytest.fixture
def smoke_cell_spec(smoke_config):
    """Factory: the resolved spec of a smoke-config cell, in its JSON form (a dict)."""

    def make(method: str = "lightyear", malfunction: str = "sfa", k: int = 1, seed: int = 0):
        return smoke_config.cell_spec(Cell("smoke", malfunction, method, k, seed)).to_dict()

    return make


def smoke_snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """Snakemake on the smoke grid in ``workdir`` (2 cores), the catalog's way: a copy of
    .test/ (its config/config.yaml is config/smoke.yaml) as `--directory` for
    workflow/Snakefile, which reads that default config; ``args`` after the directory."""
    shutil.copytree(REPO / ".test", workdir, dirs_exist_ok=True)  # the link's file, copied
    command = ["snakemake", "-s", str(REPO / "workflow" / "Snakefile"), "--directory"]
    command += [str(workdir), "--cores", "2", *args]
    return subprocess.run(command, env=tool_env(), capture_output=True, text=True, timeout=1200)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The whole smoke grid (config/smoke.yaml), run once per session as CI runs a catalog
    workflow's .test/ (:func:`smoke_snakemake`); its working directory."""
    workdir = tmp_path_factory.mktemp("smoke")
    result = smoke_snakemake(workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


@pytest.fixture
def smoke_workdir(tmp_path, mnist_store, smoke_split) -> Path:
    """A working directory laid out as the workflow leaves it before the cells run: ``c.yaml``
    (smoke.yaml with 1 round), the prepared store and the split under ``results/``."""
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["datasets"]["mnist5k"]["training"]["rounds"] = 1
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "results" / "data").mkdir(parents=True)
    (tmp_path / "results" / "data" / "mnist5k").symlink_to(mnist_store)
    (tmp_path / "results" / "splits").mkdir()
    (tmp_path / "results" / "splits" / "mnist5k.csv").symlink_to(smoke_split)
    return tmp_path


# ------------------------------------------------------------------------------------------
# Operational tests (issue #5: SLURM, resume, determinism, bad inputs). Names start with ops_.
OPS_EXPERIMENT = "ops"
OPS_TABLE = f"tables/{OPS_EXPERIMENT}_sfa.tex"


def ops_config(rounds: int = 6) -> dict:
    """A 4-cell grid on smoke.yaml's mnist5k: fedavg + lightyear x (k=0, sfa k=1), one seed."""
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["datasets"]["mnist5k"]["training"]["rounds"] = rounds
    config["methods"] = {m: config["methods"][m] for m in ("fedavg", "lightyear")}
    config["experiments"] = {
        OPS_EXPERIMENT: {
            "dataset": "mnist5k",
            "title": "operational test",
            "methods": ["fedavg", "lightyear"],
            "malfunctions": ["sfa"],
            "k": [0, 1],
            "seeds": [0],
        }
    }
    return config


def ops_write_config(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def ops_cell_dirs(workdir: Path) -> dict[str, Path]:
    """Run directory of each cell of :func:`ops_config`, keyed by its relative path."""
    cells = [("none", "fedavg", 0), ("none", "lightyear", 0), ("sfa", "fedavg", 1)]
    cells.append(("sfa", "lightyear", 1))
    return {
        f"{mal}/{method}/k{k}/seed0": workdir
        / f"results/runs/{OPS_EXPERIMENT}/{mal}/{method}/k{k}/seed0"
        for mal, method, k in cells
    }


def ops_snakemake_argv(workdir: Path, configfile: Path, *args: str) -> list[str]:
    """The snakemake command line for this repo's Snakefile in ``workdir``."""
    return [
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(configfile),
        *args,
    ]


def ops_snakemake(
    workdir: Path,
    configfile: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    """Run snakemake on this repo's Snakefile in ``workdir`` (put targets after ``--``)."""
    return subprocess.run(
        ops_snakemake_argv(workdir, configfile, *args),
        env=env or tool_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=workdir,
    )


def ops_run_args(spec: dict, store: Path, split: Path, out: Path) -> list[str]:
    """Arguments of `benchlib run` for one cell writing into ``out`` (1 thread)."""
    return [
        "run",
        "--spec",
        json.dumps(spec),
        "--store",
        str(store),
        "--split",
        str(split),
        "--out",
        str(out / "metrics.json"),
        "--timing",
        str(out / "timing.json"),
        "--checkpoints",
        str(out / "checkpoints"),
        "--threads",
        "1",
    ]


def ops_benchlib(*args: str, env: dict[str, str] | None = None, timeout: float = 600):
    """Run the benchlib CLI; the completed process (text stdout/stderr)."""
    return subprocess.run(
        [benchlib_exe(), *args],
        env=env or tool_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass(frozen=True)
class OpsRun:
    """A finished workflow run: its directory, config file and wall time."""

    workdir: Path
    configfile: Path
    seconds: float


@pytest.fixture(scope="session")
def ops_reference_run(tmp_path_factory) -> OpsRun:
    """An uninterrupted local run (--cores 2) of :func:`ops_config`, to compare others with."""
    workdir = tmp_path_factory.mktemp("ops_reference")
    configfile = ops_write_config(workdir / "ops.yaml", ops_config())
    started = time.perf_counter()
    result = ops_snakemake(workdir, configfile, "--cores", "2", "--", OPS_TABLE)
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-4000:]
    print(f"\nops workflow with --cores 2: {seconds:.1f} s")
    return OpsRun(workdir, configfile, seconds)
