"""Native vs portable CPU kernels: the same cell timed both ways (``benchlib bench kernels``).

The kernel family is fixed when torch loads, so each run is a fresh ``benchlib run`` process;
the two settings alternate so that drifting machine load hits both alike. The time compared is
the sum of the cell's round times from its timing.json (no interpreter or torch start-up).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchlib.configuration.config import Cell, load_config
from benchlib.facts.digest import numbers_digest
from benchlib.primitives import cpu_kernels
from benchlib.primitives.errors import BenchlibError


def _run_once(spec: dict[str, Any], store: Path, split: Path, threads: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in cpu_kernels.PORTABLE_ENV}
    with tempfile.TemporaryDirectory(prefix="bench-kernels-") as tmp:
        out = Path(tmp)
        argv = {
            "--spec": json.dumps(spec),
            "--store": str(store),
            "--split": str(split),
            "--out": str(out / "m.json"),
            "--timing": str(out / "t.json"),
            "--checkpoints": str(out / "ck"),
            "--threads": str(threads),
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchlib.commands.cli",
                "run",
                *(x for kv in argv.items() for x in kv),
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise BenchlibError(f"the cell failed: {done.stderr.strip().splitlines()[-1:]}")
        metrics = json.loads((out / "m.json").read_text())
        timing = json.loads((out / "t.json").read_text())
    return {
        "seconds": sum(timing["round_seconds"]),
        "digest": numbers_digest(metrics),
        "kernels": metrics["provenance"]["cpu_kernels"],
    }


def run_kernel_benchmark(
    config_path: Path, cell: Cell, repeats: int = 3, threads: int = 1
) -> dict[str, float]:
    """Print each setting's median round time, the native/portable ratio and whether the two
    settings gave the same numbers on this machine; return the medians and the ratio."""
    config = load_config(config_path)
    spec = config.cell_spec(cell).to_dict()
    store, split = (Path(p) for p in config.cell_inputs(spec["dataset"]))
    for path in (store, split):
        if not path.exists():
            raise BenchlibError(
                f"{path} not found: prepare it first, e.g. snakemake --configfile={config_path} "
                f"--cores 2 {split}"
            )
    seconds: dict[str, list[float]] = {"native": [], "portable": []}
    digests: dict[str, set[str]] = {"native": set(), "portable": set()}
    for turn in range(repeats):
        for setting in ("native", "portable"):
            variant = {**spec, "training": {**spec["training"], "cpu_kernels": setting}}
            result = _run_once(variant, store, split, threads)
            seconds[setting].append(result["seconds"])
            digests[setting].add(result["digest"])
            kernels = result["kernels"]
            print(
                f"turn {turn + 1}/{repeats} {setting:8s} {result['seconds']:7.2f} s "
                f"(PyTorch {kernels['aten']}, oneDNN {kernels['onednn']})",
                flush=True,
            )
    medians = {setting: statistics.median(values) for setting, values in seconds.items()}
    ratio = medians["native"] / medians["portable"]
    same = digests["native"] == digests["portable"] and len(digests["native"]) == 1
    print(
        f"{config_path} {cell.experiment}/{cell.malfunction}/{cell.method}/k{cell.k}/"
        f"seed{cell.seed}: native {medians['native']:.2f} s, portable {medians['portable']:.2f} s "
        f"(median of {repeats}); native/portable time ratio {ratio:.2f}; numbers "
        + ("identical" if same else "DIFFER")
        + " between the settings on this machine"
    )
    return {**medians, "ratio": ratio}
