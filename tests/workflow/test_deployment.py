"""benchlib deployed as Snakemake users deploy a published workflow, and two projects sharing
their finished cells.

`snakedeploy deploy-workflow` runs on a local clone (a git repository made from this working
tree, tagged) into a temporary folder. snakedeploy's local provider writes the module's
`snakefile:` relative to the repository ("workflow/Snakefile"), where a published repository gets
`github(...)`: the test points that one line at the clone, as github(...) points at the
repository, and changes nothing else snakedeploy wrote. The deployment plans its default config
(the demo), then runs the smoke grid to its table, with every output under the deployment.

A second project (the module block written by hand) runs the same grid with a new method, with
BENCHLIB_SHARED_CELLS naming the folder both use: it copies the deployment's FedAvg cells
byte for byte and trains only its new method's cells.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import REPO, tool_env

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

TAG = "v0.0.0-test"
TABLE = "tables/smoke_sfa.tex"
SMOKE_CELLS = ["none/{m}/k0/seed0", "sfa/{m}/k1/seed0", "sfa/{m}/k2/seed0"]
MODULE_LINE = '        "workflow/Snakefile"\n'  # what snakedeploy's local provider writes


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: int = 1200) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv}\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}"
    return done.stdout + done.stderr


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def _clone(root: Path) -> Path:
    """A git repository holding this working tree's files (committed or not, ignored ones
    left out), committed and tagged: what a user clones."""
    clone = root / "benchlib"
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO)
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if not (source.exists() or source.is_symlink()):
            continue  # deleted in the working tree
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, clone / name, follow_symlinks=False)
    _git("init", "-q", cwd=clone)
    _git("add", "-A", cwd=clone)
    _git(
        "-c", "user.name=test", "-c", "user.email=test@example.org", "commit", "-qm", "x", cwd=clone
    )
    _git("tag", TAG, cwd=clone)
    return clone


def _job_counts(output: str) -> dict[str, int]:
    """The job-stats table of a dry run: rule -> count."""
    counts = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    return counts


def _table_rows(tex: str) -> dict[str, str]:
    return {
        line.split("&")[0].strip(): line.strip()
        for line in tex.splitlines()
        if "$\\pm$" in line and line.rstrip().endswith("\\\\")
    }


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> dict:
    """The deployment's dry run and smoke run, then the second project's run."""
    repo_status = _git("status", "--porcelain", "--untracked-files=all", cwd=REPO)
    root = tmp_path_factory.mktemp("deploy")
    clone = _clone(root)
    shared = root / "shared-cells"
    shared.mkdir()
    env = {**tool_env(), "BENCHLIB_SHARED_CELLS": str(shared)}
    snakedeploy = shutil.which("snakedeploy", path=env["PATH"])
    assert snakedeploy, "snakedeploy is missing: pip install -c envs/constraints.txt -e '.[dev]'"

    deployment = root / "my-deployment"
    _run([snakedeploy, "deploy-workflow", str(clone), str(deployment), "--tag", TAG], root, env)
    snakefile = deployment / "workflow" / "Snakefile"
    written = snakefile.read_text()
    assert written.count(MODULE_LINE) == 1, written
    snakefile.write_text(written.replace(MODULE_LINE, f'        "{clone}/workflow/Snakefile"\n'))
    planned = _run(["snakemake", "-n"], deployment, env, timeout=600)
    smoke = ["snakemake", "--cores", "2", "--configfile=config/smoke.yaml"]
    _run([*smoke, "--replace-workflow-config", TABLE], deployment, env)

    second = root / "second-project"
    (second / "config").mkdir(parents=True)
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["methods"] = {"fedavg": {"label": "FedAvg"}, "fedprox": {"label": "FedProx"}}
    config["experiments"]["smoke"]["methods"] = ["fedavg", "fedprox"]
    (second / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    (second / "Snakefile").write_text(
        textwrap.dedent(f"""\
            configfile: "config/config.yaml"


            module benchlib:
                snakefile:
                    "{clone}/workflow/Snakefile"
                config:
                    config


            use rule * from benchlib
            """)
    )
    _run(["snakemake", "--cores", "2", TABLE], second, env)
    return {
        "repo_status": repo_status,
        "clone": clone,
        "shared": shared,
        "deployment": deployment,
        "written": written,
        "planned": planned,
        "second": second,
    }


def test_snakedeploy_finds_the_catalog_layout(projects):
    written = projects["written"]
    assert 'configfile: "config/config.yaml"' in written
    assert "use rule * from benchlib" in written
    deployment = projects["deployment"]
    for copied in ("config/config.yaml", "config/smoke.yaml", "config/README.md"):
        assert (deployment / copied).is_file(), copied
    assert (deployment / "profiles" / "slurm").is_dir()
    # snakedeploy wrote the rest; the test changed only the module's snakefile line
    now = (deployment / "workflow" / "Snakefile").read_text().splitlines()
    before = written.splitlines()
    assert [i for i, (a, b) in enumerate(zip(now, before, strict=True)) if a != b] == [
        before.index(MODULE_LINE.rstrip("\n"))
    ]


def test_the_deployment_plans_its_default_config_the_demo(projects):
    counts = _job_counts(projects["planned"])
    assert counts["run_cell"] == 116 and counts["all"] == 1  # 4 methods x 29 (malfunction, k)


def test_the_smoke_run_writes_under_the_deployment_only(projects):
    deployment = projects["deployment"]
    rows = _table_rows((deployment / TABLE).read_text())
    assert set(rows) == {"Local", "FedAvg", "LIGHTYEAR"}
    for method in ("local", "fedavg", "lightyear"):
        for cell in SMOKE_CELLS:
            assert (
                deployment / "results/runs/smoke" / cell.format(m=method) / "metrics.json"
            ).is_file()
    assert _git("status", "--porcelain", "--untracked-files=all", cwd=projects["clone"]) == ""
    after = _git("status", "--porcelain", "--untracked-files=all", cwd=REPO)
    assert after == projects["repo_status"]  # benchlib's checkout is untouched


def test_the_second_project_reuses_the_fedavg_cells_and_trains_only_its_new_method(projects):
    deployment, second, shared = projects["deployment"], projects["second"], projects["shared"]
    for cell in SMOKE_CELLS:
        first = deployment / "results/runs/smoke" / cell.format(m="fedavg")
        reused = second / "results/runs/smoke" / cell.format(m="fedavg")
        assert (reused / "metrics.json").read_bytes() == (first / "metrics.json").read_bytes()
        timing = json.loads((reused / "timing.json").read_text())
        assert Path(timing["reused_from"]).parent == shared
        assert timing["trained_at"] == str((first / "metrics.json").resolve())
        log = second / "logs/run_cell/smoke" / f"{cell.format(m='fedavg')}.log"
        assert "not trained again" in log.read_text()

        trained = second / "results/runs/smoke" / cell.format(m="fedprox")
        timing = json.loads((trained / "timing.json").read_text())
        assert "reused_from" not in timing
        assert timing["trained_at"] == str((trained / "metrics.json").resolve())
    # the deployment's 9 cells and the second project's 3 new ones, each published once
    assert len([p for p in shared.iterdir() if not p.name.startswith(".")]) == 12
    first_rows = _table_rows((deployment / TABLE).read_text())
    second_rows = _table_rows((second / TABLE).read_text())
    assert second_rows["FedAvg"] == first_rows["FedAvg"]
    assert set(second_rows) == {"FedAvg", "FedProx"}
