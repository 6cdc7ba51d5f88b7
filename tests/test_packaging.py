"""The two dependency lists agree: pyproject.toml's [project] dependencies (what `make venv` and
`pip install -e .` install) and the pip: list of envs/benchlib.yaml (the conda environment of the
workflow rules) pin exactly the same packages to exactly the same versions."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import REPO

PYPROJECT = REPO / "pyproject.toml"
CONDA = "envs/benchlib.yaml"
CONDA_ENV = REPO / CONDA
PIN = re.compile(
    r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([A-Za-z0-9.+!-]+)\s*$"
)


def canonical(name: str) -> str:
    """PEP 503 normalised project name: Foo_Bar and foo-bar are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(requirements: list[str], source: str) -> dict[str, str]:
    """Package -> version of ``name==version`` lines; anything else is an error naming it."""
    pins: dict[str, str] = {}
    for line in requirements:
        match = PIN.match(line)
        assert match, f"{source}: {line!r} is not an exact pin (name==version)"
        name = canonical(match.group(1))
        assert name not in pins, f"{source}: {name} is listed twice"
        pins[name] = match.group(2)
    return pins


def pyproject_pins(path: Path) -> dict[str, str]:
    dependencies = tomllib.loads(path.read_text())["project"]["dependencies"]
    return parse_pins(dependencies, f"{path.name} [project] dependencies")


def conda_pip_pins(path: Path) -> dict[str, str]:
    """The pip: list of a conda environment file, without the editable install of benchlib."""
    env = yaml.safe_load(path.read_text())
    lists = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(lists) == 1, f"{path.name}: expected one pip: list, found {len(lists)}"
    lines = [str(line) for line in lists[0] if not str(line).startswith(("-e ", "--editable"))]
    return parse_pins(lines, f"{path.name} pip:")


def disagreements(pyproject: Path, conda_env: Path) -> list[str]:
    """One message per package pinned differently (or only once) in the two files."""
    left, right = pyproject_pins(pyproject), conda_pip_pins(conda_env)
    return [
        f"{name}: pyproject.toml pins {left.get(name, '(missing)')}, "
        f"envs/benchlib.yaml pins {right.get(name, '(missing)')}"
        for name in sorted(left.keys() | right.keys())
        if left.get(name) != right.get(name)
    ]


def test_pyproject_and_conda_env_pin_the_same_versions():
    problems = disagreements(PYPROJECT, CONDA_ENV)
    assert not problems, "pins disagree:\n" + "\n".join(problems)


def test_editable_benchlib_line_is_kept_in_the_conda_env():
    env = yaml.safe_load(CONDA_ENV.read_text())
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert "-e ${BENCHLIB_ROOT}" in pip


# The check itself must catch drift in either file: edit copies and look at what it reports.
PINNED = pyproject_pins(PYPROJECT)["snakemake"]
OURS = f"snakemake=={PINNED}"


def message(name: str, ours: str, theirs: str) -> str:
    return f"{name}: pyproject.toml pins {ours}, {CONDA} pins {theirs}"


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        ("pyproject", OURS, "snakemake==0.0.1", message("snakemake", "0.0.1", PINNED)),
        ("conda", OURS, "snakemake==0.0.1", message("snakemake", PINNED, "0.0.1")),
        ("pyproject", f'"{OURS}",', "", message("snakemake", "(missing)", PINNED)),
        ("conda", f"      - {OURS}\n", "", message("snakemake", PINNED, "(missing)")),
        (
            "pyproject",
            f'"{OURS}",',
            f'"{OURS}", "Extra_Pkg==1.0",',
            message("extra-pkg", "1.0", "(missing)"),
        ),
        (
            "conda",
            f"- {OURS}\n",
            f"- {OURS}\n      - extra-pkg==1.0\n",
            message("extra-pkg", "(missing)", "1.0"),
        ),
    ],
    ids=[
        "pyproject-bumps",
        "conda-bumps",
        "pyproject-drops",
        "conda-drops",
        "pyproject-adds",
        "conda-adds",
    ],
)
def test_drift_in_either_file_is_reported(tmp_path, file, old, new, expected):
    """A changed, dropped or added pin in either copy is the one disagreement, named with both
    versions."""
    (tmp_path / "envs").mkdir()
    copies = {"pyproject": tmp_path / "pyproject.toml", "conda": tmp_path / CONDA}
    copies["pyproject"].write_text(PYPROJECT.read_text())
    copies["conda"].write_text(CONDA_ENV.read_text())
    text = copies[file].read_text()
    assert text.count(old) == 1, f"{old!r} is not in the {file} copy exactly once"
    copies[file].write_text(text.replace(old, new))
    assert disagreements(copies["pyproject"], copies["conda"]) == [expected]


@pytest.mark.parametrize(
    "line", ["numpy>=2", "numpy", "numpy==2.*", "numpy==2.4,<3", "numpy ~= 2.4"]
)
def test_loose_pins_are_refused(line):
    with pytest.raises(AssertionError, match="not an exact pin"):
        parse_pins([line], "somewhere")


def test_names_are_normalised():
    assert parse_pins(["Foo_Bar==1.0", "snakemake-executor-plugin-slurm==2.8.0"], "x") == {
        "foo-bar": "1.0",
        "snakemake-executor-plugin-slurm": "2.8.0",
    }
