"""The generated verdict blocks at the end of docs/papers/<paper>.md equal what the claims report
computes now from the committed collected results (python -m benchlib.commands.claims_docs)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO
from helpers.paths import GOLDEN

from benchlib.commands.claims_docs import (
    END,
    RUNS,
    CpuRun,
    block,
    cells_text,
    current_block,
    golden_path,
    run_of,
    save_golden,
    trimmed,
    with_block,
)
from benchlib.configuration.config import load_config
from benchlib.primitives.errors import BenchlibError
from benchlib.report.claim_verdicts import scope_value


@pytest.mark.parametrize("paper", sorted(RUNS))
def test_paper_page_block_is_current(paper: str) -> None:
    text = (REPO / "docs" / "papers" / f"{paper}.md").read_text()
    assert current_block(text) == block(REPO, paper), (
        f"docs/papers/{paper}.md: its claims block is out of date; run "
        "python -m benchlib.commands.claims_docs"
    )
    assert text.rstrip("\n").endswith(END)  # appended at the very end of the page


def test_demo_block_numbers() -> None:
    """The demo's L1 row as the report kind's own test recomputes it by hand."""
    text = current_block((REPO / "docs" / "papers" / "lightyear.md").read_text())
    row = next(line for line in text.splitlines() if line.startswith("| L1 | supported"))
    assert "| 27.69 [16.35, 39.91] points | 6e-05 (0.00036) | 28 | 15.73 | 9.06: 3 |" in row


def test_with_block_replaces_or_appends() -> None:
    new = block(REPO, "fedagain")
    page = "# Title\n\ntext\n"
    once = with_block(page, new)
    assert once == page + "\n" + new
    assert with_block(once, new) == once


def test_guide_example_is_the_demo_row() -> None:
    """docs/guide/claims.md reads the demo's L4 row line by line: it is the generated one."""
    guide = (REPO / "docs" / "guide" / "claims.md").read_text()
    quoted = next(line for line in guide.splitlines() if line.startswith("| L4 |"))
    shown = quoted.removesuffix(" ... |")
    text = current_block((REPO / "docs" / "papers" / "lightyear.md").read_text())
    assert any(line.startswith(shown) for line in text.splitlines())
    l5 = next(line for line in text.splitlines() if line.startswith("| L5 |"))
    assert "| 7 | 23.31 |" in l5 and "7 blocks, detectable 23.3 points" in guide


def test_fedagain_demo_row_by_hand() -> None:
    """F2 (FedAgain beats FedAvg over the three corruption levels): per level the pooled test
    accuracy (sum of accuracy x n_test over sum of n_test) from the committed golden."""
    differences = []
    for level in ("light", "moderate", "heavy"):
        frame = pd.read_csv(
            GOLDEN / "fedagain_demo" / f"demo_corruption__corruption_{level}_none.csv"
        )
        pooled = {
            method: 100 * (part["test_accuracy"] * part["n_test"]).sum() / part["n_test"].sum()
            for method, part in frame.groupby("method_id")
        }
        differences.append(pooled["fedagain"] - pooled["fedavg"])
    effect = sum(differences) / len(differences)
    text = current_block((REPO / "docs" / "papers" / "fedagain.md").read_text())
    row = next(line for line in text.splitlines() if line.startswith("| F2 |"))
    assert f"| {effect:.2f} [" in row and "| 3 |" in row


def test_femnist_sample_golden_is_described_as_it_is() -> None:
    """The sample's golden holds every cell of the config's grid (k = 0, and the four
    malfunctions at k = 1, 4, 7), as its description says; nothing is missing."""
    run = run_of("femnist_sample_claims")
    config = load_config(REPO / run.config)
    golden = pd.concat(pd.read_csv(p) for p in sorted((REPO / run.golden).glob("*.csv")))
    held = golden[["malfunction", "method_id", "k", "seed"]].drop_duplicates()
    assert len(list(config.cells("femnist_sample"))) == len(held) == 130
    assert sorted(held["malfunction"].unique()) == ["ana", "dynamic", "none", "random", "sfa"]
    assert "(all 130 cells" in run.source
    text = current_block((REPO / "docs" / "papers" / "lightyear.md").read_text())
    section = text[text.index("femnist_sample.yaml") :]
    assert "Missing cells" not in section


def test_golden_path() -> None:
    folder = REPO / "tests" / "golden" / "x"
    assert golden_path(REPO, "tests/golden/x", "results/collected/e__a_b/sfa.csv") == (
        folder / "e__a_b_sfa.csv"
    )
    cell = "e/none/tfl/k0/seed3"
    assert golden_path(REPO, "tests/golden/x", f"results/runs/{cell}/metrics.json") == (
        folder / "runs" / cell / "metrics.json"
    )
    assert golden_path(REPO, "tests/golden/one.csv", "results/collected/e/ana.csv") == (
        REPO / "tests" / "golden" / "one.csv"
    )


