"""Client data streamed from the store: rows on disk, one float batch at a time.

A client holds only row numbers into the store's memory-mapped arrays (per subset, in split-file
order). Each training step gathers its batch's rows, converts them to float on the fly (images:
uint8 / 255, NCHW), applies the dataset's transforms and moves them to the device (pinned memory
and non-blocking copies on a GPU). No code path holds a dataset in float. Training epochs gather
their next batches in background threads (:mod:`benchlib.fl.prefetch`, ``training.prefetch``)
while the current step computes.

``resident`` mode copies the cell's rows once to the device as uint8 (features as float32):
small stores train faster that way (no page-cache gathers per step); the float values of a batch
are identical in both modes.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchlib.data.split import read_split, split_partitioner
from benchlib.data.store import PreparedData, load_store
from benchlib.fl.transforms import Transforms
from benchlib.primitives.errors import require
from benchlib.tasks.base import Task

SUBSETS = ("train", "val", "test")
RESIDENT_LIMIT_BYTES = 2 * 1024**3  # auto mode: resident below this many uint8 input bytes


@dataclass(frozen=True)
class ClientData:
    """One client's store rows per subset (in split-file order)."""

    rows: dict[str, np.ndarray]

    @property
    def sizes(self) -> dict[str, int]:
        return {subset: len(self.rows[subset]) for subset in SUBSETS}


def client_rows(data: PreparedData, split: pd.DataFrame, clients: int) -> list[ClientData]:
    """Each client's store rows per subset, in split-file order."""
    row_of = pd.Series(np.arange(len(data.index)), index=data.index["sample_id"])
    result = []
    for client in range(clients):
        rows = {}
        for subset in SUBSETS:
            ids = split.loc[(split["client"] == client) & (split["subset"] == subset), "sample_id"]
            rows[subset] = row_of.loc[ids.to_numpy()].to_numpy().astype(np.int64)
        result.append(ClientData(rows))
    return result


def advise_random_access(array: np.ndarray) -> None:
    """Tell the kernel a memory-mapped array is read at random rows.

    With the default readahead (8 MB on the machines measured), every page fault on a row pulled
    in megabytes around it: a streamed epoch read the whole 8.6 GB store to use 354 MB of rows.
    ``MADV_RANDOM`` makes a fault read only the pages of the rows touched.
    """
    mapping = getattr(array, "_mmap", None)
    if mapping is not None and hasattr(mmap, "MADV_RANDOM"):
        mapping.madvise(mmap.MADV_RANDOM)


def _to_float_inputs(raw: torch.Tensor) -> torch.Tensor:
    """uint8 [B, H, W] / [B, H, W, C] -> float32 [B, C, H, W] in [0, 1]; float rows unchanged."""
    if raw.dtype != torch.uint8:
        return raw.float()
    tensor = raw.unsqueeze(1) if raw.ndim == 3 else raw.permute(0, 3, 1, 2)
    return tensor.float().div_(255.0).contiguous()


