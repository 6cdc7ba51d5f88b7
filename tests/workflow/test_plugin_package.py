"""The worked plugin (examples/benchlib-fedavgm), installed with pip into a fresh environment
next to a pip-installed (not editable) benchlib, runs through real Snakemake from project folders
outside the checkout that import benchlib's workflow as a Snakemake module; no file of benchlib
changes. One project runs the smoke grid with the plugin's method, source and report kind; the
other puts the plugin's method into the paper's Table 2 (FEMNIST, on a test-size LEAF sample).

The fresh environment reuses this environment's installed packages (a ``.pth`` that adds its
site-packages), so nothing is downloaded: pip builds and installs only benchlib and the plugin.
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
from helpers.femnist_sample import LEAF_SAMPLE

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


def _git_status_tracked() -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


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
    script.write_text(
        f"#!{python}\nimport sys\nfrom benchlib.commands.cli import main\nsys.exit(main())\n"
    )
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
    config["reports"] = {
        "plugin_ranking": {"kind": "ranking", "experiments": ["plugin"]},
        "plugin_worst": {"kind": "worst_client", "experiment": "plugin", "malfunction": "sfa"},
    }
    return config


def _module_project(project: Path, config: dict) -> Path:
    """A project folder whose Snakefile imports benchlib's workflow as a module."""
    (project / "config").mkdir(parents=True)
    (project / "config" / "project.yaml").write_text(yaml.safe_dump(config))
    (project / "Snakefile").write_text(
        textwrap.dedent(f"""\
            configfile: "config/project.yaml"


            module benchlib:
                snakefile:
                    "{REPO / "Snakefile"}"
                config:
                    config


            use rule * from benchlib
            """)
    )
    return project


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh environment with benchlib installed from this checkout with pip (not editable,
    so no file of the checkout is on its path) and the plugin: (root folder, environment)."""
    root = tmp_path_factory.mktemp("plugin")
    bin_dir = _fresh_environment(root / "venv")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["BENCHLIB_DEVICE"] = "cpu"
    env["PLUGIN_PYTHON"] = str(bin_dir / "python")
    env.pop("PYTHONPATH", None)
    env.pop("BENCHLIB_HOME", None)
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "--no-index"]
    _run([*pip, "--no-build-isolation", "--quiet", str(REPO)], env, root)
    source = shutil.copytree(EXAMPLE, root / "benchlib-fedavgm")  # pip builds in its tree
    _run([*pip, "--no-build-isolation", "--quiet", str(source)], env, root)
    return root, env


@pytest.fixture(scope="module")
def plugin_project(plugin_env) -> tuple[Path, dict[str, str], str]:
    """The smoke grid with the plugin's components, run in a project folder: (project folder,
    environment, git status before)."""
    before = _git_status("src")
    root, env = plugin_env
    project = _module_project(root / "my-benchmark", _project_config())
    snakemake = [env["PLUGIN_PYTHON"], "-m", "snakemake", "--cores", "2"]
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


def test_check_method_runs_the_every_method_checks_on_the_plugin_method(plugin_env):
    root, env = plugin_env
    out = _run(["benchlib", "check-method", "fedavgm"], env, root)  # no checkout, no pytest
    assert "ok: fedavgm (paper) trains 2 rounds, resumed after round 1 to the same bytes" in out


def test_the_plugin_report_kind_renders_the_worst_client(plugin_project):
    project, _, _ = plugin_project
    table = (project / "tables" / "plugin_worst.tex").read_text().splitlines()
    collected = pd.read_csv(project / "results" / "collected" / "plugin" / "sfa.csv")
    assert table[1] == "method & k=0 & k=1 \\\\"
    for method_id, label in (("fedavgm", "FedAvgM"), ("local", "Local")):
        cells = []
        for k in (0, 1):
            rows = collected[(collected["method_id"] == method_id) & (collected["k"] == k)]
            accuracy = [100 * float(a) for a in rows["test_accuracy"]]  # one seed: one per client
            assert len(accuracy) == 4
            cells.append(f"{sum(accuracy) / 4:.1f} / {min(accuracy):.1f}")
        assert f"{label} & {cells[0]} & {cells[1]} \\\\" in table


def test_a_pip_installed_benchlib_records_its_commit(plugin_project):
    project, env, _ = plugin_project
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    metrics = json.loads(
        (project / "results/runs/plugin/sfa/fedavg/k1/seed0/metrics.json").read_text()
    )
    provenance = metrics["provenance"]
    assert (provenance["commit"], provenance["installed_from"]) == (head, "git clone")
    assert provenance["dirty"] is bool(_git_status_tracked())
    out = _run(["benchlib", "--version"], env, project)
    assert out.startswith(f"benchlib 0.1.0 (commit {head[:12]}")
    assert "installed from a git clone" in out


def test_no_file_of_benchlib_changed(plugin_project):
    _, _, before = plugin_project
    assert _git_status("src") == before


def test_the_guide_quotes_the_example_package_verbatim():
    import re

    guide = (REPO / "docs" / "guide" / "plugins.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, re.S)
    package = EXAMPLE / "src" / "benchlib_fedavgm"
    for name in ("declarations.py", "method.py", "report.py"):
        assert (package / name).read_text() in blocks, name


# ------------------------------------------------ the plugin's method in the paper's Table 2
PAPER_METHODS = ["fedavg_authors", "lightyear"]  # two of the paper's ten rows, at test size
K = [1, 4]  # two of the paper's k (its reports name k = 4)


def _small_leaf_sample(folder: Path, writers: int = 2, train: int = 16, test: int = 4) -> Path:
    """The real LEAF FEMNIST sample shrunk to test size: every shard keeps its first writers,
    each with its first images."""
    for split, keep in (("train", train), ("test", test)):
        (folder / split).mkdir(parents=True)
        for path in sorted((LEAF_SAMPLE / split).glob("*.json")):
            data = json.loads(path.read_text())
            users = data["users"][:writers]
            user_data = {
                u: {key: data["user_data"][u][key][:keep] for key in ("x", "y")} for u in users
            }
            small = {
                "users": users,
                "num_samples": [len(user_data[u]["y"]) for u in users],
                "user_data": user_data,
            }
            (folder / split / path.name).write_text(json.dumps(small))
    return folder


def _paper_config(sample: Path, with_plugin: bool) -> dict:
    """Laid over the paper grids: FEMNIST's experiment on the test-size sample, with two of the
    paper's methods and k; with the plugin, FedAvgM added to it."""
    config = {
        "paper_grids": True,
        "datasets": {
            "femnist_small": {
                "label": "FEMNIST (LEAF sample, test size)",
                "source": "femnist_leaf",
                "params": {"path": str(sample)},
                "clients": 8,
                "partition": {"name": "leaf-shards"},
                "split": {"mode": "random", "val": 0.25, "test": 0.25, "seed": 0},
                "model": {"name": "femnist_cnn", "params": {"conv1": 4, "conv2": 8, "hidden": 16}},
                "training": {
                    "optimizer": "adam",
                    "lr": 0.001,
                    "batch_size": 8,
                    "local_epochs": 1,
                    "rounds": 1,
                },
                "malfunction": {"placement": "first", "ana": {"scale": 120.5}},
            }
        },
        "experiments": {"femnist": {"dataset": "femnist_small", "methods": PAPER_METHODS, "k": K}},
    }
    if with_plugin:
        config["methods"] = {"fedavgm": {"label": "FedAvgM"}}
        config["add_methods"] = {"fedavgm": ["femnist"]}
    return config


