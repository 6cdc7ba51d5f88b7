"""Three dependency lists agree: pyproject.toml declares compatible ranges and extras (what
`pip install benchlib[...]` accepts), envs/constraints.txt pins the exact versions `make` installs,
and envs/benchlib.yaml (the conda environment of the workflow rules) pins the same versions."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from packaging.requirements import Requirement

PYPROJECT = REPO / "pyproject.toml"
CONSTRAINTS = REPO / "envs" / "constraints.txt"
CONDA_ENV = REPO / "envs" / "benchlib.yaml"
PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!-]+)\s*$")
# What the conda environment of the rules holds: the library and the papers' workflow.
CONDA_EXTRAS = ("workflow", "medical", "fedagain")


def canonical(name: str) -> str:
    """PEP 503 normalised project name: Foo_Bar and foo-bar are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(lines: list[str], source: str) -> dict[str, str]:
    """Package -> version of ``name==version`` lines (comments and blanks skipped)."""
    pins: dict[str, str] = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = PIN.match(line)
        assert match, f"{source}: {line!r} is not an exact pin (name==version)"
        name = canonical(match.group(1))
        assert name not in pins, f"{source}: {name} is listed twice"
        pins[name] = match.group(2)
    return pins


def project(path: Path = PYPROJECT) -> dict:
    return tomllib.loads(path.read_text())["project"]


def requirements(
    path: Path = PYPROJECT, extras: tuple[str, ...] | None = None
) -> list[Requirement]:
    """Base requirements plus those of ``extras`` (default: every extra), self-references
    (``benchlib[...]``) left out."""
    meta = project(path)
    chosen = meta["optional-dependencies"] if extras is None else extras
    lines = list(meta["dependencies"])
    for extra in chosen:
        lines += meta["optional-dependencies"][extra]
    return [r for r in map(Requirement, lines) if canonical(r.name) != "benchlib"]


def constraint_pins(path: Path = CONSTRAINTS) -> dict[str, str]:
    return parse_pins(path.read_text().splitlines(), path.name)


def conda_pip_pins(path: Path = CONDA_ENV) -> dict[str, str]:
    """The pip: list of a conda environment file, without the editable install of benchlib."""
    env = yaml.safe_load(path.read_text())
    lists = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(lists) == 1, f"{path.name}: expected one pip: list, found {len(lists)}"
    lines = [str(line) for line in lists[0] if not str(line).startswith(("-e ", "--editable"))]
    return parse_pins(lines, f"{path.name} pip:")


def range_problems(pyproject: Path, constraints: Path) -> list[str]:
    """Every requirement of pyproject.toml must be pinned in the constraints, inside its range."""
    pins = constraint_pins(constraints)
    problems = []
    for req in requirements(pyproject):
        pinned = pins.get(canonical(req.name))
        if pinned is None:
            problems.append(f"{req.name}: {constraints.name} has no pin")
        elif not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req.name}: {constraints.name} pins {pinned}, outside {req}")
    return problems


def conda_problems(pyproject: Path, constraints: Path, conda_env: Path) -> list[str]:
    """The conda env pins exactly the direct requirements of base + CONDA_EXTRAS, at the
    constraints' versions."""
    pins, conda = constraint_pins(constraints), conda_pip_pins(conda_env)
    wanted = {canonical(r.name) for r in requirements(pyproject, CONDA_EXTRAS)}
    problems = [
        f"{name}: {constraints.name} pins {pins.get(name, '(missing)')}, "
        f"{conda_env.name} pins {conda.get(name, '(missing)')}"
        for name in sorted(wanted)
        if conda.get(name) != pins.get(name)
    ]
    problems += [
        f"{name}: {conda_env.name} pins it but no requirement names it"
        for name in sorted(set(conda) - wanted)
    ]
    return problems


def test_every_requirement_is_pinned_inside_its_range():
    assert not range_problems(PYPROJECT, CONSTRAINTS)


def test_the_conda_env_pins_the_locked_versions():
    assert not conda_problems(PYPROJECT, CONSTRAINTS, CONDA_ENV)


