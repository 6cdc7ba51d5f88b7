"""Live progress of a cell: progress.jsonl beside metrics.json, one line per finished round,
exactly once per round across a resume; the round log line carries an ETA."""

from __future__ import annotations

import json
import logging
import re

from benchlib.fl.engine import run_cell
from benchlib.fl.progress import PROGRESS_NAME, eta_text, progress_path, read_progress
from benchlib.primitives.durations import format_duration


def lines_of(out_dir):
    return [json.loads(line) for line in (out_dir / PROGRESS_NAME).read_text().splitlines()]


def test_a_cell_writes_one_progress_line_per_finished_round(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path, caplog
):
    spec = smoke_cell_spec("lightyear", "sfa", 1)
    spec["training"]["rounds"] = 3
    out = tmp_path / "run" / "metrics.json"
    with caplog.at_level(logging.INFO, logger="benchlib"):
        metrics = run_cell(spec, mnist_store, smoke_split, out, tmp_path / "ckpt")
    assert metrics is not None
    lines = lines_of(out.parent)
    assert [line["round"] for line in lines] == [0, 1, 2]
    history = metrics["history"]
    for line in lines:
        r = line["round"]
        assert line["rounds"] == 3
        assert line["seconds"] >= 0
        assert line["clients"] == [0, 1, 2, 3]
        assert line["val_accuracy"] == history["val_accuracy"][r]
        assert line["selections"] == history["selections"][r]  # LIGHTYEAR's peer choices
        assert line["scores"] == history["scores"][r]
        assert line["schedule"] == history["schedule"][r] == {"0": "sfa"}
    assert "progress" not in json.dumps(metrics)  # metrics.json does not know of the file
    rounds_logged = re.findall(
        r"round (\d)/3 done in \S+: mean val accuracy \S+, ETA (\S+)", caplog.text
    )
    assert [r for r, _ in rounds_logged] == ["1", "2", "3"]
    assert rounds_logged[-1][1] == "0s"


def test_a_star_cell_has_no_selections_in_its_progress(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    out = tmp_path / "metrics.json"
    metrics = run_cell(
        smoke_cell_spec("fedavg", "none", 0), mnist_store, smoke_split, out, tmp_path / "ckpt"
    )
    lines = lines_of(tmp_path)
    assert [line["round"] for line in lines] == list(range(len(metrics["history"]["val_accuracy"])))
    assert all("selections" not in line and "scores" not in line for line in lines)
    assert [line["val_accuracy"] for line in lines] == metrics["history"]["val_accuracy"]


def test_resume_continues_the_progress_file_without_duplicates(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    spec = smoke_cell_spec("lightyear", "ana", 1)
    spec["training"]["rounds"] = 4
    out = tmp_path / "metrics.json"
    ckpt = tmp_path / "ckpt"
    assert run_cell(spec, mnist_store, smoke_split, out, ckpt, stop_after=2) is None
    assert [line["round"] for line in lines_of(tmp_path)] == [0, 1]
    first_two = (tmp_path / PROGRESS_NAME).read_text()
    # a run killed after writing round 2's line but before its checkpoint left this line:
    with open(tmp_path / PROGRESS_NAME, "a") as handle:
        handle.write(json.dumps({"round": 2, "stale": True}) + "\n")
    metrics = run_cell(spec, mnist_store, smoke_split, out, ckpt)
    lines = lines_of(tmp_path)
    assert [line["round"] for line in lines] == [0, 1, 2, 3]
    assert not any(line.get("stale") for line in lines)
    assert (tmp_path / PROGRESS_NAME).read_text().startswith(first_two)  # earlier lines kept
    assert [line["val_accuracy"] for line in lines] == metrics["history"]["val_accuracy"]


def test_a_fresh_run_starts_a_new_progress_file(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    spec = smoke_cell_spec("fedavg", "none", 0)
    out = tmp_path / "metrics.json"
    run_cell(spec, mnist_store, smoke_split, out, tmp_path / "ckpt")
    first = [line["round"] for line in lines_of(tmp_path)]
    first_bytes = out.read_bytes()
    run_cell(spec, mnist_store, smoke_split, out, tmp_path / "ckpt")  # no checkpoint: round 0
    assert [line["round"] for line in lines_of(tmp_path)] == first
    assert out.read_bytes() == first_bytes


def test_reading_skips_a_torn_last_line_and_a_missing_file(tmp_path):
    path = progress_path(tmp_path / "metrics.json")
    assert path == tmp_path / PROGRESS_NAME
    assert read_progress(path) == []
    path.write_text('{"round": 0, "seconds": 1.5}\n{"round": 1, "sec')
    assert read_progress(path) == [{"round": 0, "seconds": 1.5}]


def test_durations_and_etas_read_well():
    assert [format_duration(s) for s in (0, 42.4, 185, 7620, 273600)] == [
        "0s",
        "42s",
        "3m05s",
        "2h07m",
        "3d04h",
    ]
    assert eta_text([2.0, 4.0], 10) == "30s"
    assert eta_text([], 3) == "unknown"
    assert eta_text([5.0], 0) == "0s"
