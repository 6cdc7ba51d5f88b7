"""Flower's simulation engine on the engine benchmark's workload (``benchlib bench flower``).

The question the column answers: what would the same FedAvg cell cost in the framework a user
would otherwise pick? Both sides train the same clients (the engine's rows, as float tensors),
the same FEMNIST CNN from the same initial weights, with the same optimizer settings, the same
keyed shuffling and dropout streams, and each round evaluate the global model on every client's
validation rows. Adam starts fresh every round on both sides (``persist_optimizer: false``), as a
stateless Flower ``ClientApp`` does. Because the arithmetic is the same, the two final global
models differ only by float rounding (the engine averages in float64), which training compounds
from round to round (measured: max |difference| 3e-5 after 2 rounds, 8e-3 after 6): the
comparison times equal work, and :func:`run_flower_cell` returns Flower's final weights so that
the benchmark can show it. ``run_simulation`` is the programmatic entry point; Flower marks it
deprecated in favour of its ``flwr run`` command, which needs a project folder.

Flower runs as its documented simulation: a ``ServerApp`` with the message-API ``FedAvg``
strategy and a ``ClientApp`` on ``run_simulation`` (Ray backend), one CPU per virtual client and
one torch thread per client process, so both sides use the same cores. Timed: the rounds alone
(from the strategy's evaluation hook before round 1 to the one after the last round) and the
whole call including Ray's start-up.

Flower is an optional extra (``pip install 'benchlib[bench]'``); without it the column is
skipped with a message (:func:`flower_missing`).
"""

from __future__ import annotations

import copy
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from benchlib.commands.bench.bare import bench_data, bench_spec
from benchlib.commands.bench.cells import bench_cell
from benchlib.declarations.settings import TrainingSettings
from benchlib.fl.engine import CellRun
from benchlib.fl.optim import build_optimizer
from benchlib.fl.rng import seed_torch_global, torch_generator

Print = Callable[[str], None]

INSTALL_HINT = "pip install -e '.[bench]'"
State = dict[str, torch.Tensor]


def flower_missing() -> str | None:
    """None when Flower's simulation engine imports; otherwise why its column is skipped."""
    try:
        import flwr.simulation  # noqa: F401
        import ray  # noqa: F401
    except ImportError as error:
        return (
            f"Flower column skipped: {error.name or 'flwr'} is not installed "
            f"(install the optional extra: {INSTALL_HINT})"
        )
    return None


@dataclass
class FlowerWorkload:
    """Everything a Flower client needs, as plain tensors (it is pickled to Ray's workers)."""

    model: nn.Module  # holds the cell's initial global weights
    train: list[tuple[torch.Tensor, torch.Tensor]]
    val: list[tuple[torch.Tensor, torch.Tensor]]
    training: TrainingSettings
    seed: int
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

    @classmethod
    def of_cell(cls, cell: CellRun) -> FlowerWorkload:
        """The workload of ``cell``: its clients' rows, model and initial global weights."""
        model = copy.deepcopy(cell.scratch)
        cell.layout.load(model, cell.global_vector)
        return cls(
            model=model,
            train=[cell.source.batch(c.rows["train"]) for c in cell.clients],
            val=[cell.source.batch(c.rows["val"]) for c in cell.clients],
            training=cell.settings,
            seed=cell.seed,
            loss_fn=cell.loss_fn,
        )

    @property
    def clients(self) -> int:
        return len(self.train)

    def initial_state(self) -> State:
        return {name: value.detach().clone() for name, value in self.model.state_dict().items()}


def client_fit(workload: FlowerWorkload, client: int, state: State, round_index: int) -> State:
    """One client's local training from the global ``state`` (what the Flower client runs)."""
    model = copy.deepcopy(workload.model)
    model.load_state_dict(state)
    model.train()
    optimizer = build_optimizer(list(model.parameters()), **workload.training.optimizer_fields())
    x, y = workload.train[client]
    batch = workload.training.batch_size
    seed_torch_global(workload.seed, "train/dropout", round_index, client)
    for epoch in range(workload.training.local_epochs):
        generator = torch_generator(workload.seed, "train/shuffle", round_index, client, epoch)
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(order), batch):
            index = order[start : start + batch]
            optimizer.zero_grad(set_to_none=True)
            workload.loss_fn(model(x[index]), y[index]).backward()
            optimizer.step()
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


@torch.inference_mode()
def client_accuracy(workload: FlowerWorkload, client: int, state: State) -> float:
    """Accuracy of the global ``state`` on one client's validation rows."""
    model = copy.deepcopy(workload.model)
    model.load_state_dict(state)
    model.eval()
    x, y = workload.val[client]
    return float((model(x).argmax(dim=1) == y).float().mean())


def fedavg_by_hand(workload: FlowerWorkload, rounds: int) -> State:
    """FedAvg over :func:`client_fit` without Flower: what the strategy computes (tests)."""
    state = workload.initial_state()
    sizes = torch.tensor([len(y) for _, y in workload.train], dtype=torch.float64)
    for round_index in range(rounds):
        fitted = [client_fit(workload, c, state, round_index) for c in range(workload.clients)]
        state = {
            name: (
                sum(w * f[name].double() for w, f in zip(sizes, fitted, strict=True)) / sizes.sum()
            ).to(state[name].dtype)
            for name in state
        }
    return state