def test_the_base_install_leaves_the_workflow_and_heavy_extras_out():
    base = {canonical(Requirement(line).name) for line in project()["dependencies"]}
    for optional in (
        "snakemake",
        "snakemake-executor-plugin-slurm",
        "monai",
        "imagecorruptions-imaug",
        "nibabel",
        "flwr",
        "tensorboard",
    ):
        assert optional not in base
    extras = project()["optional-dependencies"]
    assert {"workflow", "medical", "fedagain", "bench", "tracking", "all", "dev"} <= set(extras)
    assert all(r.specifier and "==" not in str(r.specifier) for r in requirements())


def test_make_installs_the_constraints():
    makefile = (REPO / "Makefile").read_text()
    assert "pip install -c envs/constraints.txt -e '.[all,dev]'" in makefile
    assert "$(STAMP): pyproject.toml envs/constraints.txt" in makefile


def test_editable_benchlib_line_is_kept_in_the_conda_env():
    env = yaml.safe_load(CONDA_ENV.read_text())
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert "-e ${BENCHLIB_ROOT}" in pip


# The checks themselves must catch drift: edit copies and look at what they report.
PINNED = constraint_pins()["snakemake"]


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        (
            "constraints",
            f"snakemake=={PINNED}\n",
            "snakemake==8.0.0\n",
            "snakemake: constraints.txt pins 8.0.0, outside snakemake<10,>=9.0",
        ),
        ("constraints", f"snakemake=={PINNED}\n", "", "snakemake: constraints.txt has no pin"),
        (
            "pyproject",
            '"snakemake>=9.0,<10"',
            '"snakemake>=9.0,<10", "extra-pkg>=1"',
            "extra-pkg: constraints.txt has no pin",
        ),
    ],
    ids=["pin-outside-range", "pin-dropped", "requirement-added"],
)
def test_range_drift_is_reported(tmp_path, file, old, new, expected):
    copies = {"pyproject": tmp_path / "pyproject.toml", "constraints": tmp_path / "constraints.txt"}
    copies["pyproject"].write_text(PYPROJECT.read_text())
    copies["constraints"].write_text(CONSTRAINTS.read_text())
    text = copies[file].read_text()
    assert text.count(old) == 1, f"{old!r} is not in the {file} copy exactly once"
    copies[file].write_text(text.replace(old, new))
    assert range_problems(copies["pyproject"], copies["constraints"]) == [expected]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            f"      - snakemake=={PINNED}\n",
            "      - snakemake==0.0.1\n",
            f"snakemake: constraints.txt pins {PINNED}, benchlib.yaml pins 0.0.1",
        ),
        (
            f"      - snakemake=={PINNED}\n",
            "",
            f"snakemake: constraints.txt pins {PINNED}, benchlib.yaml pins (missing)",
        ),
        (
            f"      - snakemake=={PINNED}\n",
            f"      - snakemake=={PINNED}\n      - extra-pkg==1.0\n",
            "extra-pkg: benchlib.yaml pins it but no requirement names it",
        ),
    ],
    ids=["conda-bumps", "conda-drops", "conda-adds"],
)
def test_conda_drift_is_reported(tmp_path, old, new, expected):
    conda = tmp_path / "benchlib.yaml"
    text = CONDA_ENV.read_text()
    assert text.count(old) == 1
    conda.write_text(text.replace(old, new))
    assert conda_problems(PYPROJECT, CONSTRAINTS, conda) == [expected]


@pytest.mark.parametrize("line", ["numpy>=2", "numpy", "numpy==2.*", "numpy ~= 2.4"])
def test_loose_pins_are_refused(line):
    with pytest.raises(AssertionError, match="not an exact pin"):
        parse_pins([line], "somewhere")


def test_names_are_normalised():
    assert parse_pins(["Foo_Bar==1.0", "snakemake-executor-plugin-slurm==2.8.0"], "x") == {
        "foo-bar": "1.0",
        "snakemake-executor-plugin-slurm": "2.8.0",
    }
