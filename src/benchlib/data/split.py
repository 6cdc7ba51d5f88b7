"""Split CSVs: which client holds each sample and in which subset (train / val / test).

The CSV has columns ``sample_id, client, subset, group, partitioner``, sorted by client, subset,
sample id. ``partitioner`` names the registered partitioner that assigned the clients (the same on
every row; a cell's provenance names the plugin behind it); splits written before it was recorded
lack the column. Samples a partitioner leaves out (e.g. writers beyond the N clients) are not
listed.

Subset modes (``split.mode``):

- ``random`` (default): per client, seeded random fractions ``split.val`` and ``split.test`` of
  the client's pooled samples;
- ``source``: the store's ``source_split`` (e.g. LEAF's or TFF's per-writer train/test): train
  stays train; per client, a seeded fraction ``split.val_from_test`` of the test samples (rounded
  down) moves to val, the rest stays test, as the LIGHTYEAR authors' test_val_split.py (1/3);
  or ``split.val_from_train`` of the train samples moves to val instead (test stays whole, e.g.
  Fed-ISIC2019, whose published test set is the benchmark's).

The section's keys, their defaults and the rules of the modes are declared once, in
:class:`benchlib.declarations.settings.SplitSettings`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.partition import UNASSIGNED, partition
from benchlib.data.store import OPTIONAL_INDEX_COLUMNS, PreparedData
from benchlib.declarations.settings import SplitSettings, parse_fraction
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import write_with_atomic
from benchlib.primitives.seeding import numpy_rng

SUBSETS = ("train", "val", "test")
SPLIT_COLUMNS = ["sample_id", "client", "subset", "group"]
PARTITIONER_COLUMN = "partitioner"  # optional: splits written before it was recorded lack it


@dataclass(frozen=True)
class SplitSpec:
    """How to turn a prepared store into client subsets."""

    num_clients: int
    partitioner: str
    partition_params: dict[str, Any]
    val_fraction: float
    test_fraction: float
    seed: int
    mode: str = "random"
    val_from_test: Fraction = Fraction(1, 3)
    val_from_train: Fraction | None = None

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> SplitSpec:
        """From a dataset spec: its clients, partition and ``split`` section. The config's
        dataset spec carries the section filled (every key: built as it is); a hand-written
        one, as the file would give it, is checked and filled by
        :class:`benchlib.declarations.settings.SplitSettings`."""
        part = dict(cfg["partition"])
        section = cfg["split"]
        if set(section) == set(SplitSettings.field_names()):
            split = SplitSettings.from_filled("split", section)
        else:
            split = SplitSettings.from_config("split", section)
        return cls(
            num_clients=int(cfg["clients"]),
            partitioner=str(part.pop("name")),
            partition_params=part,
            val_fraction=float(split.val),
            test_fraction=float(split.test),
            seed=split.seed,
            mode=split.mode,
            val_from_test=parse_fraction(split.val_from_test, "split.val_from_test"),
            val_from_train=(
                None
                if split.val_from_train is None
                else parse_fraction(split.val_from_train, "split.val_from_train")
            ),
        )


def assign_subsets(
    clients: np.ndarray, val_fraction: float, test_fraction: float, rng: np.random.Generator
) -> np.ndarray:
    """Per client, a seeded random split into train/val/test with the given fractions.

    Each subset gets at least one sample when the client has three or more.
    """
    require(
        0 <= val_fraction < 1 and 0 <= test_fraction < 1 and val_fraction + test_fraction < 1,
        f"split fractions val={val_fraction}, test={test_fraction} must be in [0, 1) and sum "
        "to less than 1",
    )
    subsets = np.empty(len(clients), dtype=object)
    for client in np.unique(clients):
        members = np.flatnonzero(clients == client)
        members = members[rng.permutation(len(members))]
        n = len(members)
        n_val = max(1, round(val_fraction * n)) if val_fraction > 0 else 0
        n_test = max(1, round(test_fraction * n)) if test_fraction > 0 else 0
        require(
            n - n_val - n_test >= 1,
            f"client {client} has only {n} samples: too few for a train/val/test split",
        )
        subsets[members[:n_val]] = "val"
        subsets[members[n_val : n_val + n_test]] = "test"
        subsets[members[n_val + n_test :]] = "train"
    return subsets


def assign_source_subsets(
    clients: np.ndarray,
    source_split: np.ndarray,
    val_from_test: Fraction,
    seed: int,
    val_from: str = "test",
) -> np.ndarray:
    """Train/test as the source gives them; per client, a seeded share of test moves to val.

    ``floor(val_from_test * n_test)`` of each client's test samples (in sample-id order, then
    shuffled by the stream keyed by the client) become val; ``val_from="train"`` takes that share
    of the train samples instead.
    """
    unknown = sorted(set(source_split.tolist()) - {"train", "test"})
    require(
        not unknown,
        f"split mode source needs the store's source_split to be train or test, found "
        f"{unknown[:3]}; this dataset source gives no train/test split: use split.mode random",
    )
    subsets = source_split.astype(object).copy()
    for client in np.unique(clients):
        pool = np.flatnonzero((clients == client) & (source_split == val_from))
        pool = pool[numpy_rng(seed, "subsets/source", int(client)).permutation(len(pool))]
        subsets[pool[: int(val_from_test * len(pool))]] = "val"
    return subsets


SubsetAssigner = Callable[[np.ndarray, pd.DataFrame, SplitSpec], np.ndarray]
_SUBSET_MODES: dict[str, SubsetAssigner] = {
    "random": lambda clients, index, spec: assign_subsets(
        clients, spec.val_fraction, spec.test_fraction, numpy_rng(spec.seed, "subsets")
    ),
    "source": lambda clients, index, spec: assign_source_subsets(
        clients,
        index["source_split"].to_numpy(),
        spec.val_from_test if spec.val_from_train is None else spec.val_from_train,
        spec.seed,
        "test" if spec.val_from_train is None else "train",
    ),
}


def make_split(data: PreparedData, spec: SplitSpec) -> pd.DataFrame:
    """Partition the store's samples into clients and subsets (deterministic for a seed)."""
    index = data.index.sort_values("sample_id", kind="stable").reset_index(drop=True)
    labels = index["label"].to_numpy()
    groups = index["group"].to_numpy()
    clients = partition(
        spec.partitioner,
        labels,
        groups,
        spec.num_clients,
        numpy_rng(spec.seed, "partition"),
        spec.partition_params,
        columns={c: index[c].to_numpy() for c in OPTIONAL_INDEX_COLUMNS if c in index},
    )
    kept = clients != UNASSIGNED
    index, clients = index[kept].reset_index(drop=True), clients[kept]
    subsets = _SUBSET_MODES[spec.mode](clients, index, spec)
    table = pd.DataFrame(
        {
            "sample_id": index["sample_id"],
            "client": clients,
            "subset": subsets,
            "group": index["group"],
            PARTITIONER_COLUMN: spec.partitioner,
        }
    )
    order = {name: i for i, name in enumerate(SUBSETS)}
    table["_order"] = table["subset"].map(order)
    table = table.sort_values(["client", "_order", "sample_id"], kind="stable")
    return table.drop(columns="_order").reset_index(drop=True)


