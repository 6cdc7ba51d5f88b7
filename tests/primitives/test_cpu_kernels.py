"""Portable CPU kernels: the suite itself runs them, `benchlib run` sets them before torch loads,
and every cell records what it ran with (provenance) in metrics.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, ops_benchlib, ops_run_args, tool_env

import benchlib
from benchlib.declarations.settings import TrainingSettings
from benchlib.primitives import cpu_kernels

MINIMAL_TRAINING = {
    "optimizer": "adam",
    "lr": 0.1,
    "batch_size": 4,
    "local_epochs": 1,
    "rounds": 1,
}

X86_AVX2 = bool(cpu_kernels.host_has_avx2())


def env_without_caps(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in tool_env().items() if k not in cpu_kernels.PORTABLE_ENV}
    return {**env, **extra}


def test_the_suite_computes_with_portable_kernels():
    info = cpu_kernels.in_effect("portable")
    if X86_AVX2:  # every CI host: AVX2-only and AVX-512 machines alike
        assert info["aten"] == "AVX2" == torch.backends.cpu.get_cpu_capability()
        assert info["onednn"].endswith("AVX2"), info
        assert info["caps"] == dict(cpu_kernels.PORTABLE_ENV)
        assert info["portable"] is True
        assert cpu_kernels.mismatch_note(info) is None
    else:  # no AVX2 (or not x86-64): the run must say it cannot match, never claim it
        assert info["portable"] is False
        assert "need an x86-64 CPU with AVX2" in cpu_kernels.mismatch_note(info)


def test_apply_cannot_act_once_torch_is_loaded():
    before = dict(os.environ)
    assert cpu_kernels.apply("portable") is False  # torch is loaded in this process
    assert cpu_kernels.apply("native") is True
    assert dict(os.environ) == before


def test_unknown_setting_is_a_clear_error():
    with pytest.raises(
        benchlib.primitives.errors.BenchlibError, match="use one of portable, native"
    ):
        cpu_kernels.check_setting("avx512")
    assert TrainingSettings.from_config("t", MINIMAL_TRAINING).cpu_kernels == "portable"
    with pytest.raises(
        benchlib.primitives.errors.BenchlibError, match="cpu_kernels: 'avx512' is not one of"
    ):
        TrainingSettings.from_config("t", {**MINIMAL_TRAINING, "cpu_kernels": "avx512"})


PROBE = """
import json, sys
from benchlib.primitives import cpu_kernels
applied = cpu_kernels.apply(sys.argv[1])
import torch
print(json.dumps({"applied": applied, **cpu_kernels.in_effect(sys.argv[1])}))
"""


def probe(setting: str, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, setting], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_portable_overrides_other_levels_before_torch_initialises():
    # Lower caps prove each variable is a live lever on any AVX2 host (an AVX-512 host would
    # show the same with its native level): native keeps them, portable replaces them by AVX2.
    lowered = env_without_caps(ATEN_CPU_CAPABILITY="default", ONEDNN_MAX_CPU_ISA="SSE41")
    if not X86_AVX2:  # the x86 levels do not exist here: portable must say it is not in effect
        assert probe("portable", lowered)["portable"] is False
        return
    native = probe("native", lowered)
    assert (native["aten"], native["onednn"]) == ("DEFAULT", "Intel SSE4.1")
    assert native["portable"] is False
    portable = probe("portable", lowered)
    assert portable["applied"] is True
    assert portable["aten"] == "AVX2" and portable["onednn"] == "Intel AVX2"
    assert portable["caps"] == dict(cpu_kernels.PORTABLE_ENV) and portable["portable"] is True


def tiny_spec(smoke_cell_spec, kernels: str) -> dict:
    spec = dict(smoke_cell_spec("fedavg", "sfa", 1))
    spec["training"] = {**spec["training"], "rounds": 1, "cpu_kernels": kernels}
    return spec


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout


@pytest.mark.slow
def test_benchlib_run_sets_the_cells_kernels_and_records_provenance(
    smoke_cell_spec, mnist_store, smoke_split, tmp_path
):
    records = {}
    for kernels in ("portable", "native"):
        out = tmp_path / kernels
        done = ops_benchlib(
            *ops_run_args(tiny_spec(smoke_cell_spec, kernels), mnist_store, smoke_split, out),
            env=env_without_caps(),  # the caps must come from the cell's setting
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"CPU kernels: {kernels}" in done.stderr
        records[kernels] = json.loads((out / "metrics.json").read_text())["provenance"]

    portable, native = records["portable"]["cpu_kernels"], records["native"]["cpu_kernels"]
    assert portable["setting"] == "portable" and native["setting"] == "native"
    assert native["caps"] == {} and native["portable"] is False
    if X86_AVX2:
        assert portable["caps"] == dict(cpu_kernels.PORTABLE_ENV)
        assert (portable["aten"], portable["portable"]) == ("AVX2", True)
        assert portable["onednn"].endswith("AVX2")

    prov = records["portable"]
    assert prov["benchlib"] == benchlib.__version__
    assert prov["commit"] == git("rev-parse", "HEAD").strip()
    assert prov["dirty"] is bool(git("status", "--porcelain", "--untracked-files=no").strip())
    assert prov["installed_from"] == "git checkout"
    assert prov["python"] == ".".join(map(str, sys.version_info[:3]))
    assert prov["torch"] == torch.__version__
    assert prov["torchvision"] and prov["numpy"]
    assert prov["device"] == "cpu" and prov["threads"] == 1
    assert {"cuda", "cudnn"} <= set(prov)


def test_version_names_the_commit():
    done = ops_benchlib("--version")
    assert done.returncode == 0, done.stderr
    head = git("rev-parse", "HEAD").strip()[:12]
    assert done.stdout.startswith(f"benchlib {benchlib.__version__} (commit {head}")


def test_provenance_outside_a_clone_names_the_install(tmp_path: Path):
    from benchlib.facts.provenance import git_state

    # a package built without git: the version names the code
    nothing = tmp_path / "absent.json"
    assert git_state(tmp_path, nothing) == {
        "commit": None,
        "dirty": None,
        "installed_from": "package",
    }
    # a pip install of a clone recorded the clone's commit when it built the package
    origin = tmp_path / "_origin.json"
    origin.write_text('{"commit": "' + "c" * 40 + '", "dirty": false}')
    assert git_state(tmp_path, origin) == {
        "commit": "c" * 40,
        "dirty": False,
        "installed_from": "git clone",
    }


def test_cell_ids_are_parsed_and_checked():
    from benchlib.configuration.config import Cell

    cell = Cell.parse("demo/sfa/fedavg/k3/seed1")
    assert cell == Cell("demo", "sfa", "fedavg", 3, 1) and cell.id == "demo/sfa/fedavg/k3/seed1"
    assert cell.run_dir == "results/runs/demo/sfa/fedavg/k3/seed1"
    for bad in ("demo/sfa/fedavg/k3", "demo/sfa/fedavg/3/seed1", "demo/sfa/fedavg/kx/seed1"):
        with pytest.raises(
            benchlib.primitives.errors.BenchlibError, match=r"experiment/malfunction|integers"
        ):
            Cell.parse(bad)


@pytest.mark.slow
def test_bench_kernels_times_both_settings(smoke_workdir, monkeypatch):
    from benchlib.commands.bench.kernels import run_kernel_benchmark
    from benchlib.configuration.config import Cell

    monkeypatch.chdir(smoke_workdir)
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))
    result = run_kernel_benchmark(Path("c.yaml"), Cell("smoke", "sfa", "fedavg", 1, 0), repeats=1)
    assert result["native"] > 0 and result["portable"] > 0
    assert result["ratio"] == pytest.approx(result["native"] / result["portable"])