class BatchSource:
    """Gathers float input batches and target batches of store rows onto the device.

    ``inputs`` and ``targets`` are row-aligned arrays (memory-mapped for a store); ``needed``
    the rows this cell uses (what resident mode copies to the device).
    """

    def __init__(
        self,
        inputs: np.ndarray,
        targets: np.ndarray,
        task: Task,
        needed: np.ndarray,
        device: torch.device | None = None,
        transforms: Transforms | None = None,
        mode: str = "auto",
    ) -> None:
        self.task = task
        self.device = device or torch.device("cpu")
        self.transforms = transforms or Transforms()
        self.inputs = inputs
        self.targets = targets
        needed = np.unique(needed)
        bytes_needed = int(self.inputs[:1].nbytes) * len(needed)
        self.resident = mode == "resident" or (
            mode == "auto" and bytes_needed <= RESIDENT_LIMIT_BYTES
        )
        if self.resident:
            self._position = np.full(len(self.inputs), -1, dtype=np.int64)
            self._position[needed] = np.arange(len(needed))
            self._inputs = torch.from_numpy(np.ascontiguousarray(inputs[needed])).to(self.device)
            self._targets = task.to_target(targets[needed]).to(self.device)
            finite = self._inputs.dtype == torch.uint8 or bool(torch.isfinite(self._inputs).all())
            require(finite, "the cell's input data hold NaN/Inf; prepare the dataset again")
        else:
            advise_random_access(inputs)
            advise_random_access(targets)

    @classmethod
    def of_store(
        cls,
        data: PreparedData,
        task: Task,
        clients: list[ClientData],
        device: torch.device,
        transforms: Transforms,
        mode: str = "auto",
    ) -> BatchSource:
        """The source of a cell: the store's arrays, the rows its clients use."""
        needed = np.concatenate([c.rows[s] for c in clients for s in SUBSETS])
        targets = task.target_array(data.arrays, data.index["label"].to_numpy())
        return cls(data.inputs, targets, task, needed, device, transforms, mode)

    @property
    def mode(self) -> str:
        return "resident" if self.resident else "stream"

    def _gather(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        if self.resident:
            where = torch.from_numpy(self._position[rows]).to(self.device)
            return self._inputs[where], self._targets[where]
        return self.to_device(*self.host_batch(rows))

    def host_batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Stream mode: the raw inputs (as stored) and targets of ``rows`` read into host
        memory, pinned when the device is a GPU. Safe to call from several threads."""
        require(not self.resident, "host batches are read only from streamed data")
        x = torch.from_numpy(np.take(self.inputs, rows, axis=0))
        y = self.task.to_target(np.take(self.targets, rows, axis=0))
        if self.device.type == "cuda":
            return x.pin_memory(), y.pin_memory()
        return x, y

    def to_device(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A :meth:`host_batch` on the device: a non-blocking copy on the current CUDA stream
        (the caller synchronises before another stream uses it); unchanged on the CPU."""
        if self.device.type == "cuda":
            return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        return x, y

    def batch(
        self, rows: np.ndarray, augment_seed: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Float inputs and targets of ``rows``; training transforms when ``augment_seed``."""
        return self.finish(*self._gather(rows), augment_seed=augment_seed)

    def finish(
        self, raw_x: torch.Tensor, y: torch.Tensor, augment_seed: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Float inputs (dataset transforms applied) and targets of a raw batch on the device;
        training augmentation when ``augment_seed``."""
        x = _to_float_inputs(raw_x)
        if not self.resident and raw_x.dtype != torch.uint8:  # float rows read from disk
            require(bool(torch.isfinite(x).all()), "input rows hold NaN/Inf; prepare again")
        if augment_seed is not None:
            x, y = self.transforms.augment(x, y, augment_seed)
        return self.transforms.normalize(x), y

    def device_positions(self, rows: np.ndarray) -> torch.Tensor:
        """Resident mode: where store ``rows`` sit in the device copy (any shape), copied to the
        device once so that later gathers (:meth:`batch_at`) need no host-to-device copy."""
        require(self.resident, "device positions exist only for resident data")
        return torch.from_numpy(self._position[rows]).to(self.device)

    def batch_at(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Float inputs and targets at device ``positions`` (no augmentation), as :meth:`batch`."""
        x = _to_float_inputs(self._inputs[positions])
        return self.transforms.normalize(x), self._targets[positions]

    def batches(
        self, rows: np.ndarray, batch_size: int
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Evaluation batches of ``rows`` in order (no augmentation)."""
        for start in range(0, len(rows), batch_size):
            yield self.batch(rows[start : start + batch_size])

    def targets_of(self, rows: np.ndarray) -> torch.Tensor:
        """All targets of ``rows`` on the device (targets are small: labels, masks, rows)."""
        if self.resident:
            return self._targets[torch.from_numpy(self._position[rows]).to(self.device)]
        return self.task.to_target(np.take(self.targets, rows, axis=0)).to(self.device)


@dataclass
class CellData:
    """A cell's data: each client's rows, the batch source over the store, what the model and
    loss are built for (outputs, input shape, the federation's training labels), and the
    registered dataset source and partitioner that made the store and the split (provenance;
    None where they do not record it)."""

    clients: list[ClientData]
    source: BatchSource
    num_outputs: int
    input_shape: tuple[int, ...]  # (C, H, W) of images, (F,) of tabular rows
    train_labels: np.ndarray
    num_classes: int
    dataset_source: str | None = None
    partitioner: str | None = None

    @classmethod
    def load(
        cls,
        store_dir: Path,
        split_path: Path,
        num_clients: int,
        task: Task,
        device: torch.device,
        transforms: Transforms,
        mode: str,
        verify_store: bool = False,
    ) -> CellData:
        """Read the store and the split; the store must hold the cell's task. ``verify_store``:
        the full check of ``benchlib verify-store`` first (every byte re-hashed and read)."""
        data = load_store(store_dir, verify="full" if verify_store else "quick")
        require(
            data.task == task.name,
            f"the store {store_dir} holds a {data.task} dataset but the cell's task is "
            f"{task.name}; set the dataset's task to {data.task}",
        )
        split = read_split(split_path, data, num_clients)
        clients = client_rows(data, split, num_clients)
        shape = tuple(data.inputs.shape)
        if len(shape) == 2:  # tabular rows
            input_shape: tuple[int, ...] = (shape[1],)
        else:  # grey [N, H, W] or colour [N, H, W, C] images
            input_shape = (1, *shape[1:3]) if len(shape) == 3 else (shape[3], *shape[1:3])
        return cls(
            clients=clients,
            source=BatchSource.of_store(data, task, clients, device, transforms, mode=mode),
            num_outputs=task.num_outputs(data.arrays, data.num_classes),
            input_shape=input_shape,
            train_labels=data.index["label"].to_numpy()[
                np.concatenate([c.rows["train"] for c in clients])
            ],
            num_classes=data.num_classes,
            dataset_source=data.dataset_source,
            partitioner=split_partitioner(split),
        )
