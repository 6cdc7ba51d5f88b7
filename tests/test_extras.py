"""The base install runs cells; a missing extra is one clear line naming the extra to install.

The optional packages are hidden the way an absent install behaves: a module on PYTHONPATH whose
import raises ModuleNotFoundError with the package's name.
"""

from __future__ import annotations

import json

import pytest
from conftest import ops_benchlib, ops_run_args, tool_env
from helpers.task_stores import groups_split, segmentation_store, task_cell_spec

from benchlib.primitives.errors import EXTRAS

pytestmark = pytest.mark.slow


def env_without(tmp_path, *packages: str) -> dict[str, str]:
    fake = tmp_path / "absent"
    for name in packages:
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name='{name}')\n"
        )
    return {**tool_env(), "PYTHONPATH": str(fake)}


def test_a_cell_runs_without_any_extra(smoke_cell_spec, mnist_store, smoke_split, tmp_path):
    spec = dict(smoke_cell_spec("lightyear", "sfa", 1))
    spec["training"] = {**spec["training"], "rounds": 1}
    out = tmp_path / "cell"
    done = ops_benchlib(
        *ops_run_args(spec, mnist_store, smoke_split, out), env=env_without(tmp_path, *EXTRAS)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "metrics.json").read_text())["clients"]


def test_a_segmentation_cell_without_monai_names_the_medical_extra(tmp_path):
    store = segmentation_store(tmp_path / "store")
    split = groups_split(store, tmp_path / "split.csv")
    out = tmp_path / "cell"
    done = ops_benchlib(
        *ops_run_args(task_cell_spec("segmentation"), store, split, out),
        env=env_without(tmp_path, "monai"),
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "error: monai is not installed; it comes with the medical extra: "
        "pip install 'benchlib[medical]'"
    )
    assert not (out / "metrics.json").exists()
