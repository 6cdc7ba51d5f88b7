"""The round loop: one federated run (a "cell") from prepared data to metrics.json.

Per round t (0-based): the method picks the participating clients (default all of the
federation, i.e. every client not held out); each trains locally (star: starting from the global
model; P2P: from its own model) and may send a report with its model; each malfunctioning
client's *transmitted copy* is corrupted; then the method aggregates (star: the server builds the
new global model; P2P: every participant builds its own new model from its peers' copies). The
task's primary metric on validation data is logged each round; after the last round every
client's test metrics are measured (held-out clients: on the method's held-out model). A
checkpoint after every round makes a killed run resume with exactly the result of an
uninterrupted one: all randomness is keyed by (seed, round, client).
"""

from __future__ import annotations

import copy
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from benchlib import __version__
from benchlib.declarations.settings import TrainingSettings
from benchlib.facts.provenance import cell_provenance, plugins_used
from benchlib.fl.batching import batched_clients, proximal_rows
from benchlib.fl.checkpoint import (
    clear_checkpoints,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from benchlib.fl.data import BatchSource, CellData, ClientData
from benchlib.fl.device import select_device
from benchlib.fl.loops import predict, train_epoch
from benchlib.fl.malfunctions import MalfunctionPlan
from benchlib.fl.optim import build_optimizer
from benchlib.fl.progress import eta_text, record_round
from benchlib.fl.rng import seed_torch_global, torch_generator
from benchlib.fl.scoring import Scorer, finite_or_none
from benchlib.fl.transforms import Transforms
from benchlib.grid.readings import cell_readings
from benchlib.grid.spec import CellSpec
from benchlib.methods.base import (
    LossHook,
    P2PMethod,
    PeerView,
    StarMethod,
    StarRound,
    build_method,
)
from benchlib.models import build_model
from benchlib.models.vectors import ParamLayout, StackSpace
from benchlib.primitives import cpu_kernels
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import write_json_atomic
from benchlib.primitives.seeding import numpy_rng
from benchlib.tasks import get_task

LOG = logging.getLogger("benchlib")


@dataclass
class LocalTraining:
    """Local training for one round: the engine's :class:`~benchlib.methods.base.TrainingContext`.

    ``train(client)`` runs the configured local epochs of plain training on the client's working
    model; methods may pass another model/optimizer (Ditto's personal model) or a loss hook
    (FedProx's proximal term).
    """

    models: list[nn.Module]
    optimizers: list[torch.optim.Optimizer]
    clients: list[ClientData]
    source: BatchSource
    settings: TrainingSettings
    loss_fn: nn.Module
    seed: int
    round: int
    layout: ParamLayout
    global_vector: torch.Tensor | None = None
    evaluator: Callable[[int, torch.Tensor, str], float] | None = None

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return build_optimizer(list(model.parameters()), **self.settings.optimizer_fields())

    def train_rows(self, client: int) -> np.ndarray:
        return self.clients[client].rows["train"]

    def evaluate(self, client: int, vector: torch.Tensor, subset: str = "val") -> float:
        require(self.evaluator is not None, "this training context cannot evaluate models")
        assert self.evaluator is not None
        return self.evaluator(client, vector, subset)

    def evaluate_loss(self, client: int, vector: torch.Tensor, subset: str = "val") -> float:
        """Mean loss of ``vector`` on the client's ``subset``: eval mode on a copy of the
        client's model (its private parameters kept), so no BatchNorm statistic moves."""
        model = copy.deepcopy(self.models[client])
        self.layout.load(model, vector)
        rows = self.clients[client].rows[subset]
        outputs = predict(model, self.source, rows, precision=self.settings.precision)
        with torch.no_grad():
            return float(self.loss_fn(outputs, self.source.targets_of(rows)))

    def train(
        self,
        client: int,
        model: nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        loss_hook: LossHook | None = None,
        stream: str = "train",
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        rows: np.ndarray | None = None,
    ) -> None:
        """Train ``model`` (default: the client's working model) for the local epochs;
        ``loss_fn(outputs, targets)`` replaces the task loss (FedSR's regularised objective);
        ``rows`` replace the client's training rows (ERM's pooled rows)."""
        model = self.models[client] if model is None else model
        optimizer = self.optimizers[client] if optimizer is None else optimizer
        seed_torch_global(self.seed, f"{stream}/dropout", self.round, client)
        for epoch in range(self.settings.local_epochs):
            generator = torch_generator(self.seed, f"{stream}/shuffle", self.round, client, epoch)
            train_epoch(
                model,
                optimizer,
                self.source,
                self.train_rows(client) if rows is None else rows,
                self.settings.batch_size,
                generator,
                self.loss_fn if loss_fn is None else loss_fn,
                loss_hook,
                augment_key=(self.seed, stream, self.round, client, epoch),
                prefetch=self.settings.prefetch,
                precision=self.settings.precision,
            )


@dataclass
class History:
    """Everything recorded per round (part of metrics.json and of checkpoints)."""

    metric: str = "accuracy"
    val: list[list[float | None]] = field(default_factory=list)
    selections: list[list[list[int]]] = field(default_factory=list)
    scores: list[list[list[float | None]]] = field(default_factory=list)
    schedule: list[dict[str, str]] = field(default_factory=list)
    nonfinite: list[dict[str, Any]] = field(default_factory=list)
    participants: list[list[int]] = field(default_factory=list)
    round_metrics: list[dict[str, Any]] = field(default_factory=list)  # training.round_metrics

    def as_dict(self) -> dict[str, Any]:
        return {
            f"val_{self.metric}": self.val,
            "selections": self.selections,
            "scores": self.scores,
            "schedule": self.schedule,
            "nonfinite": self.nonfinite,
            "participants": self.participants,
            **({"round_metrics": self.round_metrics} if self.round_metrics else {}),
        }

    @classmethod
    def from_dict(cls, metric: str, saved: dict[str, Any]) -> History:
        saved = dict(saved)
        return cls(metric=metric, val=saved.pop(f"val_{metric}"), **saved)


def _peer_scores(scores: dict[int, float], client: int, num_clients: int) -> list[float | None]:
    """A P2P client's score of every client (None for itself, unscored and non-finite ones)."""
    return [
        None if j == client or j not in scores else finite_or_none(scores[j])
        for j in range(num_clients)
    ]


class CellRun:
    """One FL run: builds clients, models and the method from a resolved cell spec."""

    def __init__(
        self,
        spec: CellSpec | dict[str, Any],
        store_dir: Path,
        split_path: Path,
        device: torch.device | None = None,
    ) -> None:
        self.spec = spec if isinstance(spec, CellSpec) else CellSpec.from_json(spec, "cell spec")
        self.config_hash = self.spec.config_hash()
        self.device = device or select_device()
        self.seed = int(self.spec.seed)
        self.num_clients = int(self.spec.clients)
        self.settings = self.spec.training
        self.rounds = self.settings.rounds
        self.held_out = sorted(set(self.spec.held_out))
        self.federation = self.spec.federation()
        self.task = get_task(self.spec.task)
        data = CellData.load(
            store_dir,
            split_path,
            self.num_clients,
            self.task,
            self.device,
            Transforms(self.spec.transforms),
            mode=self.settings.data_mode,
            verify_store=self.settings.verify_store,
        )
        self.clients, self.source = data.clients, data.source
        self.dataset_source, self.partitioner = data.dataset_source, data.partitioner
        self.num_outputs, self.input_shape = data.num_outputs, data.input_shape
        self.loss_fn = self.task.build_loss(
            self.settings.loss,
            self.settings.loss_params,
            train_labels=data.train_labels,
            num_classes=data.num_classes,
        )

        self.method = build_method(self.spec.method, dict(self.spec.method_params))
        self.method.setup(self.num_clients, self.rounds, self.seed)
        self.method.set_train_sizes(
            {c: len(self.clients[c].rows["train"]) for c in range(self.num_clients)}
        )
        self._build_models()

        self.malfunctions = MalfunctionPlan.of(
            self.spec.malfunction,
            dict(self.spec.malfunction_params),
            int(self.spec.k),
            self.federation,
            self.seed,
        )
        self.malicious = self.malfunctions.malicious
        self.history = History(metric=self.task.primary_metric)
        self.start_round = 0
        self.precision = self.settings.precision
        if self.precision != "fp32":
            LOG.info("forwards in %s (training.precision)", self.precision)
        self.batched = batched_clients(
            self.settings,
            self.device,
            self.models,
            self.optimizers,
            self.loss_fn,
            self.method,
            self.precision,
        )
        self.scoring = Scorer(self)

    # --------------------------------------------------------------------------- set-up
    def _build_models(self) -> None:
        self._check_model_fits()
        init = self.spec.model["init"] or self.method.model_init
        seed_torch_global(self.seed, "init")
        initial = self._new_model()
        self.layout = ParamLayout.of(initial, exclude=self.method.private_prefixes)
        if init == "shared":
            self.models = [copy.deepcopy(initial) for _ in range(self.num_clients)]
        else:  # the authors' P2P variants: every client starts from its own random model
            self.models = []
            for client in range(self.num_clients):
                seed_torch_global(self.seed, "init", client)
                self.models.append(self._new_model())
        self.optimizers = [self.new_optimizer(m) for m in self.models]
        self.scratch = copy.deepcopy(initial)
        self.global_vector = self.layout.flatten(initial).to(self.device)
        self._received = StackSpace()  # the star round's [n, d] received vectors

    def _check_model_fits(self) -> None:
        """Refuse a model whose client copies and optimizer states cannot fit in memory, before
        anything is allocated (the model is built on the meta device: no memory, no RNG)."""
        model_cfg = self.spec.model
        try:
            with torch.device("meta"):
                probe = build_model(
                    model_cfg["name"], self.num_outputs, self.input_shape, model_cfg["params"]
                )
        except Exception:  # a model that cannot be built on meta is checked by building it
            return
        count = sum(p.numel() for p in probe.parameters())
        need = 4 * count * (3 * self.num_clients + 2)  # models + two optimizer states, float32
        have = available_memory(self.device)
        if have is not None and need > have:
            raise BenchlibError(
                f"model {model_cfg['name']} with params {model_cfg['params']} has {count:,} "
                f"parameters for inputs {self.input_shape}: its {self.num_clients} client copies "
                f"and optimizer states need about {need / 1024**3:,.1f} GiB, more than the "
                f"{have / 1024**3:,.1f} GiB available; make the model smaller (datasets.<d>.model."
                "params) or the inputs (the dataset's image size)"
            )

    def _new_model(self) -> nn.Module:
        model_cfg = self.spec.model
        model = self.method.build_model(
            lambda outputs: build_model(
                model_cfg["name"], outputs, self.input_shape, model_cfg["params"]
            ),
            self.num_outputs,
            task=self.task,
        )
        return model.to(self.device)

    def new_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return build_optimizer(list(model.parameters()), **self.settings.optimizer_fields())

    def _fresh_vector(self, seed: int) -> torch.Tensor:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self.layout.flatten(self._new_model())

    # ---------------------------------------------------------------------- round loop
    def _participants(self, round_index: int) -> list[int]:
        rng = numpy_rng(self.seed, "participants", round_index)
        chosen = self.method.participants(round_index, list(self.federation), rng)
        require(
            set(chosen) <= set(self.federation) and len(chosen) >= 1,
            f"method {self.spec.method} chose participants {chosen} outside the federation",
        )
        return sorted(chosen)

    def _transmit(
        self, round_index: int, participants: list[int], trained: dict[int, torch.Tensor]
    ) -> dict[int, torch.Tensor]:
        sent, applied = self.malfunctions.transmit(
            self.seed, round_index, trained, self._fresh_vector
        )
        self.history.schedule.append(applied)
        return sent

    def _train_all(
        self, round_index: int, participants: list[int]
    ) -> tuple[dict[int, torch.Tensor], list[dict[str, Any] | None]]:
        context = LocalTraining(
            models=self.models,
            optimizers=self.optimizers,
            clients=self.clients,
            source=self.source,
            settings=self.settings,
            loss_fn=self.loss_fn,
            seed=self.seed,
            round=round_index,
            layout=self.layout,
            global_vector=self.global_vector if isinstance(self.method, StarMethod) else None,
            evaluator=self.scoring.evaluate,
        )
        for client in participants:
            if isinstance(self.method, StarMethod):
                self.layout.load(self.models[client], self.global_vector)
            if not self.settings.persist_optimizer:
                self.optimizers[client] = self.new_optimizer(self.models[client])
        if self.batched is not None:
            for client in participants:
                self.method.before_training(context, client, round_index)
            self.batched.train(
                [self.models[c] for c in participants],
                [self.optimizers[c] for c in participants],
                [self.clients[c].rows["train"] for c in participants],
                self.source,
                self.settings,
                [(self.seed, "train", round_index, c) for c in participants],
                proximal=proximal_rows(
                    self.method,
                    context,
                    participants,
                    self.models[participants[0]],
                    self.layout,
                    self.device,
                ),
            )
        trained, reports = {}, []
        for client in participants:
            if self.batched is None:
                self.method.train_client(context, client, round_index)
            else:
                self.method.after_training(context, client, round_index)
            trained[client] = self.layout.flatten(self.models[client])
            reports.append(self.method.client_report(context, client, round_index))
        return trained, reports

    def _aggregate_star(
        self,
        round_index: int,
        participants: list[int],
        sent: dict[int, torch.Tensor],
        reports: list[dict[str, Any] | None],
    ) -> None:
        assert isinstance(self.method, StarMethod)
        sizes = torch.tensor(
            [self.clients[c].sizes["train"] for c in participants], dtype=torch.float64
        )
        batch = self.settings.batch_size
        info = StarRound(
            round=round_index,
            num_rounds=self.rounds,
            train_sizes=sizes,
            batch_counts=torch.ceil(sizes / batch),
            participants=participants,
            reports=reports,
        )
        received = self._received.stack([sent[c] for c in participants])
        aggregated = self.method.aggregate(self.global_vector, received, info)
        if self._received.holds(aggregated):
            aggregated = aggregated.clone()  # a row view would be overwritten next round
        self.global_vector = aggregated
        if not bool(torch.isfinite(self.global_vector).all()):
            self.history.nonfinite.append({"round": round_index, "model": "global"})
        self.history.selections.append([])
        self.history.scores.append([])

    def _aggregate_p2p(
        self,
        round_index: int,
        participants: list[int],
        trained: dict[int, torch.Tensor],
        sent: dict[int, torch.Tensor],
    ) -> None:
        assert isinstance(self.method, P2PMethod)
        selections: list[list[int]] = [[] for _ in range(self.num_clients)]
        scores: list[list[float | None]] = [[] for _ in range(self.num_clients)]
        for client in participants:
            peers = [j for j in participants if j != client]
            view = PeerView(
                round=round_index,
                client=client,
                own=trained[client],
                peers=peers,
                received=[sent[j] for j in peers],
                evaluator=self.scoring.peer_evaluator(client),
            )
            result = self.method.aggregate_client(view)
            self.layout.load(self.models[client], result.vector)
            if not bool(torch.isfinite(result.vector).all()):
                self.history.nonfinite.append({"round": round_index, "model": client})
            selections[client] = sorted(result.selected)
            if result.scores:
                scores[client] = _peer_scores(result.scores, client, self.num_clients)
        if len(self.federation) < self.num_clients:  # keep one entry per federation client
            selections = [selections[c] for c in self.federation]
            scores = [scores[c] for c in self.federation]
        self.history.selections.append(selections)
        self.history.scores.append(scores)

    def run_round(self, round_index: int) -> None:
        participants = self._participants(round_index)
        trained, reports = self._train_all(round_index, participants)
        sent = self._transmit(round_index, participants, trained)
        if isinstance(self.method, StarMethod):
            self._aggregate_star(round_index, participants, sent, reports)
        else:
            self._aggregate_p2p(round_index, participants, trained, sent)
        if participants != self.federation:
            self.history.participants.append(participants)
        self.history.val.append([self.scoring.primary(c, "val") for c in self.federation])
        if self.settings.round_metrics:  # per-round test metrics (fl/round_metrics.py)
            from benchlib.fl.round_metrics import check_round_metrics, round_test_metrics

            names = check_round_metrics(self.settings.round_metrics, self.task.entry.metrics)
            self.history.round_metrics.append(round_test_metrics(self.scoring, names))

    # ------------------------------------------------------------------ checkpoints
    def state(self, completed_round: int) -> dict[str, Any]:
        return {
            "config_hash": self.config_hash,
            "completed_round": completed_round,
            "models": [m.state_dict() for m in self.models],
            "optimizers": [o.state_dict() for o in self.optimizers],
            "global_vector": self.global_vector.cpu(),
            "method": self.method.state_dict(),
            "history": self.history.as_dict(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        if len(state["models"]) != len(self.models):
            raise ValueError(
                f"it holds {len(state['models'])} client models, the cell has {len(self.models)}"
            )
        for model, saved in zip(self.models, state["models"], strict=True):
            model.load_state_dict(saved)
        for optimizer, saved in zip(self.optimizers, state["optimizers"], strict=True):
            optimizer.load_state_dict(saved)
        self.global_vector = state["global_vector"].to(self.device)
        self.method.load_state_dict(state["method"])
        self.history = History.from_dict(self.task.primary_metric, state["history"])
        self.start_round = int(state["completed_round"]) + 1

    # ------------------------------------------------------------------------ results
    def metrics(self) -> dict[str, Any]:
        result = {
            "benchlib_version": __version__,
            "cell": self.spec.summary(),
            "config": self.spec.recorded(),
            "config_hash": self.config_hash,
            "task": self.task.name,
            "primary_metric": self.task.primary_metric,
            "malicious_clients": self.malicious,
            "history": self.history.as_dict(),
            "method_summary": self.method.summary(),
            # the alternative of every declared reading of the method, defaults included
            "readings": cell_readings(self.spec.method, self.spec.method_params),
            "transmitted_parameters": self.layout.size,  # entries of one sent model vector
            **self.scoring.results(),  # per-client test metrics (and held-out, class counts)
        }
        if self.settings.save_predictions:  # a few test class maps (fl/predictions.py)
            from benchlib.fl.predictions import saved_predictions

            result["predictions"] = saved_predictions(self.scoring, self.settings.save_predictions)
        return result


def available_memory(device: torch.device) -> int | None:
    """Bytes free for a cell's tensors: the GPU's free memory, or the host's MemAvailable."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _events(cell: CellRun, out_path: Path) -> Any:
    """The cell's TensorBoard writer (training.tensorboard; None when off)."""
    if not cell.settings.tensorboard:
        return None
    from benchlib.fl.tensorboard import RoundWriter, tensorboard_dir

    LOG.info("TensorBoard events: %s", tensorboard_dir(out_path))
    return RoundWriter(tensorboard_dir(out_path), cell.start_round)


def _forked_from() -> dict[str, int]:
    """``{"forked_from": server pid}`` in a child of the fork server, else nothing."""
    from benchlib.commands.forkserver import ENV_FORKED

    pid = os.environ.get(ENV_FORKED)
    return {"forked_from": int(pid)} if pid else {}


def run_cell(
    spec: CellSpec | dict[str, Any],
    store_dir: Path,
    split_path: Path,
    out_path: Path,
    ckpt_dir: Path,
    timing_path: Path | None = None,
    stop_after: int | None = None,
) -> dict[str, Any] | None:
    """Run (or resume) one cell and write metrics.json atomically.

    ``stop_after`` ends the process-level run after that many rounds *in this call* without
    writing metrics (used by tests to simulate a crash at a known point).
    """
    started = time.perf_counter()
    cell = CellRun(spec, store_dir, split_path)
    spec = cell.spec
    LOG.info(
        "cell %s/%s/%s k=%s seed=%s on %s: %s data, %d clients, %d rounds, malicious %s",
        spec.experiment,
        spec.malfunction,
        spec.method_id,
        spec.k,
        spec.seed,
        cell.device,
        cell.source.mode,
        cell.num_clients,
        cell.rounds,
        cell.malicious,
    )
    kernels = cpu_kernels.in_effect(spec.training.cpu_kernels)
    LOG.info(
        "CPU kernels: %s (PyTorch %s, oneDNN %s)",
        kernels["setting"],
        kernels["aten"],
        kernels["onednn"],
    )
    note = cpu_kernels.mismatch_note(kernels)
    if note:
        LOG.warning("%s", note)
    latest = latest_checkpoint(ckpt_dir)
    if latest is not None:
        state = load_checkpoint(latest, cell.config_hash, cell.rounds)
        if state is not None:
            try:
                cell.restore(state)
            except (KeyError, ValueError, TypeError, RuntimeError, AttributeError) as exc:
                raise BenchlibError(
                    f"checkpoint {latest} does not fit this cell ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0] if str(exc) else ''}; written by another benchlib "
                    "version?); delete it to restart the cell from scratch"
                ) from exc
            LOG.info("resuming from round %d (%s)", cell.start_round, latest)
    round_times = []
    events = _events(cell, out_path)
    for done, round_index in enumerate(range(cell.start_round, cell.rounds)):
        if stop_after is not None and done >= stop_after:
            LOG.info("stopping after %d rounds as requested", done)
            if events is not None:
                events.close()
            return None
        tick = time.perf_counter()
        cell.run_round(round_index)
        seconds = time.perf_counter() - tick
        if events is None:
            record_round(out_path, cell, round_index, seconds)  # before its checkpoint
        else:  # TensorBoard on: also each client's validation loss, in the line and the events
            losses = {"val_loss": [cell.scoring.loss(c, "val") for c in cell.federation]}
            events.add_round(record_round(out_path, cell, round_index, seconds, losses))
        save_checkpoint(ckpt_dir, round_index, cell.state(round_index))
        round_times.append(time.perf_counter() - tick)
        val = [v for v in cell.history.val[-1] if v is not None]
        LOG.info(
            "round %d/%d done in %.1fs: mean val %s %.4f, ETA %s",
            round_index + 1,
            cell.rounds,
            round_times[-1],
            cell.task.primary_metric,
            sum(val) / len(val) if val else float("nan"),
            eta_text(round_times, cell.rounds - round_index - 1),
        )
        diverged = sorted(
            {str(n["model"]) for n in cell.history.nonfinite if n["round"] == round_index}
        )
        if diverged:
            LOG.warning(
                "round %d/%d: non-finite (NaN/Inf) models: %s; the cell has diverged and its "
                "results are marked as diverged in status and tables",
                round_index + 1,
                cell.rounds,
                ", ".join(diverged),
            )
    if events is not None:
        events.close()
    plugins = plugins_used(cell.spec, cell.dataset_source, cell.partitioner)
    provenance = cell_provenance(cell.device, kernels, plugins)
    metrics = {**cell.metrics(), "provenance": provenance}
    write_json_atomic(out_path, metrics)
    if timing_path is not None:
        write_json_atomic(
            timing_path,
            {
                "wall_seconds": time.perf_counter() - started,
                "round_seconds": round_times,
                "resumed_from_round": cell.start_round,
                "device": str(cell.device),
                "data_mode": cell.source.mode,
                "clients_batched": cell.batched is not None,
                "precision": cell.precision,
                "host": platform.node(),
                # where the cell was trained: a copy restored from Snakemake's between-workflow
                # cache (--cache) names the project that trained it
                "trained_at": os.path.abspath(out_path),
                "threads": torch.get_num_threads(),
                "torch": torch.__version__,
                # this process's CPU: the whole cell in a fresh process; from the fork in a
                # child of `benchlib forkserver`, whose start-up the server paid once
                "process_cpu_seconds": time.process_time(),
                **_forked_from(),
            },
        )
    clear_checkpoints(ckpt_dir)
    key = f"test_{cell.task.primary_metric}"
    values = [c[key] for c in metrics["clients"] if c[key] is not None]
    if cell.history.nonfinite:
        LOG.warning(
            "diverged: %d non-finite models in %d of %d rounds (metrics.json history.nonfinite)",
            len(cell.history.nonfinite),
            len({n["round"] for n in cell.history.nonfinite}),
            cell.rounds,
        )
    LOG.info(
        "finished: mean test %s %.4f -> %s",
        cell.task.primary_metric,
        sum(values) / len(values) if values else float("nan"),
        out_path,
    )
    return metrics