@dataclass(frozen=True)
class FlowerTiming:
    rounds_s: float  # first round's start to the last round's end (evaluation included)
    total_s: float  # the whole run_simulation call, Ray's start-up included
    final_state: State


def _apps(workload: FlowerWorkload, rounds: int, outcome: dict[str, Any]) -> tuple[Any, Any]:
    from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg

    client_app = ClientApp()

    @client_app.train()
    def train(msg: Message, context: Context) -> Message:
        torch.set_num_threads(1)
        client = int(context.node_config["partition-id"])
        round_index = int(msg.content["config"]["server-round"]) - 1
        state = msg.content["arrays"].to_torch_state_dict()
        fitted = client_fit(workload, client, state, round_index)
        reply = RecordDict(
            {
                "arrays": ArrayRecord(fitted),
                "metrics": MetricRecord({"num-examples": len(workload.train[client][1])}),
            }
        )
        return Message(content=reply, reply_to=msg)

    @client_app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        torch.set_num_threads(1)
        client = int(context.node_config["partition-id"])
        accuracy = client_accuracy(workload, client, msg.content["arrays"].to_torch_state_dict())
        metrics = {"accuracy": accuracy, "num-examples": len(workload.val[client][1])}
        return Message(content=RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)

    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        clients = workload.clients
        strategy = FedAvg(
            fraction_train=1.0,
            fraction_evaluate=1.0,
            min_train_nodes=clients,
            min_evaluate_nodes=clients,
            min_available_nodes=clients,
        )

        def stamp(server_round: int, arrays: ArrayRecord) -> None:
            outcome.setdefault("stamps", []).append(time.perf_counter())

        result = strategy.start(
            grid, ArrayRecord(workload.initial_state()), num_rounds=rounds, evaluate_fn=stamp
        )
        outcome["state"] = result.arrays.to_torch_state_dict()

    return server_app, client_app


def run_flower_cell(workload: FlowerWorkload, rounds: int, cpus: int) -> FlowerTiming:
    """Run ``rounds`` FedAvg rounds of ``workload`` in Flower's simulation engine."""
    import logging

    from flwr.simulation import run_simulation

    outcome: dict[str, Any] = {}
    server_app, client_app = _apps(workload, rounds, outcome)
    # Flower logs an INFO block per round and its database layer (alembic) one line per plugin:
    # they would bury the table
    loggers = [logging.getLogger(name) for name in ("flwr", "alembic")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    started = time.perf_counter()
    try:
        run_simulation(
            server_app=server_app,
            client_app=client_app,
            num_supernodes=workload.clients,
            backend_config={
                "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                "init_args": {"num_cpus": cpus, "include_dashboard": False},
            },
        )
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    total = time.perf_counter() - started
    stamps = outcome.get("stamps", [])
    if len(stamps) != rounds + 1 or "state" not in outcome:
        raise RuntimeError(
            f"Flower's simulation ended after {max(len(stamps) - 1, 0)} of {rounds} rounds; "
            "see its log above"
        )
    return FlowerTiming(stamps[-1] - stamps[0], total, outcome["state"])


def max_difference(a: State, b: State) -> float:
    """Largest absolute difference between two state dicts' floating-point tensors."""
    return max(
        float((a[name].float() - b[name].float()).abs().max())
        for name in a
        if a[name].is_floating_point()
    )


def run_flower_comparison(
    rounds: int = 6,
    clients: int = 8,
    samples: int = 400,
    store: Path | None = None,
    out: Print = print,
) -> dict[str, float] | None:
    """Time a ``rounds``-round FedAvg cell in the engine and in Flower's simulation engine.

    Both train the same workload from the same weights (this module); the
    printed weight difference shows they did the same work. Returns Flower / engine ratios, or
    None (with a message) when Flower is not installed.
    """
    missing = flower_missing()
    if missing is not None:
        out(missing)
        return None
    cpus = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        store, split, train_size = bench_data(Path(tmp), store, clients, samples)
        spec = bench_spec("fedavg", clients, persist_optimizer=False)
        workload = FlowerWorkload.of_cell(
            bench_cell(spec, store, split, device=torch.device("cpu"))
        )
        cell = bench_cell(spec, store, split, device=torch.device("cpu"))
        tick = time.perf_counter()
        for round_index in range(rounds):
            cell.run_round(round_index)
        engine = time.perf_counter() - tick
        engine_state = copy.deepcopy(cell.scratch)
        cell.layout.load(engine_state, cell.global_vector)
        flower = run_flower_cell(workload, rounds, cpus)
    difference = max_difference(engine_state.state_dict(), flower.final_state)
    out(
        f"\nFedAvg cell of {rounds} rounds: {clients} clients x ~{train_size} train samples, "
        f"{cpus} cores (Flower: {clients} virtual clients on Ray, 1 core and 1 thread each)"
    )
    out(f"{'run':<32} {'seconds':>8} {'x engine':>9}")
    rows = {
        "engine (benchlib)": engine,
        "Flower simulation, rounds": flower.rounds_s,
        "Flower simulation, with start-up": flower.total_s,
    }
    for name, seconds in rows.items():
        out(f"{name:<32} {seconds:>8.2f} {seconds / engine:>9.2f}")
    out(f"final global models: max |engine - Flower| = {difference:.2e} (same workload)")
    return {"rounds": flower.rounds_s / engine, "total": flower.total_s / engine}
