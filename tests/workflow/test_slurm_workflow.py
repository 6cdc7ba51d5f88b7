"""The SLURM profile (profiles/slurm), from dry runs to a real single-node SLURM cluster.

Dry runs (any machine): cells ask for one GPU with memory and runtime that scale with the dataset;
account and partition come from the command line or the environment; `make slurm-profile` makes
the literal `snakemake --profile slurm` resolve.

Cluster tests (root with slurm-wlm and munge; mandatory when CI=true, where .ci/run installs them):
tests/slurm/cluster.py starts munged, slurmctld and slurmd, the executor plugin submits every
cell as a GPU job, and the results equal a local run's byte for byte. The node's GPUs are fake
(torch sees no CUDA), so cells run with BENCHLIB_DEVICE=cpu, carried into jobs by sbatch
--export=ALL; without it a cell fails loudly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import (
    OPS_TABLE,
    REPO,
    benchlib_exe,
    ops_cell_dirs,
    ops_config,
    ops_snakemake,
    ops_write_config,
    tool_env,
)
from slurm.cluster import GPU_PARTITION, LocalSlurm, start_cluster, stop_cluster, unavailable_reason

pytestmark = pytest.mark.slow  # every test runs snakemake (dry runs included) or make

PROFILE = REPO / "profiles" / "slurm"
CI_PROFILE = REPO / "tests" / "slurm" / "profile"
RULE = re.compile(r"^(?:local)?rule (\w+):$")
PROFILE_ENV = ("BENCHLIB_SLURM_ACCOUNT", "BENCHLIB_SLURM_PARTITION", "BENCHLIB_SLURM_GPU_PARTITION")


def clean_env(**extra: str) -> dict[str, str]:
    """tool_env() without the profile's variables or a SNAKEMAKE_PROFILE, plus ``extra``."""
    env = {k: v for k, v in tool_env().items() if k not in (*PROFILE_ENV, "SNAKEMAKE_PROFILE")}
    return {**env, **extra}


def planned_resources(output: str) -> dict[str, list[dict[str, str]]]:
    """Rule -> the resources of each of its jobs, from a dry run's printout."""
    plan: dict[str, list[dict[str, str]]] = {}
    rule = None
    for line in output.splitlines():
        if match := RULE.match(line.strip()):
            rule = match.group(1)
        elif line.strip().startswith("resources:") and rule:
            pairs = line.strip().removeprefix("resources:").split(", ")
            plan.setdefault(rule, []).append(dict(p.strip().split("=", 1) for p in pairs))
    return plan


