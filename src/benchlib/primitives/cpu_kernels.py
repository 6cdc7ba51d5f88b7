"""Which CPU kernel family a process computes with (``training.cpu_kernels``).

PyTorch, oneDNN, MKL, NumPy and OpenBLAS each pick the widest vector instructions the CPU has.
AVX-512 kernels round differently from AVX2 ones, so the same cell gives other numbers on an
AVX-512 machine. ``portable`` caps every one of them at AVX2 - the family every x86-64 CPU of the
last decade has - so a cell gives the same bytes on any such machine; ``native`` leaves the
libraries to choose (faster where AVX-512 exists, numbers tied to the machine).

The caps are environment variables that the libraries read once, when they initialise: they must
be set before torch (or numpy) is imported. :func:`apply` does that in a fresh process (the
``benchlib run`` command calls it before importing the engine); :func:`in_effect` reports what a
process actually runs with, read back from the libraries themselves. Torch-free at import time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

from benchlib.primitives.errors import BenchlibError

SETTINGS = ("portable", "native")
DEFAULT = "portable"
PORTABLE_LEVEL = "AVX2"

# Each library's own switch, capped at AVX2. A variable that names a feature the CPU lacks is
# harmless (NumPy and OpenBLAS ignore it), so the same set works on every x86-64 host.
PORTABLE_ENV: Mapping[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",  # PyTorch's vectorised kernels (torch.backends.cpu)
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN: convolutions, pooling
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",  # MKL: float matrix products (nn.Linear) on Intel CPUs
    "MKL_CBWR": "AVX2",  # MKL: the AVX2 code path on Intel and AMD alike
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # NumPy's AVX-512 loops
    "OPENBLAS_CORETYPE": "Haswell",  # NumPy/SciPy BLAS: the AVX2 kernels
}
_LIBRARIES = ("torch", "numpy")


def check_setting(value: object, where: str = "training.cpu_kernels") -> str:
    """The setting, or a clear error naming the allowed values."""
    if value not in SETTINGS:
        raise BenchlibError(f"unknown {where} {value!r}: use one of {', '.join(SETTINGS)}")
    return str(value)


def is_x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


@functools.cache
def host_has_avx2() -> bool | None:
    """True on an x86-64 CPU with AVX2, False on other CPUs, None where it cannot be read."""
    if not is_x86_64():
        return False
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "avx2" in line.split()
    except OSError:
        return None
    return None


def apply(setting: str) -> bool:
    """Set the environment for ``setting`` before torch and numpy load; True if it can act.

    ``native`` changes nothing (a user's own variables stay in force). ``portable`` sets every
    cap; it can only take effect while torch and numpy are not yet imported in this process,
    so it returns False (and sets nothing) once either is loaded.
    """
    check_setting(setting)
    if setting == "native":
        return True
    if any(name in sys.modules for name in _LIBRARIES):
        return False
    if is_x86_64():  # the caps name x86 instruction sets; elsewhere they mean nothing
        os.environ.update(PORTABLE_ENV)
    return True


def _captured_stdout(action) -> str:
    """What ``action()`` writes to file descriptor 1 (C libraries print there directly)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        try:
            action()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        sink.seek(0)
        return sink.read().decode("utf-8", errors="replace")


def _parse_onednn(verbose: str) -> str:
    """oneDNN's ISA from its verbose lines: the ``isa:`` header, else a primitive's ``jit:``."""
    for line in verbose.splitlines():
        if ",info,cpu,isa:" in line:
            return line.split(",info,cpu,isa:", 1)[1].strip()
    for line in verbose.splitlines():
        for field in line.split(","):
            if field.startswith(("jit:", "brg")):
                return field.strip()
    return "unknown"


@functools.cache
def onednn_isa() -> str:
    """The instruction set oneDNN dispatches to in this process (e.g. ``Intel AVX2``)."""
    import torch

    if not torch.backends.mkldnn.is_available():
        return "unavailable"

    def convolve() -> None:
        conv = torch.nn.Conv2d(1, 8, 3)
        with torch.no_grad(), torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            conv(torch.zeros(8, 1, 16, 16))

    # A build without oneDNN verbose support raises (RuntimeError/AssertionError): say unknown.
    with contextlib.suppress(OSError, RuntimeError, AssertionError):
        return _parse_onednn(_captured_stdout(convolve))
    return "unknown"


def in_effect(setting: str) -> dict[str, Any]:
    """What this process computes with: the requested setting, PyTorch's kernel level, oneDNN's
    ISA, and whether that is the portable AVX2 family (``portable``)."""
    import torch

    aten = torch.backends.cpu.get_cpu_capability()
    onednn = onednn_isa()
    capped = aten == PORTABLE_LEVEL and onednn.endswith(PORTABLE_LEVEL)
    caps = {name: os.environ[name] for name in PORTABLE_ENV if name in os.environ}
    return {
        "setting": setting,
        "aten": aten,
        "onednn": onednn,
        "caps": caps,
        "portable": bool(capped and caps == dict(PORTABLE_ENV) and host_has_avx2()),
    }


def mismatch_note(info: Mapping[str, Any]) -> str | None:
    """Why a ``portable`` request is not in effect, or None when it is (or was not asked for)."""
    if info["setting"] != "portable" or info["portable"]:
        return None
    if not host_has_avx2():
        return (
            f"portable CPU kernels need an x86-64 CPU with AVX2; this is {platform.machine()} "
            f"(kernels {info['aten']}), so the numbers cannot match x86-64 references"
        )
    return (
        f"portable CPU kernels were requested but this process runs {info['aten']} / "
        f"oneDNN {info['onednn']}: torch was imported before the caps were set; run the cell "
        "through `benchlib run`, or export the variables of "
        "benchlib.primitives.cpu_kernels.PORTABLE_ENV before starting Python"
    )
