"""Where clients start: the authors'-code variants of the P2P methods start every client from its
own random model; every star method and every paper variant from one shared model; the engine
follows the method's choice unless the config's model.init says otherwise."""

from __future__ import annotations

import pytest
from helpers.builders import build_method
from helpers.task_stores import groups_split, regression_store, task_cell_spec

from benchlib.fl.engine import CellRun

P2P_AUTHORS = ["p2p_fedavg", "balance", "scclip", "lightyear"]


@pytest.mark.parametrize("method", P2P_AUTHORS)
def test_p2p_authors_variants_start_from_separate_models(method: str) -> None:
    extra = {"tau": 0.6} if method == "lightyear" else {}
    assert build_method(method, {**extra, "variant": "authors"}).model_init == "per_client"
    assert build_method(method, extra).model_init == "shared"


@pytest.mark.parametrize("method", ["krum", "afa", "asmr", "cfl", "ditto"])
def test_star_authors_variants_share_one_start(method: str) -> None:
    assert build_method(method, {"variant": "authors"}).model_init == "shared"


@pytest.fixture(scope="module")
def tab_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tab")
    store = regression_store(root / "store")
    return store, groups_split(store, root / "split.csv")


def distinct_starts(cell: CellRun) -> int:
    return len({tuple(cell.layout.flatten(m).tolist()) for m in cell.models})


def test_engine_follows_the_method_initialisation(tab_data) -> None:
    store, split = tab_data
    spec = task_cell_spec("regression", "p2p_fedavg")
    assert distinct_starts(CellRun(spec, store, split)) == 1
    authors = {**spec, "method_params": {"variant": "authors"}}
    assert distinct_starts(CellRun(authors, store, split)) == 4
    # an explicit model.init in the config wins over the method's choice
    forced = {**authors, "model": {**spec["model"], "init": "shared"}}
    assert distinct_starts(CellRun(forced, store, split)) == 1
