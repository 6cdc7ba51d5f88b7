"""Loading and validating claim sets (benchlib.grid.claims): a claim lacking its quote or its test
is one clear error line; plugins declare claim sets the same way."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from benchlib.grid.claims import (
    CLAIM_SETS,
    claim_set,
    condition_text,
    declare_claims,
    load_claims_file,
    validate_claims,
)
from benchlib.primitives.errors import BenchlibError

SCALE = {"clients": 8, "rounds": 6, "samples_per_client": "about 500", "model": "CNN"}
GOOD = {
    "paper": "Mine",
    "source": "my paper",
    "groups": {"grid": {"description": "the grid", "paper_scale": SCALE}},
    "claims": [
        {
            "id": "M1",
            "quote": "mine beats FedAvg under SFA",
            "where": "Abstract",
            "group": "grid",
            "cells": "Table 1",
            "method": "mine",
            "against": ["fedavg"],
            "metric": "accuracy",
            "direction": "higher",
            "condition": {"malfunctions": ["sfa"], "k_min": 4},
            "test": {"kind": "beats", "statistic": "paired_t"},
        },
        {"id": "M2", "quote": "mine is elegant", "where": "Conclusion", "untestable": "taste"},
    ],
}


def broken(change) -> dict:
    data = copy.deepcopy(GOOD)
    change(data)
    return data


def test_valid_set_gets_defaults() -> None:
    out = validate_claims(copy.deepcopy(GOOD), "x")
    assert out["alpha"] == 0.05 and out["power"] == 0.8
    assert condition_text(out["claims"][0]) == "SFA, k >= 4"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["claims"][0].pop("quote"), "at claims.0: 'quote' is a required property"),
        (lambda d: d["claims"][0].pop("test"), "claim M1 lacks test; give its test or say why"),
        (lambda d: d["claims"][0].update(quote=""), "at claims.0.quote"),
        (lambda d: d["claims"][0].update(group="other"), "group 'other' is not declared"),
        (lambda d: d["claims"][1].update(id="M1"), "claim M1 is declared twice"),
        (lambda d: d["claims"][0].update(against=["fedavg", "krum"]), "test.comparator"),
        (lambda d: d["claims"][0]["test"].update(kind="gap_grows"), "exactly one of"),
        (lambda d: d["claims"][0].update(against=["mine"]), "is also in against"),
        (lambda d: d["claims"][1].update(method="mine"), "is untestable but declares method"),
        (lambda d: d["claims"][0].update(scope="oof"), "needs scope clients"),
        (lambda d: d["claims"][0]["test"].update(statistic="z"), "at claims.0.test.statistic"),
        (lambda d: d["claims"][0].update(speed=1), "Additional properties"),
    ],
)
def test_malformed_claims_one_line(change, message: str) -> None:
    with pytest.raises(BenchlibError) as error:
        validate_claims(broken(change), "claims file c.yaml")
    text = str(error.value)
    assert message in text and "\n" not in text and text.startswith("claims file c.yaml")


def test_bad_file(tmp_path: Path) -> None:
    with pytest.raises(BenchlibError, match="not found"):
        load_claims_file(tmp_path / "none.yaml")
    path = tmp_path / "c.yaml"
    path.write_text("- a list\n")
    with pytest.raises(BenchlibError, match="must hold a mapping"):
        load_claims_file(path)


def test_plugin_declares_claims() -> None:
    """A plugin's declarations module calls declare_claims; the set is found by name."""
    declare_claims("test_plugin_claims", copy.deepcopy(GOOD))
    try:
        assert claim_set("test_plugin_claims")["claims"][0]["id"] == "M1"
        with pytest.raises(BenchlibError, match="claim M1 lacks test"):
            declare_claims("test_plugin_bad", broken(lambda d: d["claims"][0].pop("test")))
    finally:
        CLAIM_SETS._entries.pop("test_plugin_claims", None)


def test_papers_found_by_name() -> None:
    assert claim_set("lightyear")["paper"] == "LIGHTYEAR"
    with pytest.raises(BenchlibError, match="claim set 'nope'"):
        claim_set("nope")