def dry_run(workdir: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    configfile = workdir / "ops.yaml"
    if not configfile.exists():
        ops_write_config(configfile, ops_config())
    result = ops_snakemake(
        workdir, configfile, "-n", *args, "--", OPS_TABLE, env=env or clean_env()
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return planned_resources(result.stdout + result.stderr)


def fake_manifest(workdir: Path, samples: int, shape: list[int]) -> None:
    path = workdir / "results" / "data" / "mnist5k" / "manifest.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"num_samples": samples, "image_shape": shape, "num_classes": 10}))


# --------------------------------------------------------------------------- dry runs
def test_cells_ask_for_a_gpu_with_resources_that_scale_with_the_data(tmp_path):
    plans = {}
    for name, samples, shape in (("small", 5000, [28, 28]), ("large", 400_000, [96, 96, 3])):
        workdir = tmp_path / name
        fake_manifest(workdir, samples, shape)
        plans[name] = dry_run(workdir, "--profile", str(PROFILE))
    small, large = (plans[n]["run_cell"] for n in ("small", "large"))
    assert len(small) == 4
    for job in small + large:
        assert job["gpu"] == "1"
        assert "slurm_account" not in job and "slurm_partition" not in job
    # 6 rounds x 1 epoch; 3.92 MB and 11059.2 MB of uint8 pixels (workflow/rules/resources.smk):
    # memory 2 GB + 2x the resident data, capped at the 2 GiB resident limit (larger stores
    # stream), runtime 30 min + 2 min per GB and epoch
    assert (small[0]["mem_mb"], small[0]["runtime"]) == (str(2000 + 8), "31")
    assert (large[0]["mem_mb"], large[0]["runtime"]) == (str(2000 + 4295), str(30 + 133))
    for rule in ("collect_table_results", "render_table"):
        assert "gpu" not in plans["small"][rule][0]


def test_data_rules_do_not_ask_for_a_gpu(tmp_path):
    plan = dry_run(tmp_path, "--profile", str(PROFILE))
    for rule in ("prepare_data", "split_data"):
        assert "gpu" not in plan[rule][0]
    assert plan["run_cell"][0]["mem_mb"] == "<TBD>"  # known once the data is prepared


def test_account_and_partition_from_the_command_line(tmp_path):
    plan = dry_run(
        tmp_path,
        "--profile",
        str(PROFILE),
        "--default-resources",
        "slurm_account=acct_cli",
        "slurm_partition=part_cli",
    )
    for rule in ("prepare_data", "split_data", "run_cell"):
        for job in plan[rule]:
            assert (job["slurm_account"], job["slurm_partition"]) == ("acct_cli", "part_cli")
    assert all(job["gpu"] == "1" for job in plan["run_cell"])  # set-resources kept


def test_account_and_partitions_from_the_environment(tmp_path):
    env = clean_env(BENCHLIB_SLURM_ACCOUNT="acct_env", BENCHLIB_SLURM_GPU_PARTITION="gpu_env")
    plan = dry_run(tmp_path, "--profile", str(PROFILE), env=env)
    for job in plan["run_cell"]:
        assert (job["slurm_account"], job["slurm_partition"], job["gpu"]) == (
            "acct_env",
            "gpu_env",
            "1",
        )
    assert plan["prepare_data"][0]["slurm_account"] == "acct_env"
    assert "slurm_partition" not in plan["prepare_data"][0]
    env = clean_env(BENCHLIB_SLURM_PARTITION="cpu_env")
    plan = dry_run(tmp_path, "--profile", str(PROFILE), env=env)
    assert {job["slurm_partition"] for jobs in plan.values() for job in jobs} == {"cpu_env"}


def test_the_profile_turns_on_the_pinned_plugins_efficiency_report(tmp_path):
    import yaml

    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert profile["slurm-efficiency-report"] is True
    assert profile["slurm-efficiency-report-path"] == "logs/slurm_efficiency"
    helps = subprocess.run(
        ["snakemake", "--help"], env=clean_env(), capture_output=True, text=True, timeout=300
    ).stdout
    for option in ("--slurm-efficiency-report", "--slurm-efficiency-report-path"):
        assert option in helps, f"the installed SLURM plugin has no {option}"
    dry_run(tmp_path, "--profile", str(PROFILE))  # the profile's keys are all accepted


def test_make_slurm_profile_makes_the_literal_profile_name_work(tmp_path):
    xdg = tmp_path / "xdg"
    env = clean_env(XDG_CONFIG_HOME=str(xdg))
    workdir = tmp_path / "work"
    workdir.mkdir()
    configfile = ops_write_config(workdir / "ops.yaml", ops_config())

    def literal() -> subprocess.CompletedProcess[str]:
        return ops_snakemake(
            workdir, configfile, "--profile", "slurm", "-n", "--", OPS_TABLE, env=env
        )

    before = literal()
    assert before.returncode != 0
    assert "profile" in before.stderr.lower()

    def make() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["make", "-s", "-C", str(REPO), "slurm-profile"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    made = make()
    assert made.returncode == 0, made.stderr
    link = xdg / "snakemake" / "slurm"
    assert link.is_symlink() and link.resolve() == PROFILE.resolve()
    after = literal()
    assert after.returncode == 0, after.stderr[-3000:]
    assert all(
        job["gpu"] == "1" for job in planned_resources(after.stdout + after.stderr)["run_cell"]
    )
    assert make().returncode == 0  # idempotent for the same clone

    link.unlink()
    link.mkdir()
    (link / "config.yaml").write_text("executor: local\n")
    refused = make()
    assert refused.returncode != 0
    assert "already exists" in refused.stderr
    assert (link / "config.yaml").read_text() == "executor: local\n"  # not overwritten


# ----------------------------------------------------------------------- real cluster
@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[LocalSlurm]:
    """A running local cluster; skipped without root/packages unless CI=true (then a failure)."""
    on_ci = os.environ.get("CI") == "true"
    reason = unavailable_reason()
    if reason:
        if on_ci:
            pytest.fail(f"CI=true needs the local SLURM cluster, but: {reason}")
        pytest.skip(f"local SLURM cluster unavailable: {reason}")
    try:
        cluster = start_cluster(gpus=2)
    except Exception as exc:  # every failure here is a set-up failure worth reading
        pytest.fail(f"could not start the local SLURM cluster: {exc}")
    try:
        yield cluster
    finally:
        stop_cluster(cluster)
        shutil.rmtree(cluster.root, ignore_errors=True)


def cluster_env(cluster: LocalSlurm, **extra: str) -> dict[str, str]:
    env = clean_env(**extra)
    env["SLURM_CONF"] = cluster.env["SLURM_CONF"]
    env["PATH"] = f"{cluster.root / 'bin'}{os.pathsep}{env['PATH']}"  # the srun shim first
    return env


def slurm_jobs(cluster: LocalSlurm) -> list[dict[str, str]]:
    widths = {
        "JobID": 12,
        "Partition": 16,
        "State": 16,
        "tres-per-job": 40,
        "tres-per-node": 40,
        "Comment": 300,
    }
    fields = tuple(widths)
    spec = ",".join(f"{name}:{width}|" for name, width in widths.items())
    out = cluster.command("squeue", "-t", "all", "-h", "-O", spec)
    return [
        dict(zip(fields, (v.strip() for v in line.split("|")), strict=False))
        for line in out.splitlines()
        if line.strip()
    ]


def ops_table_on_slurm(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Snakemake the ops table in ``tmp_path`` through the SLURM and CI profiles."""
    configfile = ops_write_config(tmp_path / "ops.yaml", ops_config())
    return ops_snakemake(
        tmp_path,
        configfile,
        "--profile",
        str(PROFILE),
        "--profile",
        str(CI_PROFILE),
        "--",
        OPS_TABLE,
        env=env,
        timeout=1200,
    )


@pytest.mark.slurm
@pytest.mark.workflow
def test_workflow_runs_every_cell_as_a_gpu_job_on_slurm(slurm_cluster, ops_reference_run, tmp_path):
    env = cluster_env(slurm_cluster, BENCHLIB_SLURM_GPU_PARTITION=GPU_PARTITION)
    assert env["BENCHLIB_DEVICE"] == "cpu"  # fake GPUs: torch has no CUDA on this node
    started = time.perf_counter()
    result = ops_table_on_slurm(tmp_path, env)
    seconds = time.perf_counter() - started
    print(
        f"\nops workflow on SLURM: {seconds:.1f} s (local --cores 2: "
        f"{ops_reference_run.seconds:.1f} s)"
    )
    assert result.returncode == 0, f"{result.stderr[-4000:]}\n{slurm_cluster.logs()}"

    reference = ops_reference_run.workdir
    assert (tmp_path / OPS_TABLE).read_bytes() == (reference / OPS_TABLE).read_bytes()
    for name, path in ops_cell_dirs(tmp_path).items():
        expected = ops_cell_dirs(reference)[name] / "metrics.json"
        assert (path / "metrics.json").read_bytes() == expected.read_bytes(), name
        assert json.loads((path / "timing.json").read_text())["device"] == "cpu"

    jobs = slurm_jobs(slurm_cluster)
    cells = [j for j in jobs if j["Comment"].startswith("rule_run_cell_")]
    assert len(cells) == len(ops_cell_dirs(tmp_path)), jobs
    for job in cells:
        assert job["State"] == "COMPLETED", job
        assert job["Partition"] == GPU_PARTITION, job
        assert "gpu:1" in job["tres-per-job"], job
    for job in jobs:
        if job not in cells:  # data steps (when not local rules): CPU jobs elsewhere
            assert "gpu" not in job["tres-per-job"] and job["Partition"] != GPU_PARTITION, job
    for log in (tmp_path / "logs" / "run_cell").rglob("*.log"):
        assert " on cpu: " in log.read_text()


@pytest.mark.slurm
def test_allocated_gpu_that_torch_cannot_use_fails_the_job_loudly(
    slurm_cluster, mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    env = cluster_env(slurm_cluster)
    del env["BENCHLIB_DEVICE"]  # device choice left to benchlib: auto
    out = tmp_path / "metrics.json"
    result = subprocess.run(
        [
            "srun",
            f"--partition={GPU_PARTITION}",
            "--gpus=1",
            "--time=10",
            benchlib_exe(),
            "run",
            "--spec",
            json.dumps(smoke_cell_spec("fedavg", "sfa", k=1)),
            "--store",
            str(mnist_store),
            "--split",
            str(smoke_split),
            "--out",
            str(out),
            "--checkpoints",
            str(tmp_path / "checkpoints"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if torch.cuda.is_available():  # a real GPU behind the fake one: it must be used
        assert result.returncode == 0, result.stderr
        assert " on cuda" in result.stderr
        return
    assert result.returncode != 0
    assert "error: a GPU was allocated (CUDA_VISIBLE_DEVICES=" in result.stderr
    assert "BENCHLIB_DEVICE=cpu" in result.stderr
    assert not out.exists()


@pytest.mark.slurm
@pytest.mark.workflow
def test_cells_per_gpu_packs_cells_into_one_gpu_job_each(
    slurm_cluster, ops_reference_run, tmp_path
):
    """BENCHLIB_CELLS_PER_GPU=2: the 4 ops cells run as 2 SLURM jobs of one GPU each, with the
    same results as a local run."""
    env = cluster_env(
        slurm_cluster, BENCHLIB_SLURM_GPU_PARTITION=GPU_PARTITION, BENCHLIB_CELLS_PER_GPU="2"
    )
    result = ops_table_on_slurm(tmp_path, env)
    assert result.returncode == 0, f"{result.stderr[-4000:]}\n{slurm_cluster.logs()}"
    reference = ops_reference_run.workdir
    cells = ops_cell_dirs(tmp_path)
    assert len(cells) == 4
    for name, path in cells.items():
        expected = ops_cell_dirs(reference)[name] / "metrics.json"
        assert (path / "metrics.json").read_bytes() == expected.read_bytes(), name
    before = {j["JobID"] for j in slurm_jobs(slurm_cluster) if "rule_run_cell_" in j["Comment"]}
    # a group asks for its one GPU with --gres=gpu:1, a per-node TRES
    gpu_jobs = [
        j
        for j in slurm_jobs(slurm_cluster)
        if "gpu" in j["tres-per-node"] and j["JobID"] not in before
    ]
    assert len(gpu_jobs) == 2, slurm_jobs(slurm_cluster)  # 4 cells, 2 per GPU
    for job in gpu_jobs:
        assert job["State"] == "COMPLETED", job
        assert job["Partition"] == GPU_PARTITION, job
        assert "gpu:1" in job["tres-per-node"], job
        assert "gpu" not in job["tres-per-job"], job  # not one GPU per cell
