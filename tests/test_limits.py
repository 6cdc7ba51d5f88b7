"""Absurd values that would pass as valid and fail later (a huge allocation, an overflow) are
refused when the config loads, at the bound declared beside the setting, with what the value
would cost (benchlib.limits)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import yaml
from conftest import REPO

from benchlib.config import Config
from benchlib.errors import BenchlibError
from benchlib.limits import byte_size

SMOKE = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())


def _dataset(config: dict) -> dict:
    return config["datasets"]["mnist5k"]


def _report(kind: str, **params: object) -> Callable[[dict], None]:
    return lambda c: c.update(reports={"r": {"kind": kind, "experiments": ["smoke"], **params}})


ABSURD: dict[str, tuple[Callable[[dict], None], str]] = {
    "input_size": (
        lambda c: _dataset(c).setdefault("transforms", {}).update(input_size=100_000),
        "transforms.input_size: 100000 is greater than the maximum of 4096 (one float32 input "
        "of 100000 x 100000 pixels takes 37.3 GiB a channel); set input_size <= 4096",
    ),
    "eval_crop": (
        lambda c: _dataset(c).setdefault("transforms", {}).update(eval_crop=5_000),
        "(one float32 input of 5000 x 5000 pixels takes 95.4 MiB a channel); set eval_crop",
    ),
    "lr": (
        lambda c: _dataset(c)["training"].update(lr=1e308),
        "training.lr: 1e+308 is greater than the maximum of 1000.0; set lr <= 1000.0",
    ),
    "ranking_resamples": (
        _report("ranking", resamples=10**12),
        "(report kind ranking): resamples: 1000000000000 is greater than the maximum of 1000000 "
        "(1,000,000,000,000 resamples take at least 7.3 TiB (8 bytes each, per unit)); set "
        "resamples <= 1000000",
    ),
}


@pytest.mark.parametrize("case", sorted(ABSURD))
def test_an_absurd_value_is_refused_at_its_bound_with_its_cost(case):
    edit, phrase = ABSURD[case]
    config = copy.deepcopy(SMOKE)
    edit(config)
    with pytest.raises(BenchlibError) as error:
        Config(config)
    assert phrase in str(error.value)
    assert "\n" not in str(error.value)


def test_the_bounds_pass_every_value_at_the_bound():
    config = copy.deepcopy(SMOKE)
    _dataset(config).setdefault("transforms", {}).update(input_size=4096, eval_crop=4096)
    _dataset(config)["training"].update(lr=1000.0)
    _report("ranking", resamples=1_000_000)(config)
    Config(config)


@pytest.mark.parametrize(
    ("size", "words"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (8 * 10**12, "7.3 TiB"),
     (2 * 1024**5, "2.0 PiB"), (3 * 1024**6, "3072.0 PiB")],
)  # fmt: skip
def test_byte_sizes_in_words(size, words):
    assert byte_size(size) == words
