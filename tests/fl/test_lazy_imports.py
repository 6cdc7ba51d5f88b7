"""A cell imports only what its spec needs: a demo-like cell (small CNN, no transforms, LIGHTYEAR
and FedAvg) runs with torchvision, torchmetrics, MONAI, timm, matplotlib and scipy unimportable,
and scores exactly as the same cell in a process where they are importable."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, tool_env

pytestmark = pytest.mark.slow  # a fresh Python process that imports torch and trains

HEAVY = ("torchvision", "torchmetrics", "monai", "timm", "matplotlib", "scipy")

# Probing a blocked package (importlib.util.find_spec, as torch does) still works; executing it
# raises, and every attempt is recorded, so an import that a caller swallows is still seen.
SCRIPT = textwrap.dedent(
    """
    import importlib.abc, importlib.machinery, json, sys
    from pathlib import Path

    BLOCKED, ATTEMPTS = set(sys.argv[1].split(",")), []

    class Refuse(importlib.abc.Loader):
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            ATTEMPTS.append(module.__name__)
            raise ImportError(f"{module.__name__} is blocked by the test")

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in BLOCKED:
                return importlib.machinery.ModuleSpec(name, Refuse())
            return None

    sys.meta_path.insert(0, Block())
    import torch

    torch.set_num_threads(1)
    from benchlib.fl.engine import run_cell

    store, split, out = (Path(p) for p in sys.argv[2:5])
    for name, spec in json.loads(sys.argv[5]).items():
        run_cell(spec, store, split, out / name / "metrics.json", out / name / "checkpoints")
    in_cell = sorted(ATTEMPTS)
    from benchlib.fl.transforms import Transforms

    try:  # a dataset that normalises needs torchvision: the blocker must stop it
        Transforms({"normalize": {"mean": [0.5], "std": [0.5]}})
        refused = False
    except ImportError:
        refused = True
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print(json.dumps({"attempts": in_cell, "loaded": loaded, "refused": refused}))
    """
)


def numbers(path) -> dict:
    metrics = json.loads(path.read_text())
    metrics.pop("provenance")  # names the process (threads, versions), not the numbers
    return metrics


def test_demo_like_cell_runs_without_the_heavy_packages(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    from benchlib.fl.engine import run_cell

    specs = {}
    for method in ("lightyear", "fedavg"):
        spec = smoke_cell_spec(method, "sfa", k=1)
        spec["training"]["rounds"] = 1
        assert spec["transforms"]["train"] == [] and spec["model"]["name"] == "femnist_cnn"
        specs[method] = spec
    blocked = tmp_path / "blocked"
    argv = [sys.executable, "-c", SCRIPT, ",".join(HEAVY), mnist_store, smoke_split, blocked]
    result = subprocess.run(
        [*map(str, argv), json.dumps(specs)],
        env=tool_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"attempts": [], "loaded": [], "refused": True}
    for method, spec in specs.items():
        here = tmp_path / "here" / method
        run_cell(spec, mnist_store, smoke_split, here / "metrics.json", here / "checkpoints")
        lone = numbers(blocked / method / "metrics.json")
        assert lone == numbers(here / "metrics.json")
        assert {"test_f1_macro", "test_roc_auc"} <= set(lone["clients"][0])  # scored
