"""A name that matches no declared component stops the config with one line: the name, the
closest known one and the installed plugins (never a silently smaller grid)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import yaml
from conftest import REPO

from benchlib.configuration.config import Config
from benchlib.primitives.errors import BenchlibError

SMOKE = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())


def _dataset(config: dict) -> dict:
    return config["datasets"]["mnist5k"]


TYPOS: dict[str, tuple[str, Callable[[dict], None]]] = {
    "method": (
        "methods.fedavg: unknown method 'fedavgg' (did you mean 'fedavg'?)",
        lambda c: c["methods"]["fedavg"].update(method="fedavgg"),
    ),
    "model": (
        "dataset mnist5k: unknown model 'femnist_cn' (did you mean 'femnist_cnn'?)",
        lambda c: _dataset(c)["model"].update(name="femnist_cn"),
    ),
    "source": (
        "dataset mnist5k: unknown dataset source 'mnist5' (did you mean 'mnist5k'?)",
        lambda c: _dataset(c).update(source="mnist5"),
    ),
    "partitioner": (
        "dataset mnist5k: unknown partitioner 'iidd' (did you mean 'iid'?)",
        lambda c: _dataset(c)["partition"].update(name="iidd"),
    ),
    "malfunction": (
        "experiment smoke: unknown malfunction 'sfaa' (did you mean 'sfa'?)",
        lambda c: c["experiments"]["smoke"].update(malfunctions=["sfaa"]),
    ),
    "report_kind": (
        "unknown report kind 'rankin' (did you mean 'ranking'?)",
        lambda c: c.update(reports={"r": {"kind": "rankin", "experiments": ["smoke"]}}),
    ),
}


@pytest.mark.parametrize("what", sorted(TYPOS))
def test_an_unknown_name_is_one_line_with_the_closest_name_and_the_plugins(what):
    phrase, edit = TYPOS[what]
    config = copy.deepcopy(SMOKE)
    edit(config)
    with pytest.raises(BenchlibError) as error:
        Config(config)
    message = str(error.value)
    assert phrase in message
    assert "\n" not in message and "no plugins installed" in message