def test_trimmed_metrics_score_as_the_full_file(tmp_path) -> None:
    """A golden metrics.json keeps what the claims kind reads: the same value, divergence flag
    and train size per scope and pooling."""
    clients = [{"client": 0, "n_train": 88, "test_mse": 0.2}, {"client": 1, "n_train": 90,
               "test_mse": 0.4}]  # fmt: skip
    full = {
        "cell": {"experiment": "e", "method": "tfl"},
        "readings": {"prior": "normalised"},
        "provenance": {"commit": "abc", "dirty": False},
        "clients": clients,
        "held_out_clients": [{"client": 2, "n_train": 88, "test_mse": 1.5}],
        "pooled": {"if": {"mse": 0.31}, "oof": {"mse": 1.5}},
        "history": {"nonfinite": [3], "val_mse": [[0.5, 0.6]], "scores": [[1.0]]},
        "method_summary": {"lambda": [[0.5, 0.5]]},
        "config": {"clients": 3},
    }
    short = trimmed(full)
    kept = {"cell", "readings", "provenance", "clients", "held_out_clients", "pooled", "history"}
    assert set(short) == kept
    assert short["history"] == {"nonfinite": [3]}
    (tmp_path / "full.json").write_text(json.dumps(full))
    (tmp_path / "short.json").write_text(json.dumps(short))
    for scope in ("if", "oof"):
        for pooling in ("pooled", "clients"):
            values = [
                scope_value(tmp_path / f"{name}.json", scope, "mse", pooling)
                for name in ("full", "short")
            ]
            assert values[0] == values[1] and values[0].diverged


def test_save_golden_needs_every_input(tmp_path, monkeypatch) -> None:
    """Nothing is copied unless every input of the report is there, each error in one line."""
    one_csv = CpuRun("config/demo.yaml", "one_csv_claims", "tests/golden/x.csv", "one CSV")
    monkeypatch.setitem(RUNS, "lightyear", [*RUNS["lightyear"], one_csv])
    before = sorted((GOLDEN / "fedagain_demo").iterdir())
    cases = [
        ("fedagain_demo_claims", r"6 of its 6 inputs are missing .*build reports/"),
        ("one_csv_claims", r"names no golden folder"),
        ("nope", r"no CPU run has the claims report 'nope'"),
    ]
    for report, message in cases:
        with pytest.raises(BenchlibError, match=message) as error:
            save_golden(REPO, report, tmp_path)
        assert "\n" not in str(error.value)
    assert sorted((GOLDEN / "fedagain_demo").iterdir()) == before


def test_cells_text() -> None:
    keys = ["e/sfa/fedavg/k1/seed0", "e/sfa/krum/k4/seed0", "e/ana/fedavg/k7/seed1"]
    assert cells_text(keys) == (
        "e/sfa at k 1, 4, seed 0: fedavg, krum; e/ana at k 7, seed 1: fedavg"
    )


def test_tpt48_row_by_hand() -> None:
    """T2 under the default readings from the committed golden: per experiment and seed, the
    best baseline's pooled OOF MSE minus TFL's (lower is better), one-sided paired t-test."""
    from scipy import stats

    def oof(experiment: str, method: str, seed: int) -> float:
        path = GOLDEN / "tpt48" / "runs" / experiment / "none" / method / "k0" / f"seed{seed}"
        return json.loads((path / "metrics.json").read_text())["pooled"]["oof"]["mse"]

    d = [
        min(oof(e, m, s) for m in ("fedavg", "fedprox", "drfa")) - oof(e, "tfl", s)
        for e in ("tpt48_ew", "tpt48_ns")
        for s in range(5)
    ]
    against = stats.ttest_1samp(d, 0.0, alternative="less").pvalue
    text = current_block((REPO / "docs" / "papers" / "tfl.md").read_text())
    row = next(line for line in text.splitlines() if line.startswith("| T2 | default readings"))
    assert f"| contradicted | {sum(d) / len(d):.2f} [" in row
    assert f"against: {against:.2g} (" in row and "| 10 |" in row
    assert len(list((GOLDEN / "tpt48").rglob("metrics.json"))) == 130  # as its description says


def test_pacs_sample_row_by_hand() -> None:
    """T1 on the PACS sample from the committed golden: per held-out domain and seed, TFL's
    pooled OOF accuracy minus the best of FedAvg, DRFA and FedSR, in points."""
    from scipy import stats

    d = []
    for path in sorted((GOLDEN / "tfl_pacs_sample" / "runs").glob("*/none/tfl_f2/k0/seed*")):

        def oof(method: str, cell: Path = path) -> float:
            metrics = cell.parent.parent.parent / method / "k0" / cell.name / "metrics.json"
            return 100 * json.loads(metrics.read_text())["pooled"]["oof"]["accuracy"]

        d.append(oof("tfl_f2") - max(oof(m) for m in ("fedavg", "drfa", "tfl_fedsr_small")))
    against = stats.ttest_1samp(d, 0.0, alternative="less").pvalue
    text = current_block((REPO / "docs" / "papers" / "tfl.md").read_text())
    row = next(line for line in text.splitlines() if line.startswith("| T1 | contradicted"))
    assert len(d) == 12 and f"| {sum(d) / len(d):.2f} [" in row
    assert f"against: {against:.2g} (" in row and "| 12 |" in row
    assert len(list((GOLDEN / "tfl_pacs_sample").rglob("metrics.json"))) == 48
