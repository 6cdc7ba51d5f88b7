"""FEMNIST through Snakemake: a reduced grid of config/femnist_sample.yaml on the real LEAF sample
(two methods, k in {0, 1}, one round, a narrow CNN, two of the four malfunctions: one rule renders
every table) renders paper-style tables, whose numbers equal a recomputation from the cells'
metrics.json; and the paper config's dry run of tables/femnist_ana.tex plans one cell per
(method, k) plus the data jobs, without the network."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, tool_env
from helpers.femnist_sample import LEAF_SAMPLE, SHARDS, TEST_PER_SHARD, TRAIN_PER_SHARD

from benchlib.configuration.config import load_config

pytestmark = [pytest.mark.workflow, pytest.mark.slow]
MALFUNCTIONS = ["ana", "dynamic"]  # a fixed and a time-varying one; fl/test_malfunctions has all
CELL = re.compile(r"^\d{1,3}\.\d \$\\pm\$ \d{1,3}\.\d$")


def snakemake(workdir: Path, config: Path, *args: str, env: dict | None = None):
    command = ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), *args]
    command += ["--configfile", str(config)]
    return subprocess.run(
        command, env=env or tool_env(), capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    """config/femnist_sample.yaml reduced to fedavg + lightyear, k in {0, 1}, one round."""
    tmp = tmp_path_factory.mktemp("femnist_sample")
    raw = yaml.safe_load((REPO / "config" / "femnist_sample.yaml").read_text())
    dataset = raw["datasets"]["femnist_sample"]
    dataset["params"]["path"] = str(LEAF_SAMPLE)
    dataset["model"]["params"] = {"conv1": 4, "conv2": 8, "hidden": 32}
    dataset["training"]["rounds"] = 1
    raw["experiments"]["femnist_sample"].update(methods=["fedavg", "lightyear"], k=[0, 1])
    config = tmp / "femnist_sample_test.yaml"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    workdir = tmp / "work"
    targets = [f"tables/femnist_sample_{m}.tex" for m in MALFUNCTIONS]
    result = snakemake(workdir, config, "--cores", "2", *targets)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir, raw


def table_rows(tex: str) -> dict[str, list[str]]:
    rows = {}
    for line in tex.splitlines():
        parts = [p.strip() for p in line.removesuffix("\\\\").split("&")]
        if len(parts) > 1 and "$\\pm$" in line:
            rows[parts[0]] = parts[1:]
    return rows


def recomputed(workdir: Path, malfunction: str, method: str, k: int) -> str:
    mal = "none" if k == 0 else malfunction
    path = workdir / f"results/runs/femnist_sample/{mal}/{method}/k{k}/seed0/metrics.json"
    accuracy = np.array([c["test_accuracy"] for c in json.loads(path.read_text())["clients"]])
    return f"{100 * accuracy.mean():.1f} $\\pm$ {100 * accuracy.std(ddof=0):.1f}"


def test_tables_laid_out_like_the_paper(sample_run):
    workdir, raw = sample_run
    note = raw["experiments"]["femnist_sample"]["caption_note"]
    for malfunction in MALFUNCTIONS:
        tex = (workdir / f"tables/femnist_sample_{malfunction}.tex").read_text()
        assert f"\\caption{{FEMNIST (LEAF sample) -- {malfunction.upper()}." in tex
        assert "not comparable to the paper" in tex and note.split(";")[0] in tex
        assert "Number of Malfunctioning Clients" in tex
        assert "Method & 0 & 1 \\\\" in tex
        rows = table_rows(tex)
        assert list(rows) == ["FedAvg", "LIGHTYEAR"]  # paper row order
        for label, method in (("FedAvg", "fedavg"), ("LIGHTYEAR", "lightyear")):
            assert all(CELL.match(cell) for cell in rows[label])
            assert rows[label] == [recomputed(workdir, malfunction, method, k) for k in (0, 1)]


def test_clients_are_leaf_shards_with_writer_ids(sample_run):
    workdir, _ = sample_run
    split = pd.read_csv(workdir / "results/splits/femnist_sample.csv", dtype={"group": str})
    assert len(split) == 6184
    for client, shard in enumerate(SHARDS):
        rows = split[split["client"] == client]
        writers = json.loads((LEAF_SAMPLE / "train" / f"{shard}_train_9.json").read_text())["users"]
        assert set(rows["group"]) == set(writers)
        assert len(rows) == TRAIN_PER_SHARD[client] + TEST_PER_SHARD[client]
    metrics = json.loads(
        (workdir / "results/runs/femnist_sample/ana/lightyear/k1/seed0/metrics.json").read_text()
    )
    sizes = [(c["n_train"], c["n_val"], c["n_test"]) for c in metrics["clients"]]
    counts = split.groupby(["client", "subset"]).size().unstack()
    assert sizes == [
        tuple(int(counts.at[c, s]) for s in ("train", "val", "test")) for c in range(8)
    ]
    assert [c["malicious"] for c in metrics["clients"]] == [True] + [False] * 7


def test_paper_dry_run_plans_one_cell_per_method_and_k(tmp_path):
    config = REPO / "config" / "paper" / "lightyear.yaml"
    methods = load_config(config).experiments["femnist"]["methods"]
    profile = ["--profile", str(REPO / "profiles" / "slurm")]
    if not (REPO / "profiles" / "slurm" / "config.yaml").is_file():
        profile = []
    # any network access would fail: proxies point at a closed port
    env = {**tool_env(), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    result = snakemake(tmp_path, config, "-n", *profile, "tables/femnist_ana.tex", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", output, flags=re.M))
    assert int(stats["run_cell"]) == 7 * len(methods)
    for rule in ("download_data", "prepare_data", "split_data", "render_table"):
        assert stats[rule] == "1", rule
    planned = set(re.findall(r"results/runs/femnist/(\w+)/(\w+)/k(\d)/seed0/metrics.json", output))
    assert planned == {("ana", m, str(k)) for m in methods for k in range(1, 8)}
    assert "results/downloads/femnist/fed_emnist.tar.bz2" in output
    assert not (tmp_path / "results").exists()
