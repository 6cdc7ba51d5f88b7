"""One module owns the output layout: every results path comes from benchlib.primitives.layout."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

from benchlib.grid.spec import Cell
from benchlib.primitives import layout

OUTPUT_ROOTS = ("results/", "tables/", "figures/", "reports/")


def _string_starts(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant):
                found.append((node.lineno, str(first.value)))
    return found


def test_no_module_but_layout_spells_an_output_path():
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {text[:50]!r}"
        for path in sorted((REPO / "src" / "benchlib").rglob("*.py"))
        if path.name != "layout.py"
        for line, text in _string_starts(ast.parse(path.read_text()))
        if text.startswith(OUTPUT_ROOTS)
    ]
    assert not offenders, "take these paths from benchlib.primitives.layout: " + "; ".join(
        offenders
    )


def test_no_rule_spells_an_output_path():
    quoted = re.compile(r"""["'](?:results|tables|figures|reports)/""")
    offenders = [
        f"{path.name}:{number}"
        for path in [
            *sorted((REPO / "workflow" / "rules").glob("*.smk")),
            REPO / "Snakefile",
            REPO / "workflow" / "Snakefile",
        ]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if quoted.search(line.split("#", 1)[0])
    ]
    assert not offenders, f"take these paths from benchlib.primitives.layout: {offenders}"


def test_cell_paths_and_collected_csvs_round_trip():
    cell = Cell("femnist", "sfa", "lightyear", 3, 1)
    assert cell.metrics_path == "results/runs/femnist/sfa/lightyear/k3/seed1/metrics.json"
    assert cell.metrics_path == layout.run_metrics("femnist", "sfa", "lightyear", 3, 1)
    assert cell.checkpoint_dir == "results/checkpoints/femnist/sfa/lightyear/k3/seed1"
    path = layout.collected_csv("femnist", "sfa")
    assert path == "results/collected/femnist/sfa.csv"
    assert layout.collected_from(path) == ("femnist", "sfa")
    assert layout.collected_from("results/collected/femnist.csv") == ("femnist", None)
    assert layout.collected_from("results/runs/femnist/x.csv") is None


def test_report_outputs_by_kind():
    assert layout.report_outputs("table", "a") == ("tables/a.tex",)
    assert layout.report_outputs("figure_numbers", "r") == (
        "figures/r.pdf",
        "figures/r.png",
        "figures/r.csv",
    )
    assert Path(layout.report_outputs("markdown", "m")[0]).suffix == ".md"
    assert layout.report_outputs("markdown_numbers", "c") == (
        "reports/c.md",
        "reports/c.pdf",
        "reports/c.csv",
    )
