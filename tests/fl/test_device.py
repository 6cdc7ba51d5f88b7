"""Device choice (benchlib.fl.device): CUDA when torch can use it, CPU otherwise, and a loud
failure when the scheduler allocated a GPU that torch cannot use."""

from __future__ import annotations

import pytest
import torch

from benchlib.fl.device import select_device
from benchlib.primitives.errors import BenchlibError


@pytest.fixture
def gpu_env(monkeypatch):
    """Set CUDA_VISIBLE_DEVICES / BENCHLIB_DEVICE and what torch.cuda.is_available() says."""

    def apply(visible: str | None, cuda: bool, requested: str | None = None) -> None:
        for name, value in (("CUDA_VISIBLE_DEVICES", visible), ("BENCHLIB_DEVICE", requested)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)

    return apply


def test_allocated_gpu_that_torch_cannot_use_fails_loudly(gpu_env):
    gpu_env(visible="0", cuda=False)
    with pytest.raises(BenchlibError, match=r"a GPU was allocated \(CUDA_VISIBLE_DEVICES=0\)"):
        select_device()


def test_cpu_on_purpose_overrides_an_allocated_gpu(gpu_env):
    gpu_env(visible="0", cuda=False, requested="cpu")
    assert select_device() == torch.device("cpu")


@pytest.mark.parametrize("visible", ["0", None])
def test_cuda_is_used_when_available(gpu_env, visible):
    gpu_env(visible=visible, cuda=True)
    assert select_device() == torch.device("cuda")


@pytest.mark.parametrize("visible", [None, "", "-1", "NoDevFiles"])
def test_no_gpu_allocated_runs_on_cpu(gpu_env, visible):
    gpu_env(visible=visible, cuda=False)
    assert select_device() == torch.device("cpu")


def test_cuda_requested_but_unusable_is_an_error(gpu_env):
    gpu_env(visible=None, cuda=False, requested="cuda")
    with pytest.raises(BenchlibError, match="device cuda requested but torch cannot use a GPU"):
        select_device()


def test_unknown_device_name_is_an_error(gpu_env):
    gpu_env(visible=None, cuda=False, requested="tpu")
    with pytest.raises(BenchlibError, match="unknown device 'tpu'"):
        select_device()