def write_split(table: pd.DataFrame, path: str | Path) -> None:
    """Write a split table as CSV, atomically (with its partitioner where the table has one)."""
    columns = SPLIT_COLUMNS + [c for c in (PARTITIONER_COLUMN,) if c in table]
    write_with_atomic(path, lambda tmp: table[columns].to_csv(tmp, index=False))


def read_split(path: str | Path, data: PreparedData, num_clients: int) -> pd.DataFrame:
    """Read and validate a split CSV against the store and the expected client count."""
    path = Path(path)
    require(path.is_file(), f"split file {path} not found; run the split step first")
    try:
        table = pd.read_csv(
            path,
            dtype={"sample_id": str, "subset": str, "group": str, PARTITIONER_COLUMN: str},
            keep_default_na=False,
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise BenchlibError(
            f"split file {path} is not a readable CSV ({exc}); recreate it"
        ) from exc
    missing = [c for c in ("sample_id", "client", "subset") if c not in table]
    require(not missing, f"split file {path} lacks columns {missing}; recreate it")
    duplicated = table["sample_id"][table["sample_id"].duplicated()]
    require(
        duplicated.empty,
        f"split file {path} lists sample {duplicated.iloc[0] if len(duplicated) else ''!s} more "
        "than once (overlapping subsets); recreate it",
    )
    unknown = set(table["sample_id"]) - set(data.index["sample_id"])
    require(
        not unknown,
        f"split file {path} names {len(unknown)} samples absent from the prepared data "
        f"(e.g. {sorted(unknown)[0] if unknown else ''}); recreate the split",
    )
    if PARTITIONER_COLUMN in table:
        names = sorted(set(table[PARTITIONER_COLUMN]))
        require(
            len(names) == 1 and names[0] != "",
            f"split file {path} names partitioners {names}, not one; recreate it",
        )
    bad_subsets = set(table["subset"]) - set(SUBSETS)
    require(not bad_subsets, f"split file {path} has unknown subsets {sorted(bad_subsets)}")
    clients = sorted(table["client"].unique().tolist())
    require(
        clients == list(range(num_clients)),
        f"split file {path} has clients {clients}, expected 0..{num_clients - 1}; recreate it "
        "with the configured number of clients",
    )
    for client in clients:
        held = set(table.loc[table["client"] == client, "subset"])
        lacking = [s for s in SUBSETS if s not in held]
        require(not lacking, f"split file {path}: client {client} has no {lacking} samples")
    return table


def split_partitioner(table: pd.DataFrame) -> str | None:
    """The partitioner a split (as :func:`read_split` returns it) records; None for a split
    written before splits recorded it."""
    if PARTITIONER_COLUMN not in table or table.empty:
        return None
    return str(table[PARTITIONER_COLUMN].iloc[0])
