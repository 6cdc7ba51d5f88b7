"""The package's layering holds: `lint-imports` keeps every contract in pyproject.toml's
[tool.importlinter] (e.g. the methods never import the engine, not even for type hints)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib

import pytest
from conftest import REPO, tool_env


def test_import_contracts_are_kept():
    exe = shutil.which("lint-imports", path=tool_env()["PATH"])
    assert exe, "lint-imports is not installed (pip install -e '.[dev]')"
    result = subprocess.run(
        [exe, "--no-cache"], cwd=REPO, env=tool_env(), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"lint-imports failed:\n{result.stdout}\n{result.stderr}"


def test_contracts_are_configured_and_count_type_checking_imports():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert config["root_package"] == "benchlib"
    assert config.get("exclude_type_checking_imports", False) is False
    sources = {c["source_modules"][0] for c in config["contracts"] if "source_modules" in c}
    assert {
        "benchlib.methods",
        "benchlib.report",
        "benchlib.models",
        "benchlib.primitives.metrics",
    } <= sources


def test_the_rooms_keep_their_floors_as_the_architecture_page_shows_them():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    assert contract["containers"] == ["benchlib"] and contract["exhaustive"] is True
    assert len(contract.get("ignore_imports", [])) <= 1, "at most one import may point upward"
    floors = [sorted(re.split(r"\s*[|:]\s*", layer.strip())) for layer in contract["layers"]]
    page = (REPO / "docs" / "develop" / "architecture.md").read_text()
    section = page.split("\n## Module map\n")[1].split("\n## ")[0]
    rows = re.findall(r"^\| [^|`]+ \| ((?:`\w+/`(?:, )?)+) \|", section, flags=re.M)
    assert [sorted(re.findall(r"`(\w+)/`", row)) for row in rows] == floors
    # no module lies flat at the top: every one is in the room of its floor
    top = REPO / "src" / "benchlib"
    assert sorted(p.name for p in top.glob("*.py")) == ["__init__.py"]


RULE_FILES = [
    REPO / "Snakefile",
    REPO / "workflow" / "Snakefile",
    *sorted((REPO / "workflow" / "rules").glob("*.smk")),
]
FAKE_TORCH = ("torch", "torchvision", "timm", "monai", "torchmetrics")


def rule_file_imports() -> set[str]:
    """The benchlib modules that the Snakefiles and workflow/rules/*.smk import."""
    pattern = re.compile(
        r"^\s*(?:from\s+(benchlib[\w.]*)\s+import|import\s+(benchlib[\w.]*))", re.M
    )
    found = set()
    for path in RULE_FILES:
        found |= {a or b for a, b in pattern.findall(path.read_text())}
    return found


def test_parse_time_contract_is_exactly_what_the_rule_files_import():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["name"].startswith("parse-time")]
    imported = rule_file_imports()
    assert "benchlib.configuration.config" in imported  # the pattern finds the rule files' imports
    assert set(contract["source_modules"]) == imported, (
        f"set the parse-time contract's source_modules in pyproject.toml to {sorted(imported)}"
    )
    assert set(FAKE_TORCH) <= set(contract["forbidden_modules"])


@pytest.mark.workflow
def test_dry_run_works_with_torch_unimportable(tmp_path):
    fake = tmp_path / "fake"
    for name in FAKE_TORCH:
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text(
            f"raise ImportError('{name} imported while Snakemake parses the workflow')\n"
        )
    env = tool_env()  # the fake torch first, then the code under test (a worktree's own src)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(fake), env.get("PYTHONPATH")]))
    argv = ["snakemake", "-n", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path / "work")]
    done = subprocess.run(
        [*argv, f"--configfile={REPO / 'config' / 'demo.yaml'}", "--quiet", "rules"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run_cell" in done.stdout + done.stderr  # the whole demo DAG was planned


def test_each_report_kind_has_its_own_module_named_like_it_in_a_paper_folder():
    from benchlib.report.base import KINDS

    folders = {"common", "lightyear", "fedagain", "tfl"}
    for name, kind in KINDS.items():
        *package, folder, module = type(kind).__module__.split(".")
        assert package == ["benchlib", "report", "kinds"], (name, type(kind).__module__)
        assert folder in folders, f"report kind {name} is not in a paper folder"
        assert module == name, f"report kind {name} lives in module {module}"


# test folders that are not a package of src/benchlib: whole-workflow runs, the shipped configs,
# shared helpers and test data
NON_PACKAGE_TEST_FOLDERS = {"workflow", "configs", "helpers", "golden", "examples", "slurm"}


def test_the_test_folders_mirror_the_source_tree():
    tests, package = REPO / "tests", REPO / "src" / "benchlib"
    for folder in sorted(p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        relative = folder.relative_to(tests)
        if relative.parts[0] in NON_PACKAGE_TEST_FOLDERS:
            continue
        assert (package / relative).is_dir(), f"tests/{relative} has no src/benchlib/{relative}"


def test_test_modules_share_helpers_only_through_conftest_and_helpers():
    names = {p.stem for p in (REPO / "tests").rglob("test_*.py")}
    for path in sorted((REPO / "tests").rglob("*.py")):
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("from", "import"):
                module = words[1].split(".")[0]
                assert module not in names, f"{path}: imports test module {module}; use helpers/"


# Config data: what a config file, a report's parameters or a spec built from them holds. The
# config fills every declared default when it loads, so code that reads config data indexes it;
# a ``.get(key, default)`` on it would be a second declaration of a default. These are the ones
# that remain (src path, the call) -> why.
CONFIG_RECEIVERS = {"spec", "params", "exp", "ds", "dataset", "entry", "model", "section",
                    "training", "options", "settings", "raw", "row", "panel", "config"}  # fmt: skip
# fmt: off
CONFIG_FALLBACKS = {
    ("commands/bench/cells.py", "raw.get('axes', {})"):
        "a benchmark's partial spec, not a config: the fill site of the keys a bench leaves out",
    ("commands/bench/cells.py", "raw.get('held_out', ())"):
        "a benchmark's partial spec, not a config: the fill site of the keys a bench leaves out",
    ("commands/bench/cells.py", "raw.get('plugins', {})"):
        "a benchmark's partial spec, not a config: the fill site of the keys a bench leaves out",
    ("commands/bench/cells.py", "raw.get('task', 'classification')"):
        "a benchmark's partial spec, not a config: the fill site of the keys a bench leaves out",
    ("commands/docs_gen.py", "section.get('required', ())"):
        "reads the config schema's file, not a config: a section without required keys omits it",
    ("models/catalog.py", "model.get('init', MODEL_INIT.default)"):
        "the fill site of a model section: reads the declared default",
    ("configuration/config.py", "ds.get('params', {})"):
        "checks the file's own entry before its params are filled on the next line",
    ("configuration/config.py", "ds.get('task', DEFAULT_TASK)"):
        "the fill site of a dataset entry (DatasetEntry.from_config): the default task",
    ("configuration/config.py", "ds.get('label', name)"):
        "the fill site of a dataset entry: tables name a dataset by its id by default",
    ("configuration/config.py", "ds.get('held_out', ())"):
        "the fill site of a dataset entry: no held-out clients by default",
    ("commands/cli.py", "spec.get('task', DEFAULT_TASK)"):
        "benchlib prepare takes a hand-written --spec too; the same constant the config fills",
    ("commands/html_report.py", "spec.get('title', tex.stem)"):
        "benchlib table-html --settings is optional and may be hand-written",
    ("commands/html_report.py", "spec.get('settings', {})"):
        "benchlib table-html --settings is optional and may be hand-written",
    ("commands/html_report.py", "spec.get('title', 'Targets')"):
        "benchlib report-status --spec may be hand-written",
    ("report/base.py", "config.experiments[experiment].get('title', experiment)"):
        "an experiment's title is optional (browse shows untitled ones by id); its one fallback",
    ("report/kinds/lightyear/topology_figure.py",
     "entry.get('label', config.method_label(entry['method']))"):
        "a line's label is optional; it falls back to the method's label, not a constant",
    ("report/claim_verdicts.py", "row['ids'][exp].get(name, f'{name} (no cell)')"):
        "an experiment that does not run a compared method has no id for it: the placeholder "
        "names the cell the claim misses",
    ("report/claim_verdicts.py", "row['source'].get(experiment, {})"):
        "a claims spec's source is a sparse map: only methods another experiment gives",
    ("report/kinds/common/claims.py", "row['homes'].get(experiment, {})"):
        "a claims spec's homes is a sparse map: only cells a reading variant shares",
    ("report/kinds/tfl/tfl_table.py", "spec['transmissions'].get(method_id, 1)"):
        "transmissions is a sparse map (declared: methods not named send 1 model a round)",
    ("report/kinds/tfl/tfl_table.py", "spec['quoted'].get(r['label'], {})"):
        "quoted is a sparse map: the paper prints numbers for some rows only",
    ("report/kinds/tfl/tfl_table.py",
     "spec['cells'].get(f\"{row['experiment']}/{method_id}\", [])"):
        "a hand-written spec may lack a cell list; the next line names it in a clear error",
    ("data/download.py", "params.get(remote.url_param, remote.url)"):
        "optional per-dataset override (declared unset); the pinned URL is the remote file's",
    ("data/download.py", "params.get(remote.sha256_param, remote.sha256)"):
        "optional per-dataset override (declared unset); the pinned sha256 is the remote file's",
    ("data/download.py", "params.get(remote.md5_param, remote.md5)"):
        "optional per-dataset override (declared unset); the pinned md5 is the remote file's",
    ("data/download.py", "params.get(remote.size_param, remote.size)"):
        "optional per-dataset override (declared unset); the pinned size is the remote file's",
    ("data/sources/chexmask.py", "params.get('chexmask_url', CHEXMASK_URL)"):
        "optional override of the masks CSV's URL (declared unset), as for every remote file",
    ("data/sources/isic2019.py", "params.get('store_side', side)"):
        "declared unset: absent means the stored side equals the preprocessing side",
    ("grid/axes.py", "section.get(malfunction, {})"):
        "merges a grid axis value into a malfunction section the file may not have",
    ("configuration/config.py", "exp['cell_experiments'].get(method, experiment)"):
        "only reading axes share cells: a method without an entry runs in its own experiment",
}
# fmt: on


def config_fallbacks() -> set[tuple[str, str]]:
    """Every ``<config data>.get(key, default)`` call in src/benchlib: (path, source)."""
    import ast

    root = REPO / "src" / "benchlib"
    found = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and len(node.args) == 2
            ):
                continue
            receiver = node.func.value
            while isinstance(receiver, ast.Subscript | ast.Attribute):
                receiver = receiver.value
            if isinstance(receiver, ast.Name) and receiver.id in CONFIG_RECEIVERS:
                found.add((path.relative_to(root).as_posix(), ast.unparse(node)))
    return found


def test_config_data_is_read_without_second_defaults():
    found = config_fallbacks()
    assert ("report/base.py", "config.experiments[experiment].get('title', experiment)") in found
    new = sorted(found - set(CONFIG_FALLBACKS))
    assert not new, (
        "these calls give config data a second default; fill it where the config loads (a "
        f"declared Param or the entry's defaults) and index it, or add the reason here: {new}"
    )
    stale = sorted(set(CONFIG_FALLBACKS) - found)
    assert not stale, f"remove these entries, the calls are gone: {stale}"
