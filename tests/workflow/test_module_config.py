"""benchlib as a Snakemake module of another workflow (``module benchlib: config: config``, as
snakedeploy writes it) receives its config as a parsed dict: the config file behind it is read
with benchlib's strict loader all the same, and a config no file holds is refused."""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, tool_env

pytestmark = [pytest.mark.slow, pytest.mark.workflow]  # snakemake -n per case

SMOKE = (REPO / "config" / "smoke.yaml").read_text()
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(9)
)  # 10^10 leaves in 12 lines


def _duplicate_lr(text: str) -> str:
    indent, value = re.search(r"^(\s+)lr: (\S+)$", text, re.M).groups()
    return text.replace(f"{indent}lr: {value}\n", f"{indent}lr: {value}\n{indent}lr: 5.0\n", 1)


MODULE = """\
    {load}


    module benchlib:
        snakefile:
            "{snakefile}"
        config:
            {config}


    use rule * from benchlib
"""
FROM_FILE = ('configfile: "config/config.yaml"', "config")
FROM_PYTHON = ("import yaml", 'yaml.safe_load(open("config/config.yaml"))')

CASES = {
    "duplicate_key": (
        _duplicate_lr(SMOKE),
        FROM_FILE,
        "error: config file config/config.yaml: the key 'lr' appears twice, at lines",
    ),
    "alias_bomb": (
        SMOKE + ALIAS_BOMB,
        FROM_FILE,
        "error: config file config/config.yaml expands to more than 1,000,000 values",
    ),
    "config_no_file_holds": (
        SMOKE,
        FROM_PYTHON,
        "error: benchlib received a config that no config file holds",
    ),
}


def project(root: Path, text: str, how: tuple[str, str]) -> Path:
    (root / "config").mkdir(parents=True)
    (root / "config" / "config.yaml").write_text(text)
    load, config = how
    snakefile = MODULE.format(load=load, snakefile=REPO / "Snakefile", config=config)
    (root / "Snakefile").write_text(textwrap.dedent(snakefile))
    return root


def dry_run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["snakemake", "-n", "--cores", "1"], cwd=root, env=tool_env(),
                          capture_output=True, text=True, timeout=600)  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_module_config_is_checked_like_a_configfile(tmp_path, case):
    text, how, phrase = CASES[case]
    done = dry_run(project(tmp_path, text, how))
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(phrase), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "results").exists()


def test_a_module_config_from_its_file_plans_the_grid(tmp_path):
    done = dry_run(project(tmp_path, SMOKE, FROM_FILE))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "run_cell" in done.stdout
