"""Aggregate targets per paper and kind (``snakemake lightyear_figures``, ``tfl_tables``...) and
the ``--configfile X TARGET`` trap the other way round (a config file named as a target)."""

from __future__ import annotations

import subprocess
from itertools import chain

import pytest
from conftest import REPO, tool_env

from benchlib.configuration.config import Config
from benchlib.configuration.targets import aggregate_targets, all_targets, config_file_targets
from benchlib.grid.paper_configs import load_paper_config
from benchlib.report.browse import paper_index


@pytest.fixture(scope="module")
def paper_aggregates() -> dict[str, list[str]]:
    config = Config(load_paper_config(REPO / "config" / "paper"))
    return aggregate_targets(config, paper_index(REPO / "config" / "paper"))


def test_each_paper_has_its_tables_figures_reports_and_all(paper_aggregates):
    assert "tables/femnist_ana.tex" in paper_aggregates["lightyear_tables"]
    assert "figures/lightyear_fig3.pdf" in paper_aggregates["lightyear_figures"]
    assert "reports/lightyear_vs_paper.md" in paper_aggregates["lightyear_reports"]
    assert "tables/tfl_table1.tex" in paper_aggregates["tfl_tables"]
    assert "figures/tfl_fig1.png" in paper_aggregates["tfl_figures"]
    assert "tables/fedagain_table1.tex" in paper_aggregates["fedagain_tables"]
    assert "figures/fedagain_fig8.pdf" in paper_aggregates["fedagain_figures"]
    for paper in ("lightyear", "fedagain", "tfl"):
        assert paper_aggregates[f"{paper}_tables"], paper
        assert all(t.startswith("tables/") for t in paper_aggregates[f"{paper}_tables"])
        assert all(t.startswith("figures/") for t in paper_aggregates[f"{paper}_figures"])
        parts = [paper_aggregates[f"{paper}_{kind}"] for kind in ("tables", "figures", "reports")]
        assert sorted(paper_aggregates[f"{paper}_all"]) == sorted(chain(*parts))


def test_the_papers_aggregates_cover_every_target_once(paper_aggregates):
    config = Config(load_paper_config(REPO / "config" / "paper"))
    together = chain(*(paper_aggregates[f"{p}_all"] for p in ("lightyear", "fedagain", "tfl")))
    assert sorted(together) == sorted(all_targets(config))


def test_config_like_targets_are_found():
    targets = ["tables/a.tex", "config/demo.yaml", "x.yml", "c.json", "figures/b.png"]
    assert config_file_targets(targets) == ["config/demo.yaml", "x.yml", "c.json"]
    outputs = ["results/runs/e/none/fedavg/k0/seed0/metrics.json", "results/data/d/manifest.json"]
    assert config_file_targets(outputs) == []  # the workflow's own JSON files are targets


def snakemake(tmp_path, *args: str) -> subprocess.CompletedProcess:
    argv = ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n", *args]
    return subprocess.run(argv, env=tool_env(), capture_output=True, text=True, timeout=600)


@pytest.mark.workflow
def test_an_aggregate_target_plans_its_papers_tables(tmp_path):
    result = snakemake(
        tmp_path, f"--configfile={REPO / 'config' / 'smoke.yaml'}", "lightyear_tables"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    counts = dict(
        line.split()[:2]
        for line in result.stdout.splitlines()
        if len(line.split()) == 2 and line.split()[1].isdigit()
    )
    assert counts["render_table"] == "2"  # smoke_sfa and smoke_ana
    assert counts["lightyear_tables"] == "1"
    assert "render_figure" not in counts


@pytest.mark.workflow
def test_a_config_named_as_a_target_is_one_clear_line(tmp_path):
    config = REPO / "config" / "smoke.yaml"
    result = snakemake(tmp_path, f"--configfile={config}", str(config))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: target {config} is a config file; pass it as --configfile={config} "
        "(with '=': --configfile takes several values and swallows targets written after it)"
    )
