"""The Snakemake workflow catalog's layout: workflow/Snakefile with its default config
config/config.yaml (the demo), config/README.md, .snakemake-workflow-catalog.yml and .test/, beside
the top-level Snakefile whose default stays the papers' grids. The smoke run of the suite runs
the catalog's way (tests/conftest.py, smoke_snakemake); snakedeploy: test_deployment.py."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, tool_env

from benchlib.configuration.config import load_config_file

pytestmark = pytest.mark.workflow


def snakemake(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["snakemake", *args], cwd=cwd, env=tool_env(), capture_output=True, text=True, timeout=600
    )


def job_counts(output: str) -> dict[str, int]:
    return {
        line.split()[0]: int(line.split()[1])
        for line in output.splitlines()
        if len(line.split()) == 2 and line.split()[1].isdigit()
    }


def test_the_catalog_files_and_their_defaults():
    assert (REPO / "workflow" / "Snakefile").is_file()
    assert load_config_file(REPO / "config" / "config.yaml") == load_config_file(
        REPO / "config" / "demo.yaml"
    )
    assert load_config_file(REPO / ".test" / "config" / "config.yaml") == load_config_file(
        REPO / "config" / "smoke.yaml"
    )
    assert (REPO / "config" / "README.md").read_text().startswith("# Configuration\n")
    # the top-level Snakefile is an entry only: the workflow is workflow/Snakefile
    top = (REPO / "Snakefile").read_text()
    code = [line for line in top.splitlines() if line.strip() and not line.startswith("#")]
    assert code == ['workflow.include("workflow/Snakefile", overwrite_default_target=True)']


def test_the_catalog_usage_file_names_what_works():
    usage = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert set(usage) == {"mandatory-flags", "software-stack-deployment", "report"}
    assert set(usage["mandatory-flags"]) == {"desc", "flags"}
    assert set(usage["software-stack-deployment"]) == {"conda", "apptainer", "apptainer+conda"}
    flags = shlex.split(usage["mandatory-flags"]["flags"])
    done = snakemake("-s", "workflow/Snakefile", *flags, "-n", "--quiet", "rules")
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_workflow_snakefile_plans_its_default_config_and_the_top_level_the_paper_grids():
    catalog = snakemake("-s", "workflow/Snakefile", "-n")
    assert catalog.returncode == 0, catalog.stderr[-3000:]
    assert job_counts(catalog.stdout)["run_cell"] == 116  # the demo: 4 methods x 29
    paper = snakemake("-n", "tables/femnist_ana.tex")  # the top-level Snakefile
    assert paper.returncode == 0, paper.stderr[-3000:]
    assert job_counts(paper.stdout)["run_cell"] == 70


def test_workflow_snakefile_without_a_default_config_says_so_in_one_line(tmp_path):
    done = snakemake("-s", str(REPO / "workflow" / "Snakefile"), "-d", str(tmp_path), "-n")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: no config: workflow/Snakefile reads config/config.yaml of the working directory "
        f"({tmp_path}), which has none; pass --configfile=FILE, or run the top-level Snakefile "
        "for the papers' grids"
    )
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.iterdir()) or {p.name for p in tmp_path.iterdir()} <= {".snakemake"}


def planned_commands(output: str) -> list[str]:
    """The shell commands of a dry run (-p), without the job numbering."""
    prefix = "Shell command: "
    return sorted(line[len(prefix) :] for line in output.splitlines() if line.startswith(prefix))


@pytest.mark.slow
def test_the_catalog_way_plans_what_the_checkout_way_plans(tmp_path):
    """`--directory .test` with workflow/Snakefile (as CI runs the smoke grid) plans the same
    jobs with the same commands as the top-level Snakefile with --configfile=config/smoke.yaml."""
    shutil.copytree(REPO / ".test", tmp_path / "catalog")
    catalog = snakemake(
        "-s", str(REPO / "workflow" / "Snakefile"), "--directory", str(tmp_path / "catalog"),
        "-n", "-p",
    )  # fmt: skip
    checkout = snakemake(
        "-d", str(tmp_path / "checkout"), f"--configfile={REPO / 'config' / 'smoke.yaml'}",
        "-n", "-p",
    )  # fmt: skip
    assert catalog.returncode == 0 and checkout.returncode == 0, catalog.stderr + checkout.stderr
    commands = planned_commands(catalog.stdout)
    assert len([c for c in commands if c.startswith("benchlib run ")]) == 15
    assert commands == planned_commands(checkout.stdout)
