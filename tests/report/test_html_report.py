"""The HTML report's parts: a rendered LaTeX table as an HTML page (numbers, caption, settings),
the report's categories (paper, experiment) and the page of built targets."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import REPO

from benchlib.commands.cli import main
from benchlib.configuration.config import Config
from benchlib.grid.paper_configs import load_paper_config
from benchlib.report import browse
from benchlib.report.html_table import inline, parse_caption, parse_tabulars, table_page

GOLDEN = REPO / "tests" / "golden"


class Cells(HTMLParser):
    """The text of every td/th of a page, row by row, and each cell's colspan."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[tuple[str, int]]] = []
        self._cell: list[str] | None = None
        self._span = 1

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell, self._span = [], int(dict(attrs).get("colspan") or 1)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(("".join(self._cell).strip(), self._span))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def page_rows(page: str) -> list[list[tuple[str, int]]]:
    parser = Cells()
    parser.feed(page)
    return parser.rows


def test_a_robustness_table_keeps_every_number_and_its_header():
    tex = (GOLDEN / "femnist_sample_ana.tex").read_text()
    (table,) = parse_tabulars(tex)
    assert [[c.html for c in row] for row in table.header] == [
        ["", "Number of Malfunctioning Clients"],
        ["Method", "0", "1", "4", "7"],
    ]
    assert table.header[0][1].colspan == 4
    assert len(table.body) == 10
    assert [c.html for c in table.body[-1]] == [
        "LIGHTYEAR",
        "83.8 ± 1.8",
        "83.2 ± 1.8",
        "81.4 ± 1.8",
        "79.6 ± 1.8",
    ]
    caption = parse_caption(tex)
    assert caption.startswith("FEMNIST (LEAF sample) -- ANA. Average test accuracy (%) ± std")
    assert "not comparable to the paper&#x27;s numbers." in caption


def test_the_page_shows_caption_numbers_settings_and_the_source():
    tex = (GOLDEN / "training_details.tex").read_text()
    settings = {"Experiment femnist": {"training.rounds": 12, "model": {"name": "cnn"}}}
    page = table_page(tex, "training_details", settings)
    rows = page_rows(page)
    assert ["Weight Decay", "1e-4", "5e-4", "0", "0", "0"] in [[t for t, _ in r] for r in rows]
    assert [("training.rounds", 1), ("12", 1)] in rows
    assert "Training details: the hyperparameters" in page
    assert "<details><summary>LaTeX source</summary>" in page


@pytest.mark.parametrize(
    ("tex", "html"),
    [
        (r"\textbf{83.1} $\pm$ 0.2", "<b>83.1</b> ± 0.2"),
        (r"a\_b \& c \% d", "a_b &amp; c % d"),
        (r"$\tau = 0.75$, 3 $\times$ 4", "τ = 0.75, 3 × 4"),
        (r"\textit{x<y}", "<i>x&lt;y</i>"),
        (r"10$^{-3}$", "10<sup>-3</sup>"),
    ],
)
def test_inline_latex(tex, html):
    assert inline(tex) == html


def test_escaped_ampersands_and_nested_braces_do_not_split_cells():
    tex = r"\begin{tabular}{@{}lc@{}} A \& B & \textbf{1 {2}} \\ \end{tabular}"
    (table,) = parse_tabulars(tex)
    assert [c.html for c in table.body[0]] == ["A &amp; B", "<b>1 2</b>"]


def test_a_file_without_a_tabular_is_a_clear_error(tmp_path, capsys):
    tex = tmp_path / "t.tex"
    tex.write_text(r"\caption{x}")
    out = tmp_path / "t.html"
    assert main(["table-html", "--tex", str(tex), "--settings", "{}", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == "error: no tabular environment in the LaTeX table"
    assert not out.exists()


@pytest.fixture(scope="module")
def paper_config() -> Config:
    return Config(load_paper_config(REPO / "config" / "paper"))


@pytest.mark.parametrize(
    ("name", "paper"),
    [
        ("femnist_ana", "LIGHTYEAR"),
        ("lightyear_fig3", "LIGHTYEAR"),
        ("lightyear_vs_paper", "LIGHTYEAR"),
        ("fedagain_table1", "FedAgain"),
        ("mnist_clients__clients_5_none", "FedAgain"),
        ("tfl_table1", "TFL"),
        ("tfl_pacs__held_out_0_1_2_3_4_none", "TFL"),
    ],
)
def test_each_paper_report_is_filed_under_its_paper(paper_config, name, paper):
    index = browse.paper_index(REPO / "config" / "paper")
    assert browse.report_paper(paper_config.reports[name], paper_config, index) == paper


def test_standalone_configs_fall_back_to_the_methods_they_run(smoke_config):
    for report in smoke_config.reports.values():
        assert browse.report_paper(report, smoke_config, {}) == "LIGHTYEAR"
    table = smoke_config.reports["smoke_sfa"]
    assert browse.report_subcategory(table, smoke_config) == "smoke: smoke test"
    settings = browse.report_settings(table, smoke_config)
    assert settings["Report"]["kind"] == "robustness_table"
    assert settings["Experiment smoke"]["k"] == "0, 1, 2"
    assert settings["Experiment smoke"]["training.rounds"] == 2


def test_the_status_page_lists_built_and_missing_targets(tmp_path, capsys):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "a.tex").write_text("x")
    built, missing = browse.built_and_missing(["tables/a.tex", "figures/b.png"], tmp_path)
    assert (built, missing) == (["tables/a.tex"], ["figures/b.png"])
    out = tmp_path / "status.html"
    spec = json.dumps({"title": "demo", "built": built, "missing": missing})
    assert main(["report-status", "--spec", spec, "--out", str(out)]) == 0
    page = out.read_text()
    assert "1 of 2 targets built, 1 not built yet." in page
    assert "<ul id=missing><li><code>figures/b.png</code></li></ul>" in page


def test_html_report_refuses_an_unknown_suffix(tmp_path, capsys):
    assert main(["html-report", "--out", str(tmp_path / "r.pdf")]) == 2
    assert "must end in .html" in capsys.readouterr().err
    assert not Path(tmp_path / "r.pdf").exists()


def test_make_report_runs_html_report_with_the_config_default_the_demo():
    makefile = (REPO / "Makefile").read_text()
    assert "CONFIG ?= config/demo.yaml" in makefile
    recipe = makefile.split("\nreport: $(STAMP)\n", 1)[1].splitlines()[0]
    assert recipe.strip() == (
        "benchlib html-report $(if $(CONFIG),--config $(CONFIG)) --out $(REPORT) --cores $(CORES)"
    )
