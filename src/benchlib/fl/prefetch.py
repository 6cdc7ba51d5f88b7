"""Streamed training batches gathered ahead by background threads while the current step runs.

In stream mode every training step reads its rows from the memory-mapped store. The store
already holds decoded arrays (uint8 images, float32 tabular rows), so a batch's host work is no
decoding: it is a gather (``np.take``: page faults on the file and a copy), ``torch.from_numpy``
and, on a GPU, pinning plus a host-to-device copy. ``np.take`` on a memmap and torch's copies
release the GIL, so a few threads overlap that work with the consumer's compute; worker
processes would only add pickling of every batch.

:class:`Prefetcher` hands out an epoch's batches in order. Its workers gather the raw rows
(:meth:`~benchlib.fl.data.BatchSource.host_batch`) and, on CUDA, copy them non-blocking on
their own CUDA stream, recording an event; the consuming thread makes its stream wait on that
event, marks the tensors as used by its stream (``record_stream``) and converts, augments (keyed
by the batch's seed) and normalises them as :meth:`~benchlib.fl.data.BatchSource.batch` does,
so the batches are identical to the synchronous ones. Resident data are on the device already:
there the prefetcher gathers on the consuming thread and starts no thread.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from benchlib.fl.data import BatchSource
from benchlib.primitives.errors import require

DEFAULT_DEPTH = 2  # training.prefetch when unset: batches gathered ahead
DEFAULT_WORKERS = 2
THREAD_PREFIX = "benchlib-prefetch"

Plan = Sequence[tuple[np.ndarray, int | None]]  # per step: (store rows, augmentation seed)
_Loaded = tuple[torch.Tensor, torch.Tensor, torch.cuda.Event | None]  # x, y, copy done


class Prefetcher:
    """Iterator over the (x, y) batches of ``plan``, gathered up to ``depth`` batches ahead.

    ``workers`` threads (at most ``depth``) do the host gathers. A worker's exception is raised
    by the consumer's ``next`` for that batch. Use as a context manager (or call :meth:`close`)
    so that stopping early (an exception in training) stops the workers; closing waits for a
    gather in progress, drops the queued ones and joins the threads.
    """

    def __init__(
        self,
        source: BatchSource,
        plan: Plan,
        depth: int = DEFAULT_DEPTH,
        workers: int = DEFAULT_WORKERS,
    ) -> None:
        require(depth >= 0, f"prefetch depth must be >= 0, got {depth}")
        require(workers >= 1, f"prefetch workers must be >= 1, got {workers}")
        self.source = source
        self.plan = list(plan)
        self.depth = depth
        self.workers = min(workers, depth)
        # Resident batches are gathered on the device already: nothing to do ahead.
        self.active = depth > 0 and not source.resident and len(self.plan) > 0
        self._next = 0  # the plan index the consumer gets next
        self._submitted = 0  # plan indices handed to the workers so far
        self._pending: deque[Future[_Loaded]] = deque()
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()  # a worker's CUDA copy stream

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return self

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._next >= len(self.plan):
            self.close()
            raise StopIteration
        rows, seed = self.plan[self._next]
        self._next += 1
        if not self.active:
            return self.source.batch(rows, augment_seed=seed)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=THREAD_PREFIX)
            self._fill()
        future = self._pending.popleft()
        self._fill()  # keep ``depth`` batches in the works while this one is consumed
        try:
            x, y, copied = future.result()
        except BaseException:
            self.close()
            raise
        if copied is not None:
            current = torch.cuda.current_stream(self.source.device)
            current.wait_event(copied)
            # allocated on the worker's stream, used on this one: the allocator must not
            # reuse the memory before this stream's work on it is done
            x.record_stream(current)
            y.record_stream(current)
        return self.source.finish(x, y, augment_seed=seed)

    def close(self) -> None:
        """Stop the workers: drop queued gathers, wait for running ones, join the threads."""
        pool, self._pool = self._pool, None
        self._pending.clear()
        self._next = len(self.plan)
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _fill(self) -> None:
        assert self._pool is not None
        while self._submitted < len(self.plan) and self._submitted < self._next + self.depth:
            rows = self.plan[self._submitted][0]
            self._pending.append(self._pool.submit(self._load, rows))
            self._submitted += 1

    def _load(self, rows: np.ndarray) -> _Loaded:
        """Worker: gather ``rows`` on the host; on CUDA copy them on this thread's stream."""
        x, y = self.source.host_batch(rows)
        device = self.source.device
        if device.type != "cuda":
            return x, y, None
        stream = getattr(self._local, "stream", None)
        if stream is None:
            stream = self._local.stream = torch.cuda.Stream(device=device)
        with torch.cuda.device(device), torch.cuda.stream(stream):
            x, y = self.source.to_device(x, y)
            copied = torch.cuda.Event()
            copied.record(stream)
        return x, y, copied
