"""The checks every registered method must pass, built-in or a plugin's (``benchlib check-method
NAME``, and tests/methods/test_every_method.py for every method): each variant trains 2 rounds of
the smallest real cell (mnist5k, 4 clients, narrow CNN, client 0 under ANA) through the engine,
and a run stopped after round 1 and resumed from its checkpoint writes the same metrics.json,
byte for byte.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib.primitives.errors import BenchlibError, require

TINY_CELL = ("smoke", "ana", "m", 1, 0)  # the cell of tiny_config's one method
ROUNDS = 2
# Built-in parameters still declared null because the value is a per-round rule (of the clients
# that take part, or of the model's feature width), not one number: krum/bulyan f, scclip b and
# tau (adaptive radius), fedsr z_dim and dense (from the model and task).
NULL_RULES = frozenset({"krum", "bulyan", "scclip", "fedsr"})


def variants(name: str) -> tuple[str, ...]:
    """The method's declared variants (``("paper",)`` when it declares none)."""
    from benchlib.methods.catalog import METHODS

    return tuple(METHODS.get(name).variants or ("paper",))


def tiny_config(name: str, variant: str) -> Any:
    """config/smoke.yaml (benchlib's own) with one method, ``m``: ``name`` in ``variant`` at its
    defaults, one cell (ANA, k = 1, seed 0)."""
    from benchlib.configuration.config import Config, load_config_file
    from benchlib.methods.catalog import METHODS
    from benchlib.primitives.home import benchlib_dir

    raw = load_config_file(benchlib_dir() / "config" / "smoke.yaml")
    params = {"variant": variant} if METHODS.get(name).variants else {}
    raw["methods"] = {"m": {"method": name, "label": name, "params": params}}
    raw["experiments"]["smoke"].update(methods=["m"], malfunctions=["ana"], k=[1])
    return Config(raw)


def prepare(folder: Path) -> tuple[Path, Path]:
    """The mnist5k store and the tiny config's split of it, written under ``folder``."""
    from benchlib.data.registry import get_dataset
    from benchlib.data.split import SplitSpec, make_split, write_split
    from benchlib.data.store import load_store

    store, split = folder / "mnist5k", folder / "split.csv"
    get_dataset("mnist5k").prepare(store, {})
    spec = SplitSpec.from_config(tiny_config("fedavg", "paper").dataset_spec("mnist5k"))
    write_split(make_split(load_store(store), spec), split)
    return store, split


def check_variant(
    name: str, variant: str, store: Path, split: Path, folder: Path, resume: bool
) -> dict[str, Any]:
    """Train the tiny cell of ``name`` in ``variant`` and check it (and, with ``resume``, that a
    run stopped after round 1 resumes to the same bytes); returns its metrics. A failed check is
    one BenchlibError naming it."""
    import json

    import torch

    from benchlib.fl.engine import run_cell
    from benchlib.grid.spec import Cell
    from benchlib.methods.base import P2PMethod, get_method_class

    torch.set_num_threads(1)
    what = f"method {name} ({variant})"
    spec = tiny_config(name, variant).cell_spec(Cell(*TINY_CELL))
    full = run_cell(spec, store, split, folder / "full.json", folder / "full_ckpt")
    require(full is not None, f"{what}: the run wrote no metrics")
    rounds = len(full["history"]["val_accuracy"])
    require(rounds == ROUNDS, f"{what}: {rounds} rounds recorded, expected {ROUNDS}")
    require(full["malicious_clients"] == [0], f"{what}: client 0 is not the ANA client")
    for client in full["clients"]:
        accuracy = client["test_accuracy"]
        require(
            accuracy is not None and math.isfinite(accuracy) and 0.0 <= accuracy <= 1.0,
            f"{what}: client {client.get('client')} test accuracy {accuracy} is not in [0, 1]",
        )
    require(full["config"]["method"] == name, f"{what}: the cell ran {full['config']['method']}")
    nulls = sorted(k for k, v in full["config"]["method_params"].items() if v is None)
    require(
        not nulls or name in NULL_RULES,
        f"{what}: declared defaults {', '.join(nulls)} are null; declare the values it uses",
    )
    if issubclass(get_method_class(name), P2PMethod):
        sizes = [len(s) for s in full["history"]["selections"]]
        require(sizes == [4] * ROUNDS, f"{what}: selections {sizes}, every client each round")
    if resume:
        ckpt, out = folder / "resumed_ckpt", folder / "resumed.json"
        stopped = run_cell(spec, store, split, out, ckpt, stop_after=1)
        require(stopped is None and not out.exists(), f"{what}: stop_after=1 wrote metrics")
        run_cell(spec, store, split, out, ckpt)
        if out.read_bytes() != (folder / "full.json").read_bytes():
            full_json = json.loads((folder / "full.json").read_text())
            differ = sorted(k for k, v in json.loads(out.read_text()).items() if full_json[k] != v)
            raise BenchlibError(
                f"{what}: resumed after round 1, metrics.json differs in {', '.join(differ)}; "
                "save and restore all cross-round state in state_dict/load_state_dict"
            )
    return full


def check_method(name: str, say: Callable[[str], None] = print) -> None:
    """Every check of :func:`check_variant` for each variant of ``name`` (the resume check once,
    on the first); ``say`` gets one line per passed variant. Stops at the first failure."""
    from benchlib.methods.catalog import METHODS

    METHODS.get(name)  # an unknown name: one error with the closest declared one
    with tempfile.TemporaryDirectory(prefix="benchlib-check-") as scratch:
        store, split = prepare(Path(scratch))
        for index, variant in enumerate(variants(name)):
            folder = Path(scratch) / variant
            folder.mkdir()
            check_variant(name, variant, store, split, folder, resume=index == 0)
            resumed = ", resumed after round 1 to the same bytes" if index == 0 else ""
            say(f"ok: {name} ({variant}) trains {ROUNDS} rounds{resumed}")
