"""Optional TensorBoard events per cell (training.tensorboard: true, the tracking extra): read
back with TensorBoard's own EventAccumulator they equal progress.jsonl; metrics.json's bytes and
the config hash do not change; a resumed cell keeps one value per round."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import REPO

from benchlib.configuration.config import Config, load_config_file
from benchlib.fl.engine import run_cell
from benchlib.fl.progress import read_progress
from benchlib.fl.tensorboard import round_scalars, tensorboard_dir
from benchlib.grid.spec import Cell


def events_of(folder) -> dict[str, list[tuple[int, float]]]:
    """Tag -> [(round, value)] of a cell's event folder, as TensorBoard reads it."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }


def expected_from_progress(metrics_path) -> dict[str, list[tuple[int, float]]]:
    expected: dict[str, list[tuple[int, float]]] = {}
    for entry in read_progress(metrics_path.parent / "progress.jsonl"):
        for tag, value in round_scalars(entry):
            expected.setdefault(tag, []).append((entry["round"], value))
    return expected


def assert_same(events, expected) -> None:
    """Same tags, rounds and values (TensorBoard stores float32)."""
    assert set(events) == set(expected)
    for tag, values in expected.items():
        assert [step for step, _ in events[tag]] == [step for step, _ in values], tag
        assert [v for _, v in events[tag]] == pytest.approx([v for _, v in values], rel=1e-6)


@pytest.fixture
def spec(smoke_cell_spec):
    raw = smoke_cell_spec("lightyear", "sfa", 1)
    raw["training"]["rounds"] = 3
    return raw


def test_events_equal_progress_and_metrics_json_is_unchanged(
    spec, mnist_store, smoke_split, tmp_path
):
    plain = tmp_path / "plain" / "metrics.json"
    run_cell(spec, mnist_store, smoke_split, plain, tmp_path / "ckpt_plain")
    watched_spec = copy.deepcopy(spec)
    watched_spec["training"]["tensorboard"] = True
    watched = tmp_path / "watched" / "metrics.json"
    run_cell(watched_spec, mnist_store, smoke_split, watched, tmp_path / "ckpt_watched")

    assert watched.read_bytes() == plain.read_bytes()
    assert not tensorboard_dir(plain).exists()
    events = events_of(tensorboard_dir(watched))
    assert_same(events, expected_from_progress(watched))
    # what the tags hold: every client's validation accuracy, LIGHTYEAR's peer choices
    progress = read_progress(watched.parent / "progress.jsonl")
    assert [v for _, v in events["val_accuracy/client_2"]] == pytest.approx(
        [entry["val_accuracy"][2] for entry in progress], rel=1e-6
    )
    assert {"selections/client_1", "scores/client_1", "round/seconds"} <= set(events)
    # each client's validation loss: in the line and the events only when TensorBoard is on
    assert [v for _, v in events["val_loss/client_0"]] == pytest.approx(
        [entry["val_loss"][0] for entry in progress], rel=1e-6
    )
    assert all(0 < entry["val_loss"][0] < 10 for entry in progress)
    assert all("val_loss" not in entry for entry in read_progress(plain.parent / "progress.jsonl"))
    assert [v for _, v in events["malfunctions/count"]] == [1.0, 1.0, 1.0]


def test_a_resumed_cell_keeps_one_value_per_round(spec, mnist_store, smoke_split, tmp_path):
    spec["training"]["tensorboard"] = True
    out, ckpt = tmp_path / "run" / "metrics.json", tmp_path / "ckpt"
    assert run_cell(spec, mnist_store, smoke_split, out, ckpt, stop_after=2) is None
    run_cell(spec, mnist_store, smoke_split, out, ckpt)
    events = events_of(tensorboard_dir(out))
    assert [step for step, _ in events["val_accuracy/mean"]] == [0, 1, 2]
    assert_same(events, expected_from_progress(out))


def test_the_setting_leaves_the_config_hash_and_recorded_config_alone():
    raw = load_config_file(REPO / "config" / "smoke.yaml")
    watched = copy.deepcopy(raw)
    watched["datasets"]["mnist5k"]["training"]["tensorboard"] = True
    cell = Cell("smoke", "sfa", "fedavg", 1, 0)
    plain_spec = Config(raw).cell_spec(cell)
    watched_spec = Config(watched).cell_spec(cell)
    assert watched_spec.training.tensorboard is True  # benchlib run gets it
    assert watched_spec.config_hash() == plain_spec.config_hash()
    assert json.dumps(watched_spec.recorded()) == json.dumps(plain_spec.recorded())


def test_a_non_boolean_setting_is_a_config_error():
    from benchlib.primitives.errors import BenchlibError

    raw = load_config_file(REPO / "config" / "smoke.yaml")
    raw["datasets"]["mnist5k"]["training"]["tensorboard"] = "yes"
    with pytest.raises(BenchlibError, match="tensorboard"):
        Config(raw)
