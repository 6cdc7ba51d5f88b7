"""What the benchmarks need from a device: waiting for its queued work and sampling its use.
is. Imports torch alone (a GPU machine may offer little else)."""

from __future__ import annotations

import statistics
import threading

import torch


def sync_device(device: torch.device) -> None:
    """Wait for the device's queued work (timing a GPU needs it)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class GpuUtilisation:
    """Samples NVML's GPU utilisation every 50 ms while active (empty where NVML is absent)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> GpuUtilisation:
        if self.device.type == "cuda":
            try:
                torch.cuda.utilization(self.device)
            except Exception:  # no NVML bindings: report no utilisation
                return self
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.samples.append(float(torch.cuda.utilization(self.device)))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return statistics.mean(self.samples) if self.samples else None
