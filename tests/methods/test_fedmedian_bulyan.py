"""FedMedian and Bulyan against values computed by hand."""

from __future__ import annotations

import pytest
import torch
from helpers.builders import build_method

from benchlib.methods.base import StarRound
from benchlib.methods.bulyan import bulyan_select, largest_f, trimmed_around_median
from benchlib.methods.fedmedian import coordinate_median


def _info(n):
    ones = torch.ones(n, dtype=torch.float64)
    return StarRound(0, 1, ones * torch.arange(1, n + 1), ones, list(range(n)), [None] * n)


def test_median_odd_and_even_unweighted():
    rows = torch.tensor([[1.0, 10.0], [3.0, -2.0], [2.0, 4.0]])
    assert coordinate_median(rows).tolist() == [2.0, 4.0]
    rows4 = torch.tensor([[1.0, 10.0], [3.0, -2.0], [2.0, 4.0], [100.0, 5.0]])
    # even count: mean of the two middle values (2, 3) and (4, 5), not the lower one
    method = build_method("fedmedian", {})
    out = method.aggregate(torch.zeros(2), rows4, _info(4))  # sample sizes 1..4 are ignored
    assert out.tolist() == [2.5, 4.5]


def test_largest_f_and_the_feasibility_error():
    assert [largest_f(n) for n in (3, 6, 7, 10, 11, 20)] == [0, 0, 1, 1, 2, 4]
    with pytest.raises(Exception, match=r"n >= 4f \+ 3.*at least 11 but 10 clients.*f <= 1"):
        build_method("bulyan", dict(f=2)).setup(10, 1, 0)
    build_method("bulyan", dict(f=1)).setup(7, 1, 0)


def test_bulyan_by_hand_seven_models_f1():
    # n = 7, f = 1: theta = 5 Krum picks, beta = 3 values averaged around the median.
    # 1-d models: 0, 1, 2, 3, 4 (honest), 50 and -40 (outliers).
    values = torch.tensor([[0.0], [1.0], [2.0], [3.0], [4.0], [50.0], [-40.0]])
    squared = (values - values.T) ** 2
    # round 1: r = 7, r - f - 2 = 4 neighbours; scores: 0: 1+4+9+16 = 30, 1: 1+1+4+9 = 15,
    # 2: 1+1+4+4 = 10, 3: 15, 4: 30, 50: 46^2+47^2+48^2+49^2, -40: 40^2+41^2+42^2+43^2 -> 2
    # round 2 (without 2): r = 6, 3 neighbours: 0: 1+9+16 = 26, 1: 1+4+9 = 14, 3: 1+4+9 = 14,
    # 4: 1+9+16 = 26 -> 1 (tie with 3, lower index first)
    # round 3 (0, 3, 4, 50, -40): r = 5, 2 neighbours: 0: 9+16, 3: 1+9 = 10, 4: 1+16 -> 3
    # round 4 (0, 4, 50, -40): r = 4, 1 neighbour: 0: 16, 4: 16, 50: 46^2, -40: 40^2 -> 0
    # round 5 (4, 50, -40): r = 3, max(0, 1) = 1 neighbour: 4: 44^2 = 1936, 50: 46^2,
    #   -40: 44^2 -> tie of 4 and -40, the lower index (4) wins
    assert bulyan_select(squared, 1, 5) == [2, 1, 3, 0, 4]
    method = build_method("bulyan", {})
    method.setup(7, 1, 0)
    out = method.aggregate(torch.zeros(1), values, _info(7))
    # selected values 2, 1, 3, 0, 4: median 2; the 3 closest to it: 2, 1, 3 -> mean 2.0
    assert out.tolist() == [2.0]
    assert method.summary() == {"f": None, "selected": [[0, 1, 2, 3, 4]]}


def test_trimmed_mean_around_median_per_coordinate():
    selected = torch.tensor([[0.0, 10.0], [1.0, 0.0], [5.0, 1.0], [9.0, 2.0], [2.0, 100.0]])
    # col 0: median 2, distances 2,1,3,7,0 -> 3 closest: 2, 1, 0 -> mean 1
    # col 1: median 2, distances 8,2,1,0,98 -> 2, 1, 0 -> mean 1
    assert trimmed_around_median(selected, 3).tolist() == [1.0, 1.0]


def test_bulyan_f0_is_the_plain_mean():
    rows = torch.tensor([[1.0, 2.0], [3.0, 4.0], [8.0, -6.0]])
    method = build_method("bulyan", dict(f=0))
    method.setup(3, 1, 0)
    assert method.aggregate(torch.zeros(2), rows, _info(3)).tolist() == pytest.approx([4.0, 0.0])


def test_fedprox_mu_is_a_config_value():
    assert build_method("fedprox", {"mu": 0.25}).mu == 0.25
    with pytest.raises(Exception, match="mu"):
        build_method("fedprox", {"mu": -1})
