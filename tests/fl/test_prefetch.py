"""Prefetched streamed batches: the same bytes as the synchronous path, bounded, and cleaned up."""

from __future__ import annotations

import copy
import json
import threading
import time

import numpy as np
import pytest
import torch
import yaml
from conftest import REPO

from benchlib.commands.bench.synthetic import write_synthetic_store
from benchlib.configuration.config import validate_schema
from benchlib.data.store import load_store
from benchlib.declarations.settings import TrainingSettings
from benchlib.fl.data import BatchSource
from benchlib.fl.engine import run_cell
from benchlib.fl.loops import epoch_plan, train_epoch
from benchlib.fl.prefetch import THREAD_PREFIX, Prefetcher
from benchlib.fl.transforms import Transforms
from benchlib.primitives.errors import BenchlibError
from benchlib.tasks import get_task

SHAPE = (12, 12, 3)
ROWS = 120
TRANSFORMS = {
    "train": [{"name": "RandomHorizontalFlip", "p": 0.5}],
    "normalize": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]},
}


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("prefetch") / "store"
    return load_store(write_synthetic_store(path, ROWS, SHAPE, seed=5, out=lambda _: None))


class RecordingSource(BatchSource):
    """A streamed source that records which thread gathered which batch (and may fail)."""

    def __init__(self, *args, fail_on: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.gathered: list[tuple[int, str]] = []
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def host_batch(self, rows):
        with self.lock:
            self.gathered.append((int(rows[0]), threading.current_thread().name))
        if self.fail_on is not None and self.fail_on in rows:
            raise ValueError(f"store row {self.fail_on} is unreadable")
        return super().host_batch(rows)


def make_source(store, mode="stream", cls=BatchSource, **kwargs) -> BatchSource:
    task = get_task("classification")
    targets = task.target_array(store.arrays, store.index["label"].to_numpy())
    transforms = Transforms(TRANSFORMS)
    needed = np.arange(ROWS)
    return cls(store.inputs, targets, task, needed, transforms=transforms, mode=mode, **kwargs)


def make_plan(source: BatchSource, batch: int = 8) -> list[tuple[np.ndarray, int | None]]:
    rows = np.arange(10, 90)  # 80 rows: 10 batches
    order = np.random.default_rng(1).permutation(len(rows))
    return epoch_plan(source, rows, order, batch, augment_key=(3, "train", 0, 1, 0))


def test_prefetched_batches_equal_the_synchronous_ones_byte_for_byte(store):
    source = make_source(store, cls=RecordingSource)
    plan = make_plan(source)
    assert len(plan) == 10 and all(seed is not None for _, seed in plan)
    synchronous = [source.batch(rows, augment_seed=seed) for rows, seed in plan]
    assert {name for _, name in source.gathered} == {threading.current_thread().name}
    source.gathered.clear()
    with Prefetcher(source, plan, depth=2, workers=2) as batches:
        prefetched = list(batches)
    assert len(prefetched) == len(synchronous)
    for (xs, ys), (xp, yp) in zip(synchronous, prefetched, strict=True):
        assert xs.dtype == xp.dtype == torch.float32 and xs.shape == xp.shape == (8, 3, 12, 12)
        assert xs.numpy().tobytes() == xp.numpy().tobytes() and torch.equal(ys, yp)
    # the gathers ran on the worker threads, each batch once
    assert all(name.startswith(THREAD_PREFIX) for _, name in source.gathered)
    assert sorted(first for first, _ in source.gathered) == sorted(int(r[0]) for r, _ in plan)
    assert not prefetch_threads()
    # and the batches are the store's pixels: each sample normalised, flipped or not
    rows = np.concatenate([r for r, _ in plan])
    pixels = torch.from_numpy(np.asarray(store.pixels[rows])).permute(0, 3, 1, 2).float() / 255
    plain, flipped = (pixels - 0.5) / 0.25, (pixels.flip(-1) - 0.5) / 0.25
    x = torch.cat([x for x, _ in prefetched])
    is_plain = (x == plain).flatten(1).all(1)
    is_flipped = (x == flipped).flatten(1).all(1)
    assert bool((is_plain | is_flipped).all())
    assert 0 < int((is_flipped & ~is_plain).sum()) < len(rows)  # the augmentation ran
    labels = torch.cat([y for _, y in prefetched])
    assert torch.equal(labels, torch.from_numpy(store.index["label"].to_numpy()[rows]))


def test_at_most_depth_batches_are_gathered_ahead(store):
    source = make_source(store, cls=RecordingSource)
    plan = make_plan(source)
    with Prefetcher(source, plan, depth=3, workers=2) as batches:
        next(batches)
        deadline = time.monotonic() + 10
        while len(source.gathered) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        assert len(source.gathered) == 4  # the consumed batch + 3 ahead, no more
        next(batches)
        deadline = time.monotonic() + 10
        while len(source.gathered) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        assert len(source.gathered) == 5
        assert len(prefetch_threads()) == 2
    assert not prefetch_threads()


def test_resident_data_and_depth_zero_gather_on_the_consuming_thread(store):
    streamed = make_source(store)
    plan = make_plan(streamed)
    expected = [streamed.batch(rows, augment_seed=seed) for rows, seed in plan]
    resident = make_source(store, mode="resident")
    assert resident.mode == "resident"
    for source, depth in ((resident, 2), (make_source(store, cls=RecordingSource), 0)):
        batches = Prefetcher(source, plan, depth=depth)
        first = next(batches)
        assert not prefetch_threads()
        got = [first, *batches]
        assert all(torch.equal(a[0], b[0]) for a, b in zip(got, expected, strict=True))
        assert all(torch.equal(a[1], b[1]) for a, b in zip(got, expected, strict=True))
    assert {name for _, name in source.gathered} == {threading.current_thread().name}


def test_a_worker_exception_reaches_the_consumer_and_stops_the_workers(store):
    source = make_source(store, cls=RecordingSource, fail_on=None)
    plan = make_plan(source)
    source.fail_on = int(plan[4][0][0])  # the fifth batch cannot be read
    got = []
    message = f"^store row {source.fail_on} is unreadable$"
    with pytest.raises(ValueError, match=message), Prefetcher(source, plan, depth=2) as batches:
        for batch in batches:
            got.append(batch)
    assert len(got) == 4
    assert not prefetch_threads()


def test_an_exception_in_training_stops_the_workers(store):
    source = make_source(store)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 12 * 12, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = []

    def loss_fn(outputs, targets):
        steps.append(len(targets))
        if len(steps) == 2:
            raise RuntimeError("diverged at step 2")
        return torch.nn.functional.cross_entropy(outputs, targets)

    with pytest.raises(RuntimeError, match="diverged at step 2"):
        train_epoch(
            model, optimizer, source, np.arange(80), 8, torch.Generator().manual_seed(0),
            loss_fn, augment_key=(0, "train", 0, 0, 0), prefetch=2,
        )  # fmt: skip
    assert steps == [8, 8]
    assert not prefetch_threads()


def test_train_epoch_is_the_same_with_and_without_prefetch(store):
    results = []
    for depth in (0, 2):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 12 * 12, 10))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        total = train_epoch(
            model, optimizer, make_source(store), np.arange(5, 105), 16,
            torch.Generator().manual_seed(4), torch.nn.CrossEntropyLoss(),
            augment_key=(0, "train", 0, 0, 0), prefetch=depth,
        )  # fmt: skip
        results.append((float(total), torch.cat([p.flatten() for p in model.parameters()])))
    assert results[0][0] == results[1][0] and results[0][0] > 0
    assert torch.equal(results[0][1], results[1][1])


