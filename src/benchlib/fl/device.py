"""Device choice: CUDA when usable; fail loudly when a GPU was allocated but cannot be used."""

from __future__ import annotations

import os

import torch

from benchlib.primitives.errors import BenchlibError


def select_device(requested: str | None = None) -> torch.device:
    """Pick the compute device.

    ``requested`` (or the ``BENCHLIB_DEVICE`` environment variable) may be ``cpu``, ``cuda`` or
    ``auto`` (default). In ``auto`` mode a visible scheduler-allocated GPU
    (``CUDA_VISIBLE_DEVICES`` set and non-empty) that torch cannot use is an error, so a cluster
    job never silently trains on CPU.
    """
    choice = (requested or os.environ.get("BENCHLIB_DEVICE") or "auto").lower()
    if choice == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if choice == "cuda":
        if not available:
            raise BenchlibError(
                "device cuda requested but torch cannot use a GPU; check the driver and the "
                "torch CUDA build, or set BENCHLIB_DEVICE=cpu"
            )
        return torch.device("cuda")
    if choice != "auto":
        raise BenchlibError(f"unknown device {choice!r}; use cpu, cuda or auto")
    if available:
        return torch.device("cuda")
    allocated = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if allocated and allocated not in ("-1", "none", "NoDevFiles"):
        raise BenchlibError(
            f"a GPU was allocated (CUDA_VISIBLE_DEVICES={allocated}) but torch "
            f"{torch.__version__} cannot use it (driver too old for this wheel?); fix the CUDA "
            "set-up or set BENCHLIB_DEVICE=cpu to run on CPU on purpose"
        )
    return torch.device("cpu")
