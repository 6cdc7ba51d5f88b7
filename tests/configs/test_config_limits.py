"""Upper bounds on the config's counts (benchlib.primitives.limits): an absurd value stops the
config with one line naming the key, the value, the bound and the fix, and every bound lies far
above the paper configs' settings."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from benchlib.configuration.config import Cell, Config, load_config
from benchlib.primitives import limits
from benchlib.primitives.errors import BenchlibError

SMOKE = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
HUGE = 10**12


def training(config: dict) -> dict:
    return config["datasets"]["mnist5k"]["training"]


CASES: dict[str, tuple[Callable[[dict], None], str]] = {
    "rounds": (
        lambda c: training(c).update(rounds=HUGE),
        "config error at datasets.mnist5k.training.rounds: 1000000000000 is greater than the "
        "maximum of 100000; set rounds <= 100000",
    ),
    "local_epochs": (
        lambda c: training(c).update(local_epochs=10**6),
        "training.local_epochs: 1000000 is greater than the maximum of 1000; set local_epochs "
        "<= 1000",
    ),
    "batch_size": (
        lambda c: training(c).update(batch_size=HUGE),
        "training.batch_size: 1000000000000 is greater than the maximum of 1000000; set "
        "batch_size <= 1000000",
    ),
    "prefetch": (
        lambda c: training(c).update(prefetch=HUGE),
        "training.prefetch: 1000000000000 is greater than the maximum of 1000; set prefetch "
        "<= 1000",
    ),
    "save_predictions": (
        lambda c: training(c).update(save_predictions=HUGE),
        "training.save_predictions: 1000000000000 is greater than the maximum of 1000; set "
        "save_predictions <= 1000",
    ),
    "clients": (
        lambda c: c["datasets"]["mnist5k"].update(clients=HUGE),
        "datasets.mnist5k.clients: 1000000000000 is greater than the maximum of 1000; set "
        "clients <= 1000",
    ),
    "seeds": (
        lambda c: c["experiments"]["smoke"].update(seeds=[0, HUGE]),
        "experiments.smoke.seeds.1: 1000000000000 is greater than the maximum of 2147483647; "
        "set seeds <= 2147483647",
    ),
    "split_seed": (
        lambda c: c["datasets"]["mnist5k"]["split"].update(seed=HUGE),
        "split.seed: 1000000000000 is greater than the maximum of 2147483647; set seed <= "
        "2147483647",
    ),
    # bounds on values that cost memory name what the value would take
    "input_size": (
        lambda c: c["datasets"]["mnist5k"].setdefault("transforms", {}).update(input_size=100_000),
        "transforms.input_size: 100000 is greater than the maximum of 4096 (one float32 input "
        "of 100000 x 100000 pixels takes 37.3 GiB a channel); set input_size <= 4096",
    ),
    "eval_crop": (
        lambda c: c["datasets"]["mnist5k"].setdefault("transforms", {}).update(eval_crop=5_000),
        "(one float32 input of 5000 x 5000 pixels takes 95.4 MiB a channel); set eval_crop",
    ),
    "lr": (
        lambda c: training(c).update(lr=1e308),
        "training.lr: 1e+308 is greater than the maximum of 1000.0; set lr <= 1000.0",
    ),
    "ranking_resamples": (
        lambda c: c.update(
            reports={"r": {"kind": "ranking", "experiments": ["smoke"], "resamples": HUGE}}
        ),
        "(report kind ranking): resamples: 1000000000000 is greater than the maximum of 1000000 "
        "(1,000,000,000,000 resamples take at least 7.3 TiB (8 bytes each, per unit)); set "
        "resamples <= 1000000",
    ),
    "k": (  # bounded by the dataset's clients (no limit of its own needed)
        lambda c: c["experiments"]["smoke"].update(k=[0, HUGE]),
        "experiment smoke: k=1000000000000 malfunctioning clients must be in 0..3",
    ),
    "clients_axis": (
        lambda c: c["experiments"]["smoke"].update(axes={"clients": [4, HUGE]}),
        "axis clients: 1000000000000 is not an int from 2 to 1000",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_absurd_count_is_one_clear_error(name: str) -> None:
    edit, message = CASES[name]
    config = copy.deepcopy(SMOKE)
    edit(config)
    with pytest.raises(BenchlibError) as info:
        Config(config)
    text = str(info.value)
    assert message in text and "\n" not in text, text


def test_the_bounds_themselves_are_accepted() -> None:
    config = copy.deepcopy(SMOKE)
    training(config).update(
        rounds=limits.MAX_ROUNDS,
        local_epochs=limits.MAX_LOCAL_EPOCHS,
        batch_size=limits.MAX_BATCH_SIZE,
    )
    training(config).update(lr=limits.MAX_LR)
    transforms = config["datasets"]["mnist5k"].setdefault("transforms", {})
    transforms.update(input_size=limits.MAX_INPUT_SIZE, eval_crop=limits.MAX_INPUT_SIZE)
    config["reports"] = {
        "r": {"kind": "ranking", "experiments": ["smoke"], "resamples": limits.MAX_RESAMPLES}
    }
    config["experiments"]["smoke"]["seeds"] = [0, limits.MAX_SEED]
    loaded = Config(config)
    assert loaded.datasets["mnist5k"]["training"]["rounds"] == limits.MAX_ROUNDS


@pytest.mark.parametrize("path", sorted((REPO / "config" / "paper").glob("*.yaml")), ids=str)
def test_every_bound_lies_far_above_the_paper_settings(path: Path) -> None:
    """At least 10x the largest value any paper config uses."""
    config = load_config(path)
    settings = [d["training"] for d in config.datasets.values()]
    largest = {
        limits.MAX_ROUNDS: max(t["rounds"] for t in settings),
        limits.MAX_LOCAL_EPOCHS: max(t["local_epochs"] for t in settings),
        limits.MAX_BATCH_SIZE: max(t["batch_size"] for t in settings),
        limits.MAX_CLIENTS: max(d["clients"] for d in config.datasets.values()),
        limits.MAX_SEED: max(s for e in config.experiments.values() for s in e["seeds"]),
        limits.MAX_LR: max(t["lr"] for t in settings),
        limits.MAX_INPUT_SIZE: max(
            [d["transforms"].get("input_size") or 0 for d in config.datasets.values()]
            + [shape for d in config.datasets.values() for shape in _image_sides(d)]
        ),
        limits.MAX_RESAMPLES: max(
            [r.spec.get("resamples", 0) for r in config.reports.values()] + [0]
        ),
    }
    for bound, value in largest.items():
        assert 10 * value <= bound, (bound, value)


def test_a_cell_spec_over_a_bound_names_the_fix() -> None:
    """`benchlib run --spec` validates the cell's own settings: the same bound, the same fix."""
    from benchlib.grid.spec import CellSpec

    spec = Config(copy.deepcopy(SMOKE)).cell_spec(Cell("smoke", "sfa", "fedavg", 0, 0)).to_dict()
    spec["training"]["rounds"] = HUGE
    with pytest.raises(BenchlibError) as info:
        CellSpec.from_json(spec)
    text = str(info.value)
    assert "1000000000000 is greater than the maximum of 100000" in text
    assert text.endswith(f"; set rounds <= {limits.MAX_ROUNDS}") and "\n" not in text, text


def _image_sides(dataset: dict) -> list[int]:
    """The stored image sides a dataset's source declares (none for tabular sources)."""
    from benchlib.data.registry import get_dataset

    shape = get_dataset(dataset["source"]).image_shape
    return list(shape[1:]) if shape else []


@pytest.mark.parametrize(
    ("size", "words"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (8 * 10**12, "7.3 TiB"),
     (2 * 1024**5, "2.0 PiB"), (3 * 1024**6, "3072.0 PiB")],
)  # fmt: skip
def test_byte_sizes_in_words(size, words):
    assert limits.byte_size(size) == words
