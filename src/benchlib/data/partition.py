"""Partitioners: assign every sample to one of N clients.

Each partitioner is a function ``(labels, groups, num_clients, rng, **params) -> client ids`` in
the registry below. Inputs arrive sorted by sample id, so a seed gives the same partition on every
machine. A partitioner may also take extra store columns by name (``needs``, e.g. ``shard``) and
may leave samples out of every client by giving them the id :data:`UNASSIGNED` (-1), e.g. the
writers or LEAF shards beyond the N clients.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchlib.declarations.params import Param, Params
from benchlib.declarations.registry import Registry
from benchlib.primitives.errors import BenchlibError, require

PartitionFunction = Callable[..., np.ndarray]
UNASSIGNED = -1


@dataclass(frozen=True)
class Partitioner:
    """A partitioner: its function, its declared parameters and the store columns it needs."""

    function: PartitionFunction
    params: Params
    needs: tuple[str, ...] = ()


_PARTITIONERS: Registry[Partitioner] = Registry("partitioner")
MIN_SIZE = Param({"type": "integer", "minimum": 1}, 1, "smallest number of samples per client")


def register_partitioner(
    name: str, params: Mapping[str, Param], needs: tuple[str, ...] = ()
) -> Callable[[PartitionFunction], PartitionFunction]:
    """Decorator adding a partitioner under ``name`` with its parameters (the function gets
    every one, defaults filled); ``needs`` lists store columns it takes."""

    def decorate(func: PartitionFunction) -> PartitionFunction:
        _PARTITIONERS.add(name, Partitioner(func, Params(dict(params)), needs))
        return func

    return decorate


def partitioner_names() -> list[str]:
    return _PARTITIONERS.names()


def partitioner_params(name: str) -> Params:
    return _PARTITIONERS.get(name).params


def check_partition_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Partitioner ``name``'s parameters checked (one clear error naming a bad key) with the
    defaults filled."""
    return _PARTITIONERS.get(name).params.resolve(f"partitioner {name!r} params", params)


def partition_settings(section: Mapping[str, Any]) -> dict[str, Any]:
    """A dataset's ``partition`` section (``name`` + parameters), checked, defaults filled."""
    name = section["name"]
    params = {k: v for k, v in section.items() if k != "name"}
    return {"name": name, **check_partition_params(name, params)}


