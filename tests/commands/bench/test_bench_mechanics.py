"""The benchmarks' mechanics on tiny inputs (no timing is asserted)."""

from __future__ import annotations

import math

import numpy as np
import torch

from benchlib.commands.bench.memory import PeakRss, rss_anon_bytes
from benchlib.commands.bench.overhead import run_benchmark
from benchlib.commands.bench.stream import run_stream_benchmark
from benchlib.commands.bench.synthetic import spread_rows, write_synthetic_store
from benchlib.data.store import load_store
from benchlib.fl.data import BatchSource
from benchlib.tasks import get_task

SHAPE = (96, 96, 3)


def test_synthetic_store_loads_and_stream_batches_equal_resident_batches(tmp_path):
    rows = 160  # 4.4 MB
    chunk = 50 * 96 * 96 * 3  # 50 rows per chunk: 4 chunks
    store = write_synthetic_store(
        tmp_path / "store", rows, SHAPE, seed=3, chunk_bytes=chunk, out=lambda _: None
    )
    data = load_store(store, verify="full")  # sizes and the streamed sha256 match the manifest
    assert data.pixels.shape == (rows, *SHAPE) and data.pixels.dtype == np.uint8
    assert data.index["label"].between(0, 9).all() and data.manifest["synthetic"]["rows"] == rows
    # chunks differ (not one repeated block), the class corner holds the label
    assert not np.array_equal(data.pixels[0], data.pixels[60])
    assert (data.pixels[:, 0, 0, 0] == data.index["label"].to_numpy() * 25).all()
    said: list[str] = []
    write_synthetic_store(store, rows, SHAPE, seed=3, chunk_bytes=chunk, out=said.append)
    assert said == [f"reusing the store in {store}"]

    spread = spread_rows(rows, 3, 20)
    assert len(np.unique(np.concatenate(spread))) == 60
    assert all(r.max() - r.min() > rows // 2 for r in spread)  # spread over the file
    task = get_task("classification")
    targets = task.target_array(data.arrays, data.index["label"].to_numpy())
    needed = np.concatenate(spread)
    stream = BatchSource(data.inputs, targets, task, needed, mode="stream")
    resident = BatchSource(data.inputs, targets, task, needed, mode="resident")
    assert (stream.mode, resident.mode) == ("stream", "resident")
    for rows_of_batch in (spread[0][:7], spread[2][::-1]):
        xs, ys = stream.batch(rows_of_batch)
        xr, yr = resident.batch(rows_of_batch)
        assert xs.shape == (len(rows_of_batch), 3, 96, 96) and xs.dtype == torch.float32
        assert torch.equal(xs, xr) and torch.equal(ys, yr)
        expected = torch.from_numpy(np.array(data.pixels[rows_of_batch])).permute(0, 3, 1, 2)
        assert torch.equal(xs, expected.float() / 255)


def test_rss_sampler_reports_positive_anonymous_memory():
    assert rss_anon_bytes() > 0
    with PeakRss(interval=0.005) as peak:
        block = np.ones(64 * 1024**2, dtype=np.uint8)  # 64 MiB of anonymous memory
        block.sum()
    assert peak.peak_anon >= 64 * 1024**2 and peak.peak_file > 0


def test_stream_benchmark_prints_both_modes(tmp_path):
    lines: list[str] = []
    results = run_stream_benchmark(
        size_gib=0.004,  # ~4 MB: 156 rows
        steps=6,
        batch_size=4,
        clients=2,
        resident_epochs=2,
        store_dir=tmp_path,
        out=lines.append,
    )
    assert [r["mode"] for r in results] == ["stream", "resident"]
    assert all(r["samples"] == 8 * 4 for r in results)  # 6 steps rounded up to 2 x 2 x 2
    assert all(r["peak_rss_anon_mb"] > 0 and r["samples_per_s"] > 0 for r in results)
    assert results[1]["ratio"] == 1.0
    assert (tmp_path / "store" / "manifest.json").is_file()  # kept in the given folder
    table = lines[lines.index(next(x for x in lines if x.startswith("mode"))) :]
    assert "peak RssAnon MB" in table[0] and "samples/s" in table[0]
    assert table[1].split()[0] == "stream" and table[2].split()[0] == "resident"
    # on CPU no GPU utilisation is sampled, and no line claims one
    assert all(math.isnan(r["gpu_busy_pct"]) for r in results)
    assert not any("GPU busy" in line for line in lines)


def test_engine_overhead_benchmark_runs(mnist_store):
    lines: list[str] = []
    ratios = run_benchmark(
        rounds=1, clients=2, samples=40, repeats=1, store=mnist_store, out=lines.append
    )
    assert set(ratios) == {"fedavg", "lightyear"}
    assert all(set(r) == {"train", "round"} and min(r.values()) > 0 for r in ratios.values())
    assert sum(line.split()[0] in ("fedavg", "lightyear") for line in lines) == 4


def test_bench_cli_runs_the_stream_benchmark_on_the_named_device(tmp_path, capsys):
    from benchlib.commands.cli import main

    argv = ["bench", "stream", "--gb", "0.004", "--steps", "4", "--batch-size", "4"]
    assert main([*argv, "--device", "cpu", "--dir", str(tmp_path / "store")]) == 0
    printed = capsys.readouterr().out
    assert ") on cpu, " in printed  # the stream benchmark, not the paper-scale one
    assert "projected device-hours" not in printed
