"""Progress lines of long data work (extraction, preparation, corruption): count, percent, rate
and ETA at most every EVERY_S seconds, and one end line; checked with a controlled clock and on
the real corruption and HC18 preparation steps."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.paths import SHARED_DATA

from benchlib.data import progress as progress_module
from benchlib.data.progress import ItemProgress

LINE = re.compile(r"^(.+): (\d+) of (\d+) (\w+) \((\d+) %\), [0-9.e+-]+ \w+/s, ETA (\S+)$")
HC18 = SHARED_DATA / "fetal_hc18_sample"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "benchlib"]


def test_lines_come_every_interval_with_percent_rate_and_eta(caplog):
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="benchlib"):
        progress = ItemProgress("prepare x", 400, "images", every_s=10, clock=clock)
        for _ in range(100):  # 100 images in 5 s: no line yet
            clock.now += 0.05
            progress.update()
        assert messages(caplog) == []
        for _ in range(100):  # 200 images at 10 s
            clock.now += 0.05
            progress.update()
        clock.now += 10
        progress.update(100)  # 300 at 20 s
        progress.close()
    assert messages(caplog) == [
        "prepare x: 200 of 400 images (50 %), 20 images/s, ETA 10s",
        "prepare x: 300 of 400 images (75 %), 15 images/s, ETA 7s",
        "prepare x: 300 images in 20s (15 images/s)",
    ]


def test_an_unknown_total_reports_counts_and_close_logs_once(caplog):
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="benchlib"):
        with ItemProgress("extract y", None, "files", every_s=1, clock=clock) as progress:
            clock.now = 2
            progress.update(6)
        progress.close()
    assert messages(caplog) == [
        "extract y: 6 files so far, 3 files/s",
        "extract y: 6 files in 2s (3 files/s)",
    ]


def every_line(monkeypatch) -> None:
    monkeypatch.setattr(progress_module, "EVERY_S", 0.0)


def test_corrupting_a_store_logs_its_progress(tmp_path, monkeypatch, caplog):
    from benchlib.data.corruptions import corrupt_store, scenario_of
    from benchlib.data.store import write_store

    every_line(monkeypatch)
    rng = np.random.default_rng(1)
    n = 48
    index = pd.DataFrame(
        {"sample_id": [f"s{i:03d}" for i in range(n)], "label": rng.integers(0, 3, n)}
    )
    index["group"], index["source_split"] = "", ""
    pixels = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    write_store(
        tmp_path / "store", dataset="tiny", index=index, pixels=pixels, num_classes=3, sources=[]
    )
    split = pd.DataFrame(
        {
            "sample_id": index["sample_id"],
            "client": (np.arange(n) // 4) % 4,
            "subset": np.array(["train", "train", "val", "test"])[np.arange(n) % 4],
            "group": "",
        }
    )
    split.to_csv(tmp_path / "split.csv", index=False)
    scenario = scenario_of({"ratio": 0.5, "severity": 2})
    with caplog.at_level(logging.INFO, logger="benchlib"):
        record = corrupt_store(
            tmp_path / "store", tmp_path / "split.csv", tmp_path / "out", 4, scenario, seed=5,
            chunk=8,
        )  # fmt: skip
    lines = [LINE.match(m) for m in messages(caplog)]
    counts = [int(m.group(2)) for m in lines if m and m.group(1) == "corrupting store"]
    images = record["images"]
    assert counts == sorted({*range(8, images, 8), images})  # one line per chunk of 8
    assert all(m.group(3) == str(record["images"]) for m in lines if m)
    assert f"corrupting store: {record['images']} images in" in "\n".join(messages(caplog))


def test_preparing_hc18_logs_count_percent_and_eta(tmp_path, monkeypatch, caplog):
    from benchlib.data.registry import get_dataset

    every_line(monkeypatch)
    with caplog.at_level(logging.INFO, logger="benchlib"):
        get_dataset("hc18").prepare(tmp_path / "store", {"path": str(HC18)})
    found = [m for m in map(LINE.match, messages(caplog)) if m and m.group(1) == "hc18: reading"]
    assert [int(m.group(2)) for m in found] == list(range(1, 203))
    assert {m.group(3) for m in found} == {"202"} and found[-1].group(5) == "100"
    assert any(m.startswith("hc18: reading: 202 images in ") for m in messages(caplog))


@pytest.mark.parametrize(
    "module", ["sources/camelyon17", "sources/isic2019", "sources/fass", "domain_folders"]
)
def test_the_large_sources_report_progress_the_same_way(module):
    source = (Path(progress_module.__file__).parent / f"{module}.py").read_text()
    assert "ItemProgress(" in source and ".update(" in source and ".close()" in source