def partition(
    name: str,
    labels: np.ndarray,
    groups: np.ndarray,
    num_clients: int,
    rng: np.random.Generator,
    params: dict[str, Any] | None = None,
    columns: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """Run partitioner ``name``; returns an int array of client ids (or -1), one per sample.

    ``columns`` holds optional store columns (e.g. ``shard``) for partitioners that need them.
    """
    params = check_partition_params(name, params or {})
    require(num_clients >= 1, f"number of clients must be >= 1, got {num_clients}")
    partitioner = _PARTITIONERS.get(name)
    extra = {}
    for column in partitioner.needs:
        values = (columns or {}).get(column)
        require(
            values is not None and all(str(v) for v in values),
            f"partitioner {name!r} needs the store column {column!r}, which this dataset source "
            "does not fill (only LEAF JSON imports have shards); use partition writers instead",
        )
        extra[column] = np.asarray(values)
    return partitioner.function(labels, groups, num_clients, rng, **extra, **params)


def _check_min_size(clients: np.ndarray, num_clients: int, min_size: int) -> bool:
    counts = np.bincount(clients[clients != UNASSIGNED], minlength=num_clients)
    return bool(counts.min() >= min_size)


@register_partitioner("iid", {"min_size": MIN_SIZE})
def iid_partition(
    labels: np.ndarray,
    groups: np.ndarray,
    num_clients: int,
    rng: np.random.Generator,
    min_size: int,
) -> np.ndarray:
    """Shuffle and deal samples round-robin: client sizes differ by at most one."""
    require(
        len(labels) >= num_clients * min_size,
        f"iid partition: {len(labels)} samples cannot give {num_clients} clients "
        f"{min_size} each; lower partition.min_size or the number of clients",
    )
    order = rng.permutation(len(labels))
    clients = np.empty(len(labels), dtype=np.int64)
    clients[order] = np.arange(len(labels)) % num_clients
    return clients


@register_partitioner(
    "dirichlet",
    {
        "alpha": Param({"type": "number", "exclusiveMinimum": 0}, 0.5, "Dir(alpha) concentration"),
        "min_size": Param(MIN_SIZE.schema, 10, MIN_SIZE.description),
        "max_draws": Param(
            {"type": "integer", "minimum": 1}, 100, "redraws until every client has min_size"
        ),
    },
)
def dirichlet_partition(
    labels: np.ndarray,
    groups: np.ndarray,
    num_clients: int,
    rng: np.random.Generator,
    alpha: float,
    min_size: int,
    max_draws: int,
) -> np.ndarray:
    """Label skew: for each class, client shares are drawn from Dir(alpha, ..., alpha).

    Redraws (at most ``max_draws`` times) until every client holds ``min_size`` samples.
    """
    classes = np.unique(labels)
    for _ in range(max_draws):
        clients = np.empty(len(labels), dtype=np.int64)
        for cls in classes:
            members = np.flatnonzero(labels == cls)
            members = members[rng.permutation(len(members))]
            shares = rng.dirichlet(np.full(num_clients, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(members)).astype(np.int64)
            for client, chunk in enumerate(np.split(members, cuts)):
                clients[chunk] = client
        if _check_min_size(clients, num_clients, min_size):
            return clients
    raise BenchlibError(
        f"dirichlet partition: no draw gave all {num_clients} clients at least {min_size} "
        f"samples in {max_draws} tries (alpha={alpha}); raise partition.alpha or lower "
        "partition.min_size"
    )


@register_partitioner("groups", {"min_size": MIN_SIZE})
def group_partition(
    labels: np.ndarray,
    groups: np.ndarray,
    num_clients: int,
    rng: np.random.Generator,
    min_size: int,
) -> np.ndarray:
    """Natural groups (writers, hospitals...): whole groups dealt to clients after a shuffle.

    With exactly ``num_clients`` groups, group i (in sorted order) becomes client i.
    """
    names = np.unique(groups)
    require(
        len(names) >= num_clients,
        f"groups partition: {len(names)} groups cannot fill {num_clients} clients",
    )
    order = names if len(names) == num_clients else names[rng.permutation(len(names))]
    group_to_client = {name: i % num_clients for i, name in enumerate(order)}
    clients = np.array([group_to_client[g] for g in groups], dtype=np.int64)
    require(
        _check_min_size(clients, num_clients, min_size),
        f"groups partition: a client has fewer than {min_size} samples; lower partition.min_size",
    )
    return clients


@register_partitioner(
    "leaf-shards",
    {
        "shards_per_client": Param(
            {"type": "integer", "minimum": 1}, 1, "whole LEAF shards per client"
        ),
        "min_size": MIN_SIZE,
    },
    needs=("shard",),
)
def leaf_shard_partition(
    labels: np.ndarray,
    groups: np.ndarray,
    num_clients: int,
    rng: np.random.Generator,
    shard: np.ndarray,
    shards_per_client: int,
    min_size: int,
) -> np.ndarray:
    """Whole LEAF shards per client; one each (default) as the LIGHTYEAR authors' preprocess.py.

    Shard names are sorted lexicographically (like the authors' sorted file list); client i takes
    shards i*S .. i*S+S-1 of that order (S = ``shards_per_client``), so the first N*S shards are
    used and samples of later shards are left out. S > 1 gives fewer clients with more data each
    (e.g. the 8-shard FEMNIST sample as 4 clients of 2 shards). Deterministic: no randomness.
    """
    names = sorted(set(shard.tolist()))
    wanted = num_clients * shards_per_client
    require(
        len(names) >= wanted,
        f"leaf-shards partition: {len(names)} LEAF shards cannot fill {num_clients} clients "
        f"({shards_per_client} shard(s) each); lower the number of clients or "
        "partition.shards_per_client, or use partition writers",
    )
    client_of = {name: i // shards_per_client for i, name in enumerate(names[:wanted])}
    clients = np.array([client_of.get(s, UNASSIGNED) for s in shard.tolist()], dtype=np.int64)
    require(
        _check_min_size(clients, num_clients, min_size),
        f"leaf-shards partition: a client has fewer than {min_size} samples; lower "
        "partition.min_size",
    )
    return clients


@register_partitioner(
    "writers",
    {
        "writers_per_client": Param(
            {"type": "integer", "minimum": 1},
            description="whole writers per client (seeded assignment)",
            required=True,
        ),
        "min_size": MIN_SIZE,
    },
)
def writer_partition(
    labels: np.ndarray,
    groups: np.ndarray,
    num_clients: int,
    rng: np.random.Generator,
    writers_per_client: int,
    min_size: int,
) -> np.ndarray:
    """A seeded assignment of whole writers (the store's groups), K per client.

    The sorted writer ids are shuffled; client i takes writers i*K .. i*K+K-1 of that order.
    Writers beyond N*K are left out, so every client is a distinct set of K writers.
    """
    names = np.unique(groups)
    require(
        len(names) > 0 and all(str(n) for n in names),
        "writers partition needs writer ids in the store's group column; this dataset source "
        "has none: use partition iid or dirichlet",
    )
    wanted = num_clients * writers_per_client
    require(
        len(names) >= wanted,
        f"writers partition: {num_clients} clients x {writers_per_client} writers need {wanted} "
        f"writers, the data has {len(names)}; lower partition.writers_per_client",
    )
    order = names[rng.permutation(len(names))]
    client_of = {name: i // writers_per_client for i, name in enumerate(order[:wanted])}
    clients = np.array([client_of.get(g, UNASSIGNED) for g in groups], dtype=np.int64)
    require(
        _check_min_size(clients, num_clients, min_size),
        f"writers partition: a client has fewer than {min_size} samples; raise "
        "partition.writers_per_client or lower partition.min_size",
    )
    return clients


def _largest_remainder(quotas: np.ndarray, total: int) -> np.ndarray:
    """Integers rounding ``quotas`` (summing to ``total``) that keep the sum: floors, then one
    more for the largest fractional parts (ties: the lower client id)."""
    counts = np.floor(quotas + 1e-9).astype(np.int64)
    missing = total - int(counts.sum())
    order = sorted(range(len(quotas)), key=lambda k: (-(quotas[k] - counts[k]), k))
    counts[order[:missing]] += 1
    return counts


@register_partitioner(
    "label-skew",
    {
        "primary": Param({"type": "integer", "minimum": 1}, 2, "primary classes per client"),
        "share": Param(
            {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            0.8,
            "share of a class that goes to the clients it is primary on (Eq. 14)",
        ),
        "assignment": Param(
            {"enum": ["cyclic", "adjacent", "random"]},
            "cyclic",
            "primary classes: cyclic - client k gets classes k*s, k*s+1, ... with stride "
            "s = max(1, C // K) (Eq. 14's share also for K < C); adjacent - stride 1 (the old "
            "rule); random - a seeded draw per client",
        ),
        "min_size": MIN_SIZE,
    },
)
def label_skew_partition(
    labels: np.ndarray,
    groups: np.ndarray,
    num_clients: int,
    rng: np.random.Generator,
    primary: int,
    share: float,
    assignment: str,
    min_size: int,
) -> np.ndarray:
    """FedAgain's label skew (paper Eq. 14): every client has ``primary`` primary classes.

    Class c, primary on the clients P_c, is split so that each k in P_c gets
    ``share * |c| / |P_c|`` samples and every other client ``(1 - share) * |c| / (K - |P_c|)``.
    Primary classes: ``cyclic`` gives client k the classes ks, ks + 1, ... (mod C) with stride
    s = max(1, C // K), so with fewer clients than classes the primaries spread over the classes
    (every client keeps its ``share``; s = 1, adjacent classes, for K >= C); ``adjacent`` always
    uses s = 1; ``random`` draws them per client without replacement. Quotas are rounded to
    integers by largest remainder, so every sample of every class is assigned. A class that is
    primary nowhere is split equally over all clients; one primary everywhere goes to all
    equally.
    """
    classes = np.unique(labels)
    require(
        1 <= primary < len(classes),
        f"label-skew partition: partition.primary must be in 1..{len(classes) - 1} for "
        f"{len(classes)} classes, got {primary}",
    )
    if assignment != "random":
        stride = max(1, len(classes) // num_clients) if assignment == "cyclic" else 1
        primaries = [
            {(k * stride + j) % len(classes) for j in range(primary)} for k in range(num_clients)
        ]
    else:
        primaries = [
            {int(c) for c in rng.choice(len(classes), size=primary, replace=False)}
            for _ in range(num_clients)
        ]
    clients = np.empty(len(labels), dtype=np.int64)
    for index, cls in enumerate(classes):
        members = np.flatnonzero(labels == cls)
        members = members[rng.permutation(len(members))]
        is_primary = np.array([index in p for p in primaries])
        holders = int(is_primary.sum())
        n = len(members)
        if holders in (0, num_clients):
            quotas = np.full(num_clients, n / num_clients)
        else:
            quotas = np.where(
                is_primary, share * n / holders, (1 - share) * n / (num_clients - holders)
            )
        counts = _largest_remainder(quotas, n)
        for client, chunk in enumerate(np.split(members, np.cumsum(counts)[:-1])):
            clients[chunk] = client
    require(
        _check_min_size(clients, num_clients, min_size),
        f"label-skew partition: a client has fewer than {min_size} samples; lower "
        "partition.min_size or the number of clients",
    )
    return clients
