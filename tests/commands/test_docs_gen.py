"""The generated pages of docs/ (module map, components, parameter reference) are written from
the code and kept current: a page that differs from what `make docs` writes fails here."""

from __future__ import annotations

import re
import shutil
import subprocess

import pandas as pd
import pytest
from conftest import REPO, benchlib_exe, tool_env

from benchlib.commands.docs_gen import (
    DEMO_GOLDEN,
    DEMO_MALFUNCTIONS,
    PAGES,
    REGIONS,
    components,
    config_key_tables,
    config_schema_file,
    demo_ranking,
    first_sentence,
    module_map,
    stale_pages,
    write_pages,
)
from benchlib.primitives.errors import BenchlibError


def test_the_committed_generated_pages_are_current():
    # in a fresh process: other tests register example methods and sources in this one
    done = subprocess.run(
        [benchlib_exe(), "docs", "--check", "--root", str(REPO)],
        capture_output=True,
        text=True,
        env=tool_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr  # "error: out of date: ...; run make docs"
    assert done.stdout.strip() == f"{len(PAGES) + len(REGIONS)} generated pages are current"


def test_make_docs_writes_every_generated_page():
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^docs:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe and "benchlib docs" in recipe.group(1)


@pytest.mark.parametrize(
    ("docstring", "sentence"),
    [
        ("One job. More words.", "One job."),
        ("FedAvg (McMahan et al. 2017): avg.\n\nMore.", "FedAvg (McMahan et al. 2017): avg."),
        ("Patches (FedAgain Sec. 4.2.4): cut. Next.", "Patches (FedAgain Sec. 4.2.4): cut."),
        ("Paths in a config (e.g. a folder)", "Paths in a config (e.g. a folder)"),
        (
            "``x``: see :mod:`benchlib.primitives.io`, a | b.",
            "`x`: see `benchlib.primitives.io`, a \\| b.",
        ),
        ("Wrapped over\n   two lines. Second.", "Wrapped over two lines."),
    ],
)  # fmt: skip
def test_first_sentence(docstring, sentence):
    assert first_sentence(docstring) == sentence


def test_the_module_map_has_one_row_per_module_grouped_by_package(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('"""The package. Long story."""\n')
    (package / "sub" / "__init__.py").write_text('"""Sub-things, e.g. b."""\n')
    (package / "sub" / "b.py").write_text('"""B: does b.\n\nMore."""\nx = 1\n')
    (package / "a.py").write_text('"""A (Sec. 2) does a."""\n')
    text = module_map(package)
    assert "\n## `sub/`: Sub-things, e.g. b.\n" in text  # a section per subpackage
    assert text.index("`a.py`") < text.index("## `sub/`") < text.index("`sub/b.py`")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows == [
        "| `__init__.py` | The package. |",
        "| `a.py` | A (Sec. 2) does a. |",
        "| `sub/__init__.py` | Sub-things, e.g. b. |",
        "| `sub/b.py` | B: does b. |",
    ]
    (package / "c.py").write_text("x = 1\n")
    with pytest.raises(BenchlibError, match=r"c\.py has no module docstring"):
        module_map(package)


def test_the_components_page_lists_every_registered_name():
    from benchlib.data.registry import dataset_names
    from benchlib.methods.catalog import METHODS
    from benchlib.models.catalog import MODELS
    from benchlib.report.base import KINDS

    text = components()
    sections = dict(re.findall(r"^## (.+)\n\n((?:\|.*\n)+)", text, re.M))
    listed = {
        title: [row.split("|")[1].strip().strip("`") for row in rows.splitlines()[2:]]
        for title, rows in sections.items()
    }
    assert listed == {
        "Methods": METHODS.names(),
        "Models": MODELS.names(),
        "Dataset sources": dataset_names(),
        "Report kinds": KINDS.names(),
    }
    assert "| `mnist5k` | classification | 10 | 1x28x28 | no |" in text
    assert "| `eicu` | classification |" in text and "| yes |" in text


def test_a_missing_or_edited_page_is_stale_until_written(tmp_path):
    assert stale_pages(tmp_path) == list(PAGES)
    assert write_pages(tmp_path) == list(PAGES)
    assert stale_pages(tmp_path) == []
    page = tmp_path / "docs" / "guide" / "components.md"
    page.write_text(page.read_text().replace("`fedavg`", "`fedavg2`"))
    assert stale_pages(tmp_path) == ["docs/guide/components.md"]


def test_a_generated_region_is_stale_until_written_and_the_rest_of_its_page_stays(tmp_path):
    page = tmp_path / "docs" / "guide" / "configs.md"
    page.parent.mkdir(parents=True)
    original = (REPO / "docs" / "guide" / "configs.md").read_text()
    edited = original.replace("| `seeds` | yes |", "| `seeds` | no |")
    page.write_text(edited.replace("## The `benchlib` command", "## The `benchlib` command!"))
    assert "docs/guide/configs.md" in stale_pages(tmp_path)
    write_pages(tmp_path)
    assert page.read_text() == original.replace(
        "## The `benchlib` command", "## The `benchlib` command!"
    )
    page.write_text(original.replace("<!-- end of generated: config keys -->", ""))
    with pytest.raises(BenchlibError, match="needs one line"):
        stale_pages(tmp_path)


def test_the_config_readme_lists_every_key_of_the_schema_with_its_description():
    from benchlib.configuration.config import schema

    text = (REPO / "config" / "README.md").read_text()
    sections = {"datasets": "`datasets.<id>`:", "methods": "`methods.<id>`:"}
    sections |= {"experiments": "`experiments.<id>`:", "reports": "`reports.<name>`:"}
    full = schema()
    for key in full["properties"]:
        assert f"| `{key}` | " in text.split("`datasets.<id>`:")[0]
    for section, title in sections.items():
        block = text.split(title)[1].split("\n\n`")[0]
        entry = full["properties"][section]["additionalProperties"]
        for key in entry["properties"]:
            required = "yes" if key in entry.get("required", ()) else "no"
            assert f"| `{key}` | {required} | " in block, (section, key)


def test_a_config_key_without_a_description_is_an_error():
    raw = config_schema_file()
    del raw["properties"]["methods"]["additionalProperties"]["properties"]["label"]["description"]
    with pytest.raises(BenchlibError, match=r"methods\.label has no description"):
        config_key_tables(raw)


def test_the_readme_demo_ranking_follows_the_golden_demo_outputs(tmp_path):
    """The README's demo numbers are computed from tests/golden/demo: a changed accuracy there
    changes them (and `benchlib docs --check` then fails until the README is rewritten)."""
    text = demo_ranking(REPO)
    assert text in (REPO / "README.md").read_text()
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "demo.yaml", tmp_path / "config" / "demo.yaml")
    shutil.copytree(REPO / DEMO_GOLDEN, tmp_path / DEMO_GOLDEN)
    golden = tmp_path / DEMO_GOLDEN / "mnist5k_sfa.csv"
    frame = pd.read_csv(golden)
    worst = (frame["method_id"] == "fedavg") & (frame["k"] == 7)
    frame.loc[worst, "test_accuracy"] = 1.0  # FedAvg wins the block sfa, k = 7
    frame.to_csv(golden, index=False)
    changed = demo_ranking(tmp_path)
    assert changed != text

    def fedavg_rank(ranking: str) -> float:
        return float(re.search(r"\| FedAvg \| (\d\.\d\d) \|", ranking).group(1))

    assert fedavg_rank(changed) < fedavg_rank(text)  # it moved up in one of the 29 blocks


def test_make_demo_checks_the_golden_outputs_and_make_demo_golden_rewrites_them():
    from benchlib.configuration.config import load_config_file

    demo = load_config_file(REPO / "config" / "demo.yaml")
    assert set(DEMO_MALFUNCTIONS) == set(demo["experiments"]["mnist5k"]["malfunctions"])
    makefile = (REPO / "Makefile").read_text()
    assert f"DEMO_MALFUNCTIONS := {' '.join(DEMO_MALFUNCTIONS)}\n" in makefile
    assert f"DEMO_GOLDEN := {DEMO_GOLDEN.as_posix()}\n" in makefile
    recipes = dict(re.findall(r"^([\w-]+):.*\n((?:\t.*\n)+)", makefile, re.M))
    assert (
        "cmp -s results/collected/mnist5k/$$m.csv $(DEMO_GOLDEN)/mnist5k_$$m.csv"
        in (recipes["demo"])
    )
    assert (
        "cp results/collected/mnist5k/$$m.csv $(DEMO_GOLDEN)/mnist5k_$$m.csv"
        in (recipes["demo-golden"])
    )
    assert "\tbenchlib docs\n" in recipes["demo-golden"]
    assert "-m benchlib.commands.claims_docs" in recipes["demo-golden"]  # the demo's verdicts
