"""The smallest real cell of a registered method: the smoke set-up (mnist5k, 4 clients, narrow CNN),
2 rounds, client 0 under ANA."""

from __future__ import annotations

import yaml

from benchlib.configuration.config import Cell, Config
from benchlib.methods.catalog import METHODS
from helpers.paths import REPO

TINY_CELL = Cell("smoke", "ana", "m", 1, 0)  # the cell of tiny_config's one method


def tiny_config(name: str, variant: str) -> Config:
    """config/smoke.yaml with one method, ``m``: method ``name`` in ``variant`` at its defaults."""
    raw = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    params = {"variant": variant} if METHODS.get(name).variants else {}
    raw["methods"] = {"m": {"method": name, "label": name, "params": params}}
    experiment = raw["experiments"]["smoke"]
    experiment.update(methods=["m"], malfunctions=["ana"], k=[1])
    return Config(raw)
