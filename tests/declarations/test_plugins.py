"""Plugin discovery through the ``benchlib.plugins`` entry points, with an installed
distribution faked on disk (a ``.dist-info`` folder and a module on PYTHONPATH), so these run
without pip; tests/workflow/test_plugin_package.py installs a real package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, ops_run_args, tool_env


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
    from benchlib.declarations.params import Param

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
        "import sys, yaml; from benchlib.configuration.config import Config; "
        "from benchlib.declarations import plugins; "
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
    listing = run(tmp_path, "-m", "benchlib.commands.cli", "plugins", "--plugins-only")
    assert listing.returncode == 0, listing.stderr
    assert "installed plugins: my_plugin_decl (my-plugin 1.2.3)" in listing.stdout
    assert "method plugin_median  my-plugin 1.2.3" in listing.stdout


def test_a_broken_plugin_stops_the_config_check_with_its_name_and_error(tmp_path):
    fake_distribution(tmp_path, "broken-plugin", "broken_decl", "import no_such_module_xyz\n")
    done = run(tmp_path, "-m", "benchlib.commands.cli", "check-config", "config/smoke.yaml")
    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("error: plugin 'broken_decl' (broken-plugin 1.2.3, module broken_decl)")
    assert "ModuleNotFoundError: No module named 'no_such_module_xyz'" in line
    assert "pip uninstall broken-plugin" in line
    listing = run(tmp_path, "-m", "benchlib.commands.cli", "plugins")
    assert listing.returncode == 1
    assert "BROKEN broken_decl (broken-plugin 1.2.3)" in listing.stdout


def test_a_plugin_registering_a_built_in_name_is_refused(tmp_path):
    source = """
        from benchlib.methods.catalog import declare_method

        declare_method("fedavg", "benchlib.methods.fedavg:FedAvg", "star")
    """
    fake_distribution(tmp_path, "clash-plugin", "clash_decl", source)
    done = run(tmp_path, "-m", "benchlib.commands.cli", "check-config", "config/smoke.yaml")
    assert done.returncode == 2
    assert "plugin 'clash_decl'" in done.stderr and "method 'fedavg' registered twice" in (
        done.stderr
    )


DATA_PLUGIN = """
    import numpy as np

    from benchlib.data.partition import register_partitioner
    from benchlib.data.registry import DatasetSource, register_dataset


    def build(out_dir, params):
        import pandas as pd

        from benchlib.data.store import write_store

        index = pd.DataFrame(
            {"sample_id": [f"s{i:03d}" for i in range(96)], "label": np.arange(96) % 2}
        )
        index["group"] = "g"
        pixels = np.random.default_rng(0).integers(0, 256, (96, 28, 28), dtype=np.uint8)
        # the manifest's own dataset name is the source's to choose: it names no registry entry
        write_store(out_dir, dataset="noise", index=index, pixels=pixels, num_classes=2, sources=[])


    register_dataset(
        DatasetSource(name="plugin_noise", build=build, num_classes=2, image_shape=(1, 28, 28))
    )


    @register_partitioner("plugin_alternate", {})
    def alternate(labels, groups, num_clients, rng):
        return np.arange(len(labels)) % num_clients
"""
DATA_PACKAGE = {"package": "my-data-plugin", "version": "1.2.3"}


@pytest.mark.slow  # spawns benchlib run
def test_a_cell_records_the_plugin_behind_its_dataset_source_and_partitioner(
    tmp_path, smoke_cell_spec
):
    from benchlib.data.store_checks import manifest_checksum
    from benchlib.facts.digest import numbers_digest

    site, store, split = tmp_path / "site", tmp_path / "store", tmp_path / "split.csv"
    fake_distribution(site, "my-data-plugin", "my_data_decl", DATA_PLUGIN)
    dataset = {"dataset": "noise", "source": "plugin_noise"}
    done = run(
        site,
        "-m",
        "benchlib.commands.cli",
        "prepare",
        "--spec",
        json.dumps(dataset),
        "--out",
        str(store),
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["dataset_source"] == "plugin_noise" and manifest["dataset"] == "noise"
    dataset.update(
        clients=4,
        partition={"name": "plugin_alternate"},
        split={"val": 0.2, "test": 0.2, "seed": 0},
    )
    argv = ["split", "--spec", json.dumps(dataset), "--store", str(store), "--out", str(split)]
    done = run(site, "-m", "benchlib.commands.cli", *argv)
    assert done.returncode == 0, done.stderr
    # a built-in method, model and malfunction: only the data come from the plugin
    spec = dict(smoke_cell_spec("fedavg", "sfa", 1))
    spec["training"] = {**spec["training"], "rounds": 1}

    def provenance_and_digest(out: Path) -> tuple[dict, str]:
        done = run(site, "-m", "benchlib.commands.cli", *ops_run_args(spec, store, split, out))
        assert done.returncode == 0, done.stderr[-3000:]
        metrics = json.loads((out / "metrics.json").read_text())
        return metrics["provenance"], numbers_digest(metrics)

    provenance, digest = provenance_and_digest(tmp_path / "recorded")
    assert provenance["plugins"] == [DATA_PACKAGE]
    assert provenance["plugins_unknown"] == []

    # a store and a split written before either was recorded still run, with the same numbers,
    # and the cell says what it cannot know rather than claiming built-ins
    del manifest["dataset_source"]
    manifest["manifest_sha256"] = manifest_checksum(manifest)
    (store / "manifest.json").write_text(json.dumps(manifest))
    table = pd.read_csv(split, dtype=str)
    assert set(table["partitioner"]) == {"plugin_alternate"}
    table.drop(columns="partitioner").to_csv(split, index=False)
    provenance, again = provenance_and_digest(tmp_path / "older")
    assert provenance["plugins"] == []
    assert provenance["plugins_unknown"] == ["dataset source", "partitioner"]
    assert again == digest


def test_a_recorded_source_or_partitioner_that_no_package_registers_is_named_unknown(
    smoke_cell_spec,
):
    from benchlib.facts.provenance import plugins_used
    from benchlib.grid.spec import CellSpec

    spec = CellSpec.from_json(smoke_cell_spec("fedavg", "sfa", 1))
    assert plugins_used(spec, "mnist5k", "iid") == {"plugins": [], "plugins_unknown": []}
    assert plugins_used(spec, "uninstalled_source", None) == {
        "plugins": [],
        "plugins_unknown": ["dataset source uninstalled_source", "partitioner"],
    }
    assert plugins_used(spec, None, "uninstalled_partitioner")["plugins_unknown"] == [
        "dataset source",
        "partitioner uninstalled_partitioner",
    ]


def test_the_components_a_spec_names_include_its_task_grid_axes_and_readings(smoke_cell_spec):
    import dataclasses

    from benchlib.grid.spec import CellSpec

    spec = CellSpec.from_json(smoke_cell_spec("fedavg", "sfa", 1))
    axes = {"clients": 3, "reading.some_choice": "b", "ana.scale": 10.0}
    assert dataclasses.replace(spec, axes=axes).components() == [
        ("method", "fedavg"),
        ("model", "femnist_cnn"),
        ("malfunction", "sfa"),
        ("task", "classification"),
        ("task implementation", "classification"),
        ("grid axis", "clients"),
        ("reading", "some_choice"),
    ]  # ana's parameter does not reach an sfa cell
