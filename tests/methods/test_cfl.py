"""CFL records the update norms its split test compares with eps1 / eps2, and relative thresholds
are in units of the median update norm; values worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.builders import build_method
from helpers.method_inputs import star_round


def test_cfl_records_the_update_norms_of_its_split_test() -> None:
    cfl = build_method("cfl", dict(eps1=0.0, eps2=0.0))
    cfl.setup(3, 10, seed=0)
    g0 = torch.zeros(2)
    received = torch.tensor([[3.0, 4.0], [0.0, 1.0], [0.0, 1.0]])
    cfl.aggregate(g0, received, star_round(0, 3))
    # weighted mean update (1, 2): norm sqrt(5); largest update norm 5, median 1
    ((mean_norm, max_norm, median_norm),) = cfl.summary()["update_norms"][0]
    assert mean_norm == pytest.approx(math.sqrt(5)) and max_norm == pytest.approx(5.0)
    assert median_norm == pytest.approx(1.0)


@pytest.mark.parametrize(("relative", "splits"), [(False, 0), (True, 1)])
def test_cfl_relative_thresholds_are_in_units_of_the_median_update_norm(relative, splits):
    # two opposite groups: mean update (0, 0.5) has norm 0.5, every client norm is about 10;
    # absolute eps1 = 0.4 never sees a stationary point, relative 0.4 * 10 = 4 does, and the
    # largest norm 10.05 > 1.0 * median
    cfl = build_method("cfl", dict(eps1=0.4, eps2=1.0, relative=relative))
    cfl.setup(4, 10, seed=0)
    received = torch.tensor([[10.0, 1.0], [10.0, 0.0], [-10.0, 1.0], [-10.0, 0.0]])
    cfl.aggregate(torch.zeros(2), received, star_round(0, 4))
    assert len(cfl.summary()["splits"]) == splits
    if splits:
        assert cfl.summary()["splits"][0]["halves"] == [[0, 1], [2, 3]]
