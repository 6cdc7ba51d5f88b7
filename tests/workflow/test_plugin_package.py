"""The worked plugin (examples/benchlib-fedavgm), installed with pip into a fresh environment,
runs through real Snakemake from a project folder outside the checkout that imports benchlib's
workflow as a Snakemake module; no file of benchlib changes.

The fresh environment reuses this environment's installed packages (a ``.pth`` that adds its
site-packages), so nothing is downloaded: pip builds and installs only the plugin.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "benchlib-fedavgm"
PACKAGE = ("benchlib-fedavgm", "0.1.0")


def _git_status(*paths: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=all", *paths],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _fresh_environment(root: Path) -> Path:
    """A new venv that sees this environment's packages; returns its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    # addsitedir (not a plain path line) so that the .pth files there (benchlib's editable
    # install) apply too
    Path(site, "reuse_project_packages.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    script = root / "bin" / "benchlib"  # the console script, bound to this environment
    script.write_text(f"#!{python}\nimport sys\nfrom benchlib.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return root / "bin"


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: int = 900) -> str:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def _project_config() -> dict:
    """A copy of the smoke grid on the plugin's dataset source, with the plugin's method (and a
    momentum-free FedAvgM, which must reproduce FedAvg exactly)."""
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    dataset = config["datasets"].pop("mnist5k")
    dataset["source"] = "mnist5k_inverted"
    config["datasets"]["inverted"] = dataset
    config["methods"]["fedavgm"] = {"label": "FedAvgM", "params": {"momentum": 0.5}}
    config["methods"]["fedavgm_plain"] = {
        "method": "fedavgm",
        "label": "FedAvgM (beta 0)",
        "params": {"momentum": 0.0},
    }
    experiment = config["experiments"].pop("smoke")
    experiment.update(
        dataset="inverted",
        methods=["local", "fedavg", "lightyear", "fedavgm", "fedavgm_plain"],
        malfunctions=["sfa"],
        k=[0, 1],
    )
    config["experiments"]["plugin"] = experiment
    config["reports"] = {"plugin_ranking": {"kind": "ranking", "experiments": ["plugin"]}}
    return config


@pytest.fixture(scope="module")
def plugin_project(tmp_path_factory) -> tuple[Path, dict[str, str], str]:
    """The plugin installed in a fresh environment, a project folder importing benchlib as a
    module, and its finished run: (project folder, environment, git status before)."""
    before = _git_status("src")
    root = tmp_path_factory.mktemp("plugin")
    bin_dir = _fresh_environment(root / "venv")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["BENCHLIB_DEVICE"] = "cpu"
    env["PLUGIN_PYTHON"] = str(bin_dir / "python")
    env.pop("PYTHONPATH", None)
    source = shutil.copytree(EXAMPLE, root / "benchlib-fedavgm")  # pip builds in its tree
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "--no-index"]
    _run([*pip, "--no-build-isolation", "--quiet", str(source)], env, root)

    project = root / "my-benchmark"
    (project / "config").mkdir(parents=True)
    (project / "config" / "plugin.yaml").write_text(yaml.safe_dump(_project_config()))
    (project / "Snakefile").write_text(
        textwrap.dedent(f"""\
            configfile: "config/plugin.yaml"


            module benchlib:
                snakefile:
                    "{REPO / "Snakefile"}"
                config:
                    config


            use rule * from benchlib
            """)
    )
    snakemake = [str(bin_dir / "python"), "-m", "snakemake", "--cores", "2"]
    _run(snakemake, env, project, timeout=1500)
    return project, env, before


def test_the_plugin_is_listed_with_its_package(plugin_project):
    project, env, _ = plugin_project
    out = _run(["benchlib", "plugins", "--plugins-only"], env, project)
    assert "installed plugins: fedavgm (benchlib-fedavgm 0.1.0)" in out
    lines = {" ".join(line.split()) for line in out.splitlines()}
    assert "method fedavgm benchlib-fedavgm 0.1.0" in lines
    assert "dataset source mnist5k_inverted benchlib-fedavgm 0.1.0" in lines
    assert not any(line.startswith("method fedavg ") for line in lines)  # built-ins left out


