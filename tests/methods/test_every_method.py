"""Every registered method, driven by the registry (never a hand-kept list), passes the checks of
``benchlib check-method`` (benchlib.commands.method_check): each variant trains 2 rounds through the
real engine, and (once per method) a run stopped after round 1 and resumed from its checkpoint
writes the same metrics.json, byte for byte. The paper variants of the robust methods also treat the
ANA client as their papers say. A plugin's method is checked where it is installed with ``benchlib
check-method NAME`` (tests/workflow/test_plugin_package.py runs it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchlib.commands.method_check import check_variant, prepare, variants
from benchlib.methods.catalog import METHODS
from benchlib.primitives.errors import BenchlibError

pytestmark = pytest.mark.slow  # trains every method through the engine

CASES = [(name, variant) for name in METHODS.names() for variant in variants(name)]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return prepare(tmp_path_factory.mktemp("every_method"))


@pytest.mark.parametrize(("name", "variant"), CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_method_trains_and_resumes(prepared, tmp_path: Path, name: str, variant: str) -> None:
    store, split = prepared
    first = variant == variants(name)[0]  # resume is the class's contract: checked once
    full = check_variant(name, variant, store, split, tmp_path, resume=first)
    if variant == "paper" and name in PAPER_CHECKS:
        PAPER_CHECKS[name](full["method_summary"])


def test_a_method_that_loses_its_state_on_resume_fails_the_check(prepared, tmp_path, monkeypatch):
    """The resume check can fail: a method whose cross-round state is not in its checkpoint."""
    from benchlib.methods.fedavg import FedAvg

    class Forgetful(FedAvg):  # skips its first aggregation in each process: unsaved state
        def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
            super().setup(num_clients, num_rounds, seed)
            self.seen = 0

        def aggregate(self, global_vector, received, info):
            self.seen += 1
            if self.seen == 1:
                return global_vector.clone()
            return super().aggregate(global_vector, received, info)

    import benchlib.methods.base as base

    real = base.get_method_class
    monkeypatch.setattr(base, "get_method_class", lambda n: Forgetful if n == "fedavg" else real(n))
    store, split = prepared
    with pytest.raises(BenchlibError, match=r"resumed after round 1, metrics\.json differs"):
        check_variant("fedavg", "paper", store, split, tmp_path, resume=True)


def flags_the_ana_client(summary: dict) -> None:
    assert summary["flagged"] == [[0], [0]]  # the ANA client, every round


def never_selects_the_ana_client(summary: dict) -> None:
    assert all(0 not in chosen for chosen in summary["selected"])


# What a method's paper variant must do to the ANA client (client 0) in the tiny cell.
PAPER_CHECKS = {
    "afa": flags_the_ana_client,
    "asmr": flags_the_ana_client,
    "krum": never_selects_the_ana_client,
}