@pytest.mark.parametrize("batching", ["off", "on"])  # one client after another / lock-step
def test_a_streamed_cell_gives_identical_metrics_with_prefetch_0_and_2(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path, monkeypatch, batching
):
    base = smoke_cell_spec("fedavg", "none", 0)
    assert base["training"]["prefetch"] == 2  # the declared default, filled by the config
    readers: dict[int, set[str]] = {0: set(), 2: set()}
    depth = 0
    host_batch = BatchSource.host_batch

    def recording_host_batch(self, rows):
        readers[depth].add(threading.current_thread().name.split("_")[0])
        return host_batch(self, rows)

    monkeypatch.setattr(BatchSource, "host_batch", recording_host_batch)
    metrics = []
    for depth in (0, 2):
        spec = copy.deepcopy(base)
        spec["training"].update(
            data_mode="stream", rounds=2, prefetch=depth, client_batching=batching
        )
        spec["transforms"] = {
            **spec["transforms"],
            "train": [{"name": "RandomHorizontalFlip", "p": 0.5}],
        }
        out = tmp_path / f"prefetch{depth}"
        metrics.append(
            run_cell(spec, mnist_store, smoke_split, out / "m.json", out / "ck", out / "t.json")
        )
        timing = json.loads((out / "t.json").read_text())
        assert timing["data_mode"] == "stream"
        assert timing["clients_batched"] is (batching == "on")
    assert all(m is not None for m in metrics)
    # depth 2: training batches were read by the prefetch workers (evaluation reads its own)
    assert THREAD_PREFIX in readers[2] and THREAD_PREFIX not in readers[0]
    zero, two = metrics
    assert len(zero["history"]["val_accuracy"]) == 2
    assert zero["clients"] == two["clients"] and zero["history"] == two["history"]
    assert not prefetch_threads()


TRAINING = {"optimizer": "adam", "lr": 0.1, "batch_size": 4, "local_epochs": 1, "rounds": 1}


@pytest.mark.parametrize("value", [-1, 1.5, True, "2"])
def test_a_bad_prefetch_value_is_a_clear_error(value):
    with pytest.raises(BenchlibError, match=r"training: prefetch: .*(integer|minimum)"):
        TrainingSettings.from_config("training", {**TRAINING, "prefetch": value})


def test_the_schema_takes_prefetch_and_rejects_a_negative_one():
    assert TrainingSettings.from_config("training", TRAINING).prefetch == 2
    assert TrainingSettings.from_config("training", {**TRAINING, "prefetch": 0}).prefetch == 0
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    good = copy.deepcopy(config)
    good["datasets"]["mnist5k"]["training"]["prefetch"] = 4
    validate_schema(good)
    config["datasets"]["mnist5k"]["training"]["prefetch"] = -1
    with pytest.raises(BenchlibError, match="prefetch"):
        validate_schema(config)
