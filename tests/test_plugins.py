"""Plugin discovery through the ``benchlib.plugins`` entry points, with an installed
distribution faked on disk (a ``.dist-info`` folder and a module on PYTHONPATH), so these run
without pip; tests/workflow/test_plugin_package.py installs a real package."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import REPO, tool_env


def fake_distribution(root: Path, name: str, module: str, source: str) -> None:
    """An installed distribution ``name`` 1.2.3 whose entry point imports ``module``."""
    info = root / f"{name.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[benchlib.plugins]\n{module} = {module}\n")
    (root / f"{module}.py").write_text(textwrap.dedent(source))


def run(root: Path, *argv: str) -> subprocess.CompletedProcess:
    env = tool_env()
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, *argv], env=env, capture_output=True, text=True, timeout=300, cwd=REPO
    )


MEDIAN = """
    from benchlib.methods.catalog import declare_method
    from benchlib.params import Param

    declare_method(
        "plugin_median",
        "benchlib.methods.fedmedian:FedMedian",
        "star",
        {},
        description="the built-in median, declared by a plugin",
    )
"""


def test_a_plugin_component_is_named_like_a_built_in_and_listed_with_its_package(tmp_path):
    fake_distribution(tmp_path, "my-plugin", "my_plugin_decl", MEDIAN)
    code = (
        "import sys, yaml; from benchlib.config import Config; from benchlib import plugins; "
        "raw = yaml.safe_load(open('config/smoke.yaml')); "
        "raw['methods']['fedavg']['method'] = 'plugin_median'; c = Config(raw); "
        "print(c.methods['fedavg']['method'], plugins.origin('method', 'plugin_median'), "
        "plugins.origin('method', 'fedavg'), 'torch' in sys.modules)"
    )
    done = run(tmp_path, "-c", code)
    assert done.returncode == 0, done.stderr
    import benchlib

    assert done.stdout.split() == [
        "plugin_median",
        "my-plugin",
        "1.2.3",
        "benchlib",
        benchlib.__version__,
        "False",  # a config that names a plugin's method still imports no torch
    ]
    listing = run(tmp_path, "-m", "benchlib.cli", "plugins", "--plugins-only")
    assert listing.returncode == 0, listing.stderr
    assert "installed plugins: my_plugin_decl (my-plugin 1.2.3)" in listing.stdout
    assert "method plugin_median  my-plugin 1.2.3" in listing.stdout


def test_a_broken_plugin_stops_the_config_check_with_its_name_and_error(tmp_path):
    fake_distribution(tmp_path, "broken-plugin", "broken_decl", "import no_such_module_xyz\n")
    done = run(tmp_path, "-m", "benchlib.cli", "check-config", "config/smoke.yaml")
    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("error: plugin 'broken_decl' (broken-plugin 1.2.3, module broken_decl)")
    assert "ModuleNotFoundError: No module named 'no_such_module_xyz'" in line
    assert "pip uninstall broken-plugin" in line
    listing = run(tmp_path, "-m", "benchlib.cli", "plugins")
    assert listing.returncode == 1
    assert "BROKEN broken_decl (broken-plugin 1.2.3)" in listing.stdout


def test_a_plugin_registering_a_built_in_name_is_refused(tmp_path):
    source = """
        from benchlib.methods.catalog import declare_method

        declare_method("fedavg", "benchlib.methods.fedavg:FedAvg", "star")
    """
    fake_distribution(tmp_path, "clash-plugin", "clash_decl", source)
    done = run(tmp_path, "-m", "benchlib.cli", "check-config", "config/smoke.yaml")
    assert done.returncode == 2
    assert "plugin 'clash_decl'" in done.stderr and "method 'fedavg' registered twice" in (
        done.stderr
    )
