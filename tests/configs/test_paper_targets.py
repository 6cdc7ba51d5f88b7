"""Paper targets without --configfile: the default config is config/paper/*.yaml merged (conflicting
ids are one error naming both files), one function owns the target list (rule all and `benchlib
targets` agree), paper tables resolve by name, and standalone configs never inherit paper grids."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, benchlib_exe, tool_env

from benchlib import __version__
from benchlib.configuration.config import Config, load_config_file
from benchlib.configuration.targets import all_targets
from benchlib.grid.paper_configs import load_paper_config, load_raw_config, merge_configs
from benchlib.primitives.errors import BenchlibError

PAPER = REPO / "config" / "paper"


def snakemake(workdir: Path, *args: str, snakefile: Path = REPO / "Snakefile"):
    return subprocess.run(
        ["snakemake", "-s", str(snakefile), "-d", str(workdir), *args],
        capture_output=True,
        text=True,
        env=tool_env(),
        timeout=600,
    )


# ------------------------------------------------------------------------------------ merging
def part(**sections) -> dict:
    return {"datasets": {}, "methods": {}, "experiments": {}, **sections}


def test_merge_is_a_union_of_ids():
    a = part(description="A", methods={"fedavg": {"label": "FedAvg"}}, reports={"t": {"kind": "x"}})
    b = part(description="B", methods={"fedavg": {"label": "FedAvg"}, "tfl": {"label": "TFL"}})
    merged = merge_configs([("a.yaml", a), ("b.yaml", b)])
    assert merged == {
        "description": "A; B",
        "datasets": {},
        "methods": {"fedavg": {"label": "FedAvg"}, "tfl": {"label": "TFL"}},
        "experiments": {},
        "reports": {"t": {"kind": "x"}},
    }


@pytest.mark.parametrize("section", ["datasets", "methods", "experiments", "reports"])
def test_merge_rejects_conflicting_definitions(section):
    a = part(**{section: {"same": {"label": "one"}}})
    b = part(**{section: {"same": {"label": "two"}}})
    c = part()
    with pytest.raises(BenchlibError) as info:
        merge_configs([("config/paper/a.yaml", a), ("config/paper/c.yaml", c),
                       ("config/paper/b.yaml", b)])  # fmt: skip
    assert str(info.value) == (
        f"config/paper/a.yaml and config/paper/b.yaml both define {section}.same, differently; "
        "give one of them another id or make both definitions equal"
    )


def test_paper_folder_errors(tmp_path):
    with pytest.raises(BenchlibError, match=r"paper config folder .* not found"):
        load_paper_config(tmp_path / "missing")
    with pytest.raises(BenchlibError, match=r"has no \*.yaml file"):
        load_paper_config(tmp_path)


# ------------------------------------------------------------------------ the default config
# LIGHTYEAR's tables and figures (../shared/paper_targets.txt) plus the comparison report; the
# config has more targets (each experiment's default table and figure, figure-only experiments).
LIGHTYEAR_TARGETS = [
    *(
        f"tables/{dataset}_{malfunction}.tex"
        for dataset in ("femnist", "camelyon17", "isic19", "ultrasound", "xray")
        for malfunction in ("ana", "sfa", "random", "dynamic")
    ),
    "tables/training_details.tex",
    *(f"figures/lightyear_fig{n}.{ext}" for n in range(3, 14) for ext in ("pdf", "png")),
    *(f"figures/lightyear_v1_fig{n}.{ext}" for n in (8, 9) for ext in ("pdf", "png")),
    "reports/lightyear_vs_paper.md",
]


# TFL's ten tables and its figures other than Figure 3 (a diagram) - all of the paper's results -
# and its paper-vs-ours report.
TFL_TARGETS = [
    *(f"tables/tfl_table{n}.tex" for n in range(1, 11)),
    *(f"figures/tfl_fig{n}.pdf" for n in (1, 2, 4, 5, 6, 7, 8, 9)),
    "reports/tfl_vs_paper.md",
]


def default_targets() -> list[str]:
    return all_targets(Config(load_paper_config(PAPER)))


def test_default_config_targets(monkeypatch):
    assert "lightyear.yaml" in [p.name for p in PAPER.glob("*.yaml")]
    lightyear = Config(load_config_file(PAPER / "lightyear.yaml"))  # standalone
    targets = all_targets(lightyear)
    assert len(targets) == len(set(targets))
    assert set(LIGHTYEAR_TARGETS) <= set(targets) <= set(default_targets())
    assert targets[:4] == LIGHTYEAR_TARGETS[:4]  # the FEMNIST tables first, in the paper's order
    assert lightyear.reports["training_details"].spec["datasets"][0]["label"] == "FEMNIST"
    fig7 = lightyear.reports["lightyear_fig7"]
    assert fig7.inputs == tuple(
        f"results/collected/{e}/dynamic.csv" for e in ("femnist", "camelyon17", "isic19")
    )
    assert fig7.spec["std"] is True
    monkeypatch.chdir(REPO)
    assert load_raw_config(None) == load_raw_config(PAPER) == load_paper_config(PAPER)


def test_every_tfl_table_and_figure_is_a_default_target():
    tfl = all_targets(Config(load_config_file(PAPER / "tfl.yaml")))  # standalone
    assert set(TFL_TARGETS) <= set(tfl) <= set(default_targets())


def test_fedagain_comparison_is_a_default_target():
    fedagain = all_targets(Config(load_config_file(PAPER / "fedagain.yaml")))  # standalone
    assert "reports/fedagain_vs_paper.md" in fedagain
    assert "reports/fedagain_vs_paper.md" in default_targets()


@pytest.mark.workflow
@pytest.mark.slow
def test_comparison_reports_resolve_without_configfile(tmp_path):
    result = snakemake(tmp_path, "-n", "reports/fedagain_vs_paper.md", "reports/tfl_vs_paper.md")
    assert result.returncode == 0, result.stderr[-3000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, flags=re.M))
    assert stats["render_markdown"] == "2"


def test_benchlib_targets_prints_the_target_list():
    result = subprocess.run(
        [benchlib_exe(), "-q", "targets"], capture_output=True, text=True, env=tool_env(), cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == default_targets()


@pytest.mark.workflow
@pytest.mark.slow
def test_paper_tables_resolve_without_configfile(tmp_path):
    result = snakemake(
        tmp_path, "-n", "tables/femnist_ana.tex", "tables/training_details.tex",
        "figures/lightyear_fig3.pdf",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, flags=re.M))
    assert stats["render_table"] == "2" and stats["render_figure"] == "1"
    # Figure 3: femnist, camelyon17 and isic19 x ana, sfa, random
    assert stats["collect_table_results"] == "9"
    assert not (tmp_path / "results").exists()


def rule_all_inputs(output: str) -> list[str]:
    match = re.search(r"^(?:local)?rule all:\n\s+input: (.*)$", output, flags=re.M)
    assert match, output[-2000:]
    return match.group(1).split(", ")


@pytest.mark.workflow
@pytest.mark.slow
def test_rule_all_is_the_target_list(tmp_path):
    default = snakemake(tmp_path / "paper", "-n")
    assert default.returncode == 0, default.stderr[-3000:]
    assert sorted(rule_all_inputs(default.stdout)) == sorted(default_targets())
    smoke = REPO / "config" / "smoke.yaml"
    result = snakemake(tmp_path / "smoke", "-n", "--configfile", str(smoke))
    assert result.returncode == 0, result.stderr[-3000:]
    expected = all_targets(Config(load_config_file(smoke)))
    assert sorted(rule_all_inputs(result.stdout)) == sorted(expected)
    assert not any("femnist" in target for target in rule_all_inputs(result.stdout))


@pytest.mark.workflow
@pytest.mark.slow
def test_standalone_configs_never_inherit_paper_grids(tmp_path):
    result = snakemake(
        tmp_path,
        "-n",
        "tables/femnist_ana.tex",
        "--configfile",
        str(REPO / "config" / "smoke.yaml"),
    )
    assert result.returncode != 0
    # one line naming why and which config builds it, not Snakemake's MissingRuleException
    assert result.stderr.strip().splitlines() == [
        "error: tables/femnist_ana.tex is not a target of this config (benchlib targets CONFIG "
        "lists its targets); it is a paper target (config/paper/lightyear.yaml): set "
        "paper_grids: true in your config to build it on the paper grids (your entries "
        "override theirs; add_methods adds your methods)"
    ]


@pytest.mark.workflow
@pytest.mark.slow
def test_a_target_of_another_config_names_that_config(tmp_path):
    result = snakemake(tmp_path, "-n", "tables/femnist_sample_ana.tex")
    assert result.returncode != 0
    path = REPO / "config" / "femnist_sample.yaml"
    assert result.stderr.strip().splitlines()[-1] == (
        "error: tables/femnist_sample_ana.tex is not a target of this config (benchlib targets "
        f"CONFIG lists its targets); config/femnist_sample.yaml builds it: --configfile={path}"
    )


@pytest.mark.workflow
@pytest.mark.slow
def test_conflicting_paper_files_stop_the_workflow_with_one_error(tmp_path):
    shutil.copy(REPO / "Snakefile", tmp_path / "Snakefile")
    shutil.copytree(REPO / "workflow", tmp_path / "workflow")
    (tmp_path / "config" / "paper").mkdir(parents=True)
    lightyear = load_config_file(PAPER / "lightyear.yaml")
    other = copy.deepcopy(lightyear)
    other.pop("reports", None)
    other["methods"]["fedavg"]["label"] = "FedAvg (other paper)"
    for name, raw in (("lightyear", lightyear), ("other", other)):
        (tmp_path / "config" / "paper" / f"{name}.yaml").write_text(yaml.safe_dump(raw))
    result = snakemake(tmp_path / "work", "-n", snakefile=tmp_path / "Snakefile")
    assert result.returncode == 1
    paper = tmp_path / "config" / "paper"
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {paper}/lightyear.yaml and {paper}/other.yaml both define methods.fedavg, "
        "differently; give one of them another id or make both definitions equal"
    )


@pytest.mark.workflow
@pytest.mark.slow
def test_training_details_renders_from_the_default_config(tmp_path):
    """Paper Table 1 needs no training: snakemake renders it from the default config alone."""
    result = snakemake(tmp_path, "--cores", "1", "tables/training_details.tex")
    assert result.returncode == 0, result.stderr[-3000:]
    text = (tmp_path / "tables" / "training_details.tex").read_text()
    golden = (REPO / "tests" / "golden" / "training_details.tex").read_text()
    assert text.replace(f"benchlib {__version__} ", "benchlib VERSION ") == golden


def test_config_files_parse_to_the_same_values_with_libyaml():
    """The strict loader (libyaml's parser where available) reads every shipped config, the
    paper grids and the config schema exactly as yaml.safe_load does."""
    from benchlib.primitives.yaml_load import load_yaml

    files = [*sorted((REPO / "config").rglob("*.yaml")), *(REPO / "src").rglob("*.schema.yaml")]
    assert len(files) >= 6 and PAPER / "tfl.yaml" in files
    for path in files:
        text = path.read_text()
        assert load_yaml(text, path) == yaml.safe_load(text), path


# --------------------------------------------------- your methods on the paper grids
def test_add_methods_appends_to_the_named_experiments_or_all():
    from benchlib.grid.paper_configs import added_methods, with_added_methods

    shared = ["a", "b"]  # a YAML alias: both experiments hold the same list
    raw = part(
        methods={"a": {}, "b": {}, "mine": {}},
        experiments={"x": {"methods": shared}, "y": {"methods": shared}},
    )
    named = with_added_methods({**raw, "add_methods": {"mine": ["x"]}})
    assert named["experiments"]["x"]["methods"] == ["a", "b", "mine"]
    assert named["experiments"]["y"]["methods"] == ["a", "b"] == shared  # never in place
    every = with_added_methods({**raw, "add_methods": {"mine": "all"}})
    assert [e["methods"] for e in every["experiments"].values()] == [["a", "b", "mine"]] * 2
    assert added_methods({**raw, "add_methods": {"mine": ["x"]}}, "y") == []
    assert added_methods({**raw, "add_methods": {"mine": "all"}}, "y") == ["mine"]
    assert with_added_methods(raw) is raw


def test_add_methods_errors_are_one_line():
    from benchlib.grid.paper_configs import with_added_methods

    raw = part(methods={"a": {}}, experiments={"femnist": {"methods": ["a"]}})
    with pytest.raises(BenchlibError, match=r"add_methods\.mine: method .mine. is not defined"):
        with_added_methods({**raw, "add_methods": {"mine": "all"}})
    with pytest.raises(BenchlibError, match=r"experiment .femnst. is not defined .did you mean"):
        with_added_methods({**raw, "add_methods": {"a": ["femnst"]}})


def test_paper_grids_lays_the_config_over_the_paper_grids():
    from benchlib.grid.paper_configs import wants_paper_grids, with_paper_grids

    paper = load_paper_config()
    given = {
        "paper_grids": True,
        "methods": {"extra": {"method": "fedavg", "label": "Extra"}},
        "experiments": {"femnist": {"seeds": [0, 1]}},
        "add_methods": {"extra": ["femnist"]},
    }
    merged = with_paper_grids(given)
    femnist = merged["experiments"]["femnist"]
    assert femnist["seeds"] == [0, 1]
    assert {k: v for k, v in femnist.items() if k != "seeds"} == {
        k: v for k, v in paper["experiments"]["femnist"].items() if k != "seeds"
    }
    assert set(merged["methods"]) == {*paper["methods"], "extra"}
    config = Config(merged)
    assert config.experiments["femnist"]["methods"][-1] == "extra"
    assert {c.seed for c in config.cells("femnist", "ana")} == {0, 1}
    paper_config = Config(paper)
    # the paper's cells keep their specs: adding a method only adds cells
    cell = paper_config.cells("femnist", "ana")[0]
    assert Config(with_paper_grids({"paper_grids": True, **given, "experiments": {}})).cell_spec(
        cell
    ) == paper_config.cell_spec(cell)
    assert with_paper_grids({"experiments": {}}) == {"experiments": {}}  # standalone
    assert wants_paper_grids({}, configfile_given=False)
    assert not wants_paper_grids({"experiments": {}}, configfile_given=False)
    assert not wants_paper_grids({}, configfile_given=True)
    assert wants_paper_grids({"paper_grids": True, "experiments": {}}, configfile_given=True)


def test_an_added_method_is_marked_not_in_the_paper():
    import math

    import pandas as pd

    from benchlib.grid.paper_configs import with_paper_grids
    from benchlib.report.kinds.common.paper_comparison import markdown

    given = {
        "paper_grids": True,
        "methods": {"extra": {"method": "fedavg", "label": "Extra"}},
        "add_methods": {"extra": ["femnist"]},
        "reports": {"femnist_ranking": {"kind": "ranking", "experiments": ["femnist"]}},
    }
    config = Config(with_paper_grids(given))
    specs = {e["experiment"]: e for e in config.reports["lightyear_vs_paper"].spec["experiments"]}
    assert specs["femnist"]["not_in_paper"] == ["extra"]
    assert "not_in_paper" not in specs["camelyon17"]
    assert config.reports["femnist_ranking"].spec["not_in_paper"] == ["extra"]
    paper = Config(load_paper_config())  # the paper's own reports are unchanged
    assert "not_in_paper" not in str(paper.reports["lightyear_vs_paper"].spec)

    row = {"experiment": "femnist", "malfunction": "ana", "k": 1, "ours": 50.0, "ours_std": 1.0}
    row |= {"within_2std": None, "table": None, "reading": "-", "difference": None}
    row |= {"dataset": "femnist", "scale": "paper"}
    frame = pd.DataFrame(
        [
            {**row, "method_id": "extra", "paper_method": "fedavg", "paper": math.nan},
            {**row, "method_id": "lightyear", "paper_method": "lightyear", "paper": math.nan},
        ]
    ).assign(paper_std=math.nan)
    taus = pd.DataFrame(columns=["experiment", "malfunction", "k", "methods", "kendall_tau"])
    text = markdown(config.reports["lightyear_vs_paper"].spec, frame, taus, "x.png")
    assert "| extra | 1 | 50.0 +- 1.0 | not in the paper |" in text
    assert "| lightyear | 1 | 50.0 +- 1.0 | - |" in text
