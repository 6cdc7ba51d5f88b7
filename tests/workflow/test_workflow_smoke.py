"""Snakemake end to end on config/smoke.yaml: the rendered tables equal an independent
recomputation from metrics.json, the figure exists, and a second run has nothing to do."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO, benchlib_exe, smoke_snakemake, tool_env

pytestmark = [pytest.mark.workflow, pytest.mark.slow]
CELL = re.compile(r"([0-9.]+) \$\\pm\$ ([0-9.]+)")


def parse_table(tex: str) -> dict[str, list[tuple[float, float]]]:
    rows = {}
    for line in tex.splitlines():
        if "$\\pm$" in line and line.rstrip().endswith("\\\\"):
            label = line.split("&")[0].strip()
            rows[label] = [(float(m), float(s)) for m, s in CELL.findall(line)]
    return rows


def expected_row(workdir: Path, experiment: str, malfunction: str, method: str, ks, seeds):
    cells = []
    for k in ks:
        per_seed = []
        for seed in seeds:
            mal = "none" if k == 0 else malfunction
            path = (
                workdir / f"results/runs/{experiment}/{mal}/{method}/k{k}/seed{seed}/metrics.json"
            )
            clients = json.loads(path.read_text())["clients"]
            per_seed.append([c["test_accuracy"] for c in clients])
        per_client = np.mean(np.array(per_seed), axis=0)
        cells.append((100 * per_client.mean(), 100 * per_client.std(ddof=0)))
    return cells


def test_tables_match_an_independent_recomputation(smoke_run):
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    experiment = config["experiments"]["smoke"]
    for malfunction in experiment["malfunctions"]:
        tex = (smoke_run / f"tables/smoke_{malfunction}.tex").read_text()
        rows = parse_table(tex)
        labels = [config["methods"][m]["label"] for m in experiment["methods"]]
        assert list(rows) == labels
        for method, label in zip(experiment["methods"], labels, strict=True):
            expected = expected_row(
                smoke_run, "smoke", malfunction, method, experiment["k"], experiment["seeds"]
            )
            flat = [value for pair in expected for value in pair]
            assert [v for pair in rows[label] for v in pair] == pytest.approx(flat, abs=0.051), (
                malfunction,
                method,
            )
        assert "Method & 0 & 1 & 2" in tex
        assert "population std across all 4 clients, malfunctioning clients included" in tex


def test_figure_and_second_run(smoke_run):
    for ext, magic in (("pdf", b"%PDF"), ("png", b"\x89PNG")):
        path = smoke_run / f"figures/smoke_robustness.{ext}"
        assert path.read_bytes()[:4] == magic
    again = smoke_snakemake(smoke_run, "-n")
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr


def test_malicious_clients_are_recorded(smoke_run):
    metrics = json.loads(
        (smoke_run / "results/runs/smoke/sfa/fedavg/k2/seed0/metrics.json").read_text()
    )
    assert metrics["malicious_clients"] == [0, 1]
    assert not (smoke_run / "results/checkpoints/smoke/sfa/fedavg/k2/seed0").exists()


def test_a_diverged_cell_is_marked_in_the_table_and_in_status(smoke_workdir):
    """ANA noise of scale 1e40 overflows FedAvg's global model to Inf: its k=1 cell diverges.
    The table marks that value with a dagger and counts it in a note; status names it."""
    from conftest import ops_snakemake

    config = yaml.safe_load((smoke_workdir / "c.yaml").read_text())
    config["datasets"]["mnist5k"]["malfunction"]["ana"] = {"scale": 1e40}
    config["experiments"]["smoke"].update(methods=["local", "fedavg"], malfunctions=["ana"])
    config["experiments"]["smoke"]["k"] = [0, 1]
    (smoke_workdir / "c.yaml").write_text(yaml.safe_dump(config))
    result = ops_snakemake(
        smoke_workdir, smoke_workdir / "c.yaml", "--cores", "2", "--", "tables/smoke_ana.tex"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads(
        (smoke_workdir / "results/runs/smoke/ana/fedavg/k1/seed0/metrics.json").read_text()
    )
    assert metrics["history"]["nonfinite"] == [{"model": "global", "round": 0}]
    log = (smoke_workdir / "logs/run_cell/smoke/ana/fedavg/k1/seed0.log").read_text()
    assert "WARNING round 1/1: non-finite (NaN/Inf) models: global; the cell has diverged" in log
    assert "WARNING diverged: 1 non-finite models in 1 of 1 rounds" in log
    tex = (smoke_workdir / "tables/smoke_ana.tex").read_text()
    rows = {line.split("&")[0].strip(): line for line in tex.splitlines() if "$\\pm$" in line}
    fedavg = rows["FedAvg"].split("&")
    assert "$^{\\dagger}$" not in fedavg[1] and fedavg[2].strip().endswith("$^{\\dagger}$ \\\\")
    assert "$^{\\dagger}$" not in rows["Local"]
    assert "$^{\\dagger}$ Includes 1 diverged cell (non-finite model weights" in tex
    status = subprocess.run(
        [benchlib_exe(), "status", "--config", "c.yaml", "tables/smoke_ana.tex"],
        cwd=smoke_workdir, env=tool_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert "1 diverged (non-finite models): smoke/ana/fedavg/k1/seed0" in status.stdout
