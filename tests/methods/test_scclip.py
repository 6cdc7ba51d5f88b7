"""SCCLIP (Yang & Ghaderi, AAAI 2024, Algorithm 1): the default radius (remove-then-clip) keeps a
client on the honest side when 3 of its 7 peers are Byzantine; values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import torch
from helpers.builders import build_method
from helpers.method_inputs import no_evaluator

from benchlib.methods.base import PeerView

HONEST = [[1.0, 0.1], [1.0, -0.1], [1.1, 0.0], [0.9, 0.0]]
MINIMAL = torch.tensor(HONEST + [[-3.0, 0.0]] * 3)


def minimal_view() -> PeerView:
    return PeerView(0, 0, torch.tensor([1.0, 0.0]), list(range(1, 8)), MINIMAL, no_evaluator())


def test_scclip_default_stays_honest_with_three_of_seven_byzantine_peers() -> None:
    method = build_method("scclip", {})
    method.setup(8, 10, seed=0)
    result = method.aggregate_client(minimal_view())
    # b = 7 // 2 = 3 removes the three copies of (-3, 0); the four honest differences
    # (0, .1), (0, -.1), (.1, 0), (-.1, 0) have norm 0.1 < tau = sqrt(4 * 0.01 / 3) and cancel
    np.testing.assert_allclose(result.vector.numpy(), [1.0, 0.0], atol=1e-7)
    assert result.vector[0] > 0.5
    assert result.selected == [1, 2, 3, 4]


def test_scclip_radius_is_rtc_equation_on_the_kept_set() -> None:
    # b = 1 keeps two attackers: tau^2 = (4 * .01 + 2 * 16) / 1 = 32.04 > 16, nothing clipped:
    # RTC with an assumed Byzantine weight below the real one cannot protect (documented)
    method = build_method("scclip", dict(b=1))
    method.setup(8, 10, seed=0)
    result = method.aggregate_client(minimal_view())
    np.testing.assert_allclose(result.vector.numpy(), [1.0 - 2 * 4.0 / 8, 0.0], atol=1e-6)
    # b = 2 keeps one attacker: tau^2 = (0.04 + 16) / 2 = 8.02; (-4, 0) clipped to sqrt(8.02)
    method = build_method("scclip", dict(b=2))
    method.setup(8, 10, seed=0)
    result = method.aggregate_client(minimal_view())
    np.testing.assert_allclose(result.vector.numpy(), [1.0 - math.sqrt(8.02) / 8, 0.0], atol=1e-6)


def test_scclip_default_b_is_half_the_received_models() -> None:
    method = build_method("scclip", {})
    assert method.b is None
    assert [method.removals(m) for m in (1, 2, 3, 4, 7)] == [0, 1, 1, 2, 3]
    assert build_method("scclip", dict(b=5)).removals(7) == 5