def test_the_plugin_method_is_a_row_of_the_table_and_its_cells_record_the_plugin(plugin_project):
    project, _, _ = plugin_project
    table = (project / "tables" / "plugin_sfa.tex").read_text()
    assert "FedAvgM" in table and "FedAvgM (beta 0)" in table
    metrics = json.loads(
        (project / "results/runs/plugin/sfa/fedavgm/k1/seed0/metrics.json").read_text()
    )
    assert metrics["provenance"]["plugins"] == [{"package": PACKAGE[0], "version": PACKAGE[1]}]
    assert metrics["method_summary"] == {"server_lr": 1.0, "momentum": 0.5}
    assert metrics["config"]["method_params"]["momentum"] == 0.5
    builtin = json.loads(
        (project / "results/runs/plugin/sfa/fedavg/k1/seed0/metrics.json").read_text()
    )
    # a built-in method on the plugin's dataset source: its numbers depend on the plugin too
    assert builtin["provenance"]["plugins"] == [{"package": PACKAGE[0], "version": PACKAGE[1]}]
    assert builtin["provenance"]["plugins_unknown"] == []


def test_the_plugin_method_is_ranked(plugin_project):
    project, _, _ = plugin_project
    assert (project / "figures" / "plugin_ranking.pdf").stat().st_size > 0
    ranking = pd.read_csv(project / "figures" / "plugin_ranking.csv")
    assert set(ranking["method"]) == {"FedAvgM", "FedAvgM (beta 0)", "FedAvg", "LIGHTYEAR", "Local"}
    assert ranking.loc[ranking["method_id"] == "fedavgm", "mean_rank"].notna().all()


def test_fedavgm_without_momentum_reproduces_fedavg_exactly(plugin_project):
    project, _, _ = plugin_project
    collected = pd.read_csv(project / "results" / "collected" / "plugin" / "sfa.csv")
    metric = [c for c in collected.columns if c.startswith("test_")]
    for k in (0, 1):
        rows = collected[collected["k"] == k]
        fedavg = rows[rows["method_id"] == "fedavg"][metric].to_numpy()
        plain = rows[rows["method_id"] == "fedavgm_plain"][metric].to_numpy()
        momentum = rows[rows["method_id"] == "fedavgm"][metric].to_numpy()
        assert fedavg.shape == plain.shape and (fedavg == plain).all(), k
        assert not (fedavg == momentum).all(), k  # momentum 0.5 is another method


def test_the_plugin_store_is_the_inverted_mnist(plugin_project, mnist_store):
    import numpy as np

    project, _, _ = plugin_project
    inverted = np.load(project / "results" / "data" / "inverted" / "pixels.npy")
    original = np.load(mnist_store / "pixels.npy")
    assert inverted.dtype == np.uint8 and (inverted.astype(int) == 255 - original).all()


def test_the_registry_driven_method_test_runs_the_plugin_method(plugin_project):
    _, env, _ = plugin_project
    pytest_argv = [env["PLUGIN_PYTHON"], "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    test = "tests/methods/test_every_method.py"
    out = _run([*pytest_argv, test, "-k", "fedavgm"], env, REPO)
    assert "1 passed" in out  # collected from the registry, where only the plugin adds it


def test_no_file_of_benchlib_changed(plugin_project):
    _, _, before = plugin_project
    assert _git_status("src") == before


def test_the_guide_quotes_the_example_package_verbatim():
    import re

    guide = (REPO / "docs" / "guide" / "plugins.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, re.S)
    package = EXAMPLE / "src" / "benchlib_fedavgm"
    for name in ("declarations.py", "method.py"):
        assert (package / name).read_text() in blocks, name