def _job_counts(dry_run: str) -> dict[str, int]:
    """Snakemake's job stats table of a dry run: rule -> jobs."""
    counts: dict[str, int] = {}
    lines = dry_run.splitlines()
    start = lines.index("Job stats:") + 3
    for line in lines[start:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit() or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def _metrics_times(project: Path) -> dict[str, int]:
    runs = project / "results" / "runs" / "femnist"
    return {str(p.relative_to(runs)): p.stat().st_mtime_ns for p in runs.rglob("metrics.json")}


@pytest.fixture(scope="module")
def paper_project(plugin_env) -> dict:
    """Table 2 (tables/femnist_ana.tex) built from a project folder: first with the paper's
    methods, then with the plugin's method added (what the second dry run planned and which
    cells it wrote)."""
    root, env = plugin_env
    sample = _small_leaf_sample(root / "leaf_small")
    project = _module_project(root / "paper-project", _paper_config(sample, with_plugin=False))
    snakemake = ["benchlib", "forkserver", "--", env["PLUGIN_PYTHON"], "-m", "snakemake"]
    target = "tables/femnist_ana.tex"
    _run([*snakemake, "--cores", "2", target], env, project)
    paper_table = (project / target).read_text()
    before = _metrics_times(project)

    config = _paper_config(sample, with_plugin=True)
    (project / "config" / "project.yaml").write_text(yaml.safe_dump(config))
    planned = _job_counts(_run([*snakemake, "-n", target], env, project))
    _run([*snakemake, "--cores", "2", target], env, project)
    return {
        "project": project,
        "env": env,
        "paper_table": paper_table,
        "before": before,
        "after": _metrics_times(project),
        "planned": planned,
    }


def test_the_plugin_method_gets_its_row_in_table_2_training_only_its_cells(paper_project):
    before, after = paper_project["before"], paper_project["after"]
    assert len(before) == len(PAPER_METHODS) * len(K)
    assert {key: after[key] for key in before} == before  # no paper cell ran again
    new = sorted(set(after) - set(before))
    assert new == sorted(f"ana/fedavgm/k{k}/seed0/metrics.json" for k in K)
    assert paper_project["planned"]["run_cell"] == len(K)
    table = (paper_project["project"] / "tables" / "femnist_ana.tex").read_text()
    assert "FedAvgM" in table and "FedAvgM" not in paper_project["paper_table"]
    for label in ("FedAvg", "LIGHTYEAR"):
        assert label in paper_project["paper_table"] and label in table
    metrics = json.loads(
        (
            paper_project["project"] / "results/runs/femnist/ana/fedavgm/k1/seed0/metrics.json"
        ).read_text()
    )
    assert metrics["config"]["plugins"] == {PACKAGE[0]: PACKAGE[1]}  # in the cell's identity
    builtin = paper_project["project"] / "results/runs/femnist/ana/lightyear/k1/seed0/metrics.json"
    assert json.loads(builtin.read_text())["config"]["plugins"] == {}  # built-ins only


def test_every_paper_target_dry_runs_from_project_folders(paper_project, tmp_path):
    env = paper_project["env"]
    snakemake = [env["PLUGIN_PYTHON"], "-m", "snakemake", "-n", "--quiet", "rules"]
    _run(snakemake, env, paper_project["project"])  # rule all: every paper target
    empty = tmp_path / "empty"  # no config of its own: the paper grids as they are
    empty.mkdir()
    _run([*snakemake, "-s", str(REPO / "Snakefile")], env, empty)
    # the command line finds the paper grids bundled into the pip-installed package
    assert "tables/femnist_ana.tex" in _run(["benchlib", "targets"], env, empty).splitlines()


def test_a_target_the_config_cannot_build_is_one_line(plugin_env):
    root, env = plugin_env
    project = _module_project(root / "standalone", _project_config())  # has experiments
    done = subprocess.run(
        [env["PLUGIN_PYTHON"], "-m", "snakemake", "-n", "tables/femnist_ana.tex"],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "MissingRuleException" not in done.stderr
    assert (
        "error: tables/femnist_ana.tex is not a target of this config (benchlib targets CONFIG "
        "lists its targets); it is a paper target (config/paper/lightyear.yaml): set "
        "paper_grids: true"
    ) in done.stderr


def test_a_new_plugin_version_reruns_its_cells_only(paper_project):
    """Last in this module: it installs version 0.1.1 of the plugin, then 0.1.0 again."""
    project, env = paper_project["project"], paper_project["env"]
    root = project.parent
    newer = shutil.copytree(EXAMPLE, root / "benchlib-fedavgm-0.1.1")
    pyproject = newer / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "0.1.1"'))
    pip = [env["PLUGIN_PYTHON"], "-m", "pip", "install", "--no-deps", "--no-index", "--quiet"]
    _run([*pip, "--no-build-isolation", str(newer)], env, root)
    try:
        planned = _run(
            [env["PLUGIN_PYTHON"], "-m", "snakemake", "-n", "tables/femnist_ana.tex"], env, project
        )
        assert _job_counts(planned)["run_cell"] == len(K)  # FedAvgM's cells, no paper method
        assert "fedavgm" in planned and "method=lightyear" not in planned
        status = _run(
            ["benchlib", "status", "--config", "config/project.yaml", "tables/femnist_ana.tex"],
            env,
            project,
        )
        assert (
            "metrics.json made with plugins benchlib-fedavgm 0.1.0, now benchlib-fedavgm 0.1.1"
            in status
        )
    finally:
        _run([*pip, "--no-build-isolation", str(root / "benchlib-fedavgm")], env, root)
