"""The package's layering holds: `lint-imports` keeps every contract in pyproject.toml's
[tool.importlinter] (e.g. the methods never import the engine, not even for type hints)."""

from __future__ import annotations

import shutil
import subprocess
import tomllib

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
    sources = {c["source_modules"][0] for c in config["contracts"]}
    assert {"benchlib.methods", "benchlib.report", "benchlib.models", "benchlib.metrics"} <= sources
