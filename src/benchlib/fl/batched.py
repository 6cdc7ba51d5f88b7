"""Lock-step local training of many clients as one batched computation (``torch.func``).

On a GPU, training eight small CNNs one after another with batch 32 is bound by kernel launches,
not by arithmetic. Here the clients' parameters are stacked along a new leading axis and one
``vmap``-ed ``functional_call`` runs every client's batch in the same kernels; each client keeps
its own data order (the same keyed shuffles as the sequential path), its own augmentation seeds
and its own optimizer state (Adam moments and step counts, SGD momentum), stacked the same way
and written back to the client's ``torch.optim`` optimizer after the round, so checkpoints and
the sequential path see ordinary per-client state.

Clients whose epoch has fewer batches stop stepping when their batches run out (their rows are
padded with zero weight and their update is masked). A client's loss is the mean of per-sample
losses over its own batch, so the gradient of the sum over clients is, slice by slice, each
client's own gradient.

What can run batched (:func:`why_not_batched`): models without cross-sample state in training
(no batch norm), a loss that is a mean of per-sample terms (cross entropy without class weights,
MSE, L1), Adam or SGD with one parameter group, no private (per-client) parameters. Dropout
masks are drawn per client from one keyed stream per round (``vmap`` randomness "different"),
so the batched path is deterministic but its dropout masks differ from the sequential path's.

Resident data without augmentation are gathered on the device (and on a GPU each step replays
as one CUDA graph); streamed data or per-client augmentation go through the host, where the
steps' batches are read ahead by :class:`~benchlib.fl.prefetch.Prefetcher`
(``training.prefetch``), the same batches either way.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from benchlib.declarations.settings import TrainingSettings
from benchlib.fl.data import BatchSource
from benchlib.fl.precision import compute_precision
from benchlib.fl.prefetch import Prefetcher
from benchlib.fl.rng import seed_torch_global, torch_generator
from benchlib.primitives.seeding import derive_seed

PerSampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

_ADAM_KEYS = ("lr", "betas", "eps", "weight_decay")
_SGD_KEYS = ("lr", "momentum", "dampening", "weight_decay", "nesterov")


def per_sample_loss(loss_fn: nn.Module) -> PerSampleLoss | None:
    """The per-sample form of ``loss_fn`` when its batch value is the mean of those terms."""
    if isinstance(loss_fn, nn.CrossEntropyLoss):
        if loss_fn.weight is not None:
            return None  # a weighted mean: not the plain mean of per-sample terms
        smoothing = float(loss_fn.label_smoothing)
        return lambda out, y: nn.functional.cross_entropy(
            out, y, reduction="none", label_smoothing=smoothing
        )
    if isinstance(loss_fn, nn.MSELoss | nn.L1Loss):
        elementwise = nn.functional.mse_loss if isinstance(loss_fn, nn.MSELoss) else nn.l1_loss
        return lambda out, y: elementwise(out, y, reduction="none").flatten(1).mean(dim=1)
    return None


def _optimizer_kind(optimizer: torch.optim.Optimizer) -> str | None:
    if len(optimizer.param_groups) != 1:
        return None
    group = optimizer.param_groups[0]
    if isinstance(optimizer, torch.optim.Adam) and not (
        group.get("amsgrad") or group.get("maximize") or group.get("decoupled_weight_decay")
    ):
        return "adam"
    if isinstance(optimizer, torch.optim.SGD) and not group.get("maximize"):
        return "sgd"
    return None


def _hyper(optimizer: torch.optim.Optimizer) -> tuple[Any, ...]:
    group = optimizer.param_groups[0]
    keys = _ADAM_KEYS if isinstance(optimizer, torch.optim.Adam) else _SGD_KEYS
    return tuple(group.get(key) for key in keys)


def why_not_batched(
    models: list[nn.Module],
    optimizers: list[torch.optim.Optimizer],
    loss_fn: nn.Module,
    private_prefixes: tuple[str, ...] = (),
) -> str | None:
    """Why these clients cannot train batched (``None``: they can)."""
    model = models[0]
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._NormBase):
            return f"the model has {type(module).__name__} (state shared across samples)"
    if any(not b.is_floating_point() for b in model.buffers()):
        return "the model has integer buffers"
    if per_sample_loss(loss_fn) is None:
        return f"the loss {type(loss_fn).__name__} is not a mean of per-sample terms"
    if private_prefixes:
        return "the method keeps private per-client parameters"
    kinds = {_optimizer_kind(o) for o in optimizers}
    if None in kinds or len(kinds) != 1:
        return "only Adam or SGD with one parameter group train batched"
    if len({_hyper(o) for o in optimizers}) != 1:
        return "the clients' optimizers differ in their settings"
    names = [name for name, _ in model.named_parameters()]
    if any([n for n, _ in m.named_parameters()] != names for m in models):
        return "the clients' models differ in structure"
    return None


def flatten_parameters(models: list[nn.Module]) -> torch.Tensor:
    """The clients' parameters as one [C, D] tensor (each row in ``parameters()`` order)."""
    return torch.stack(
        [torch.cat([p.detach().reshape(-1) for p in model.parameters()]) for model in models]
    )


def parameter_views(template: nn.Module, flat: torch.Tensor) -> dict[str, torch.Tensor]:
    """name -> [C, *shape] views of a flat [C, D] parameter tensor (no copies)."""
    views, offset = {}, 0
    for name, param in template.named_parameters():
        views[name] = flat[:, offset : offset + param.numel()].view(len(flat), *param.shape)
        offset += param.numel()
    return views


@dataclass
class StackedOptimizer:
    """Adam or SGD over the clients' flat parameters [C, D], per-client step counts and masks.

    The update of each row is exactly ``torch.optim.Adam`` / ``torch.optim.SGD`` (single-tensor
    form) for that client; inactive clients keep parameters and state unchanged. One flat tensor
    means a handful of kernels per step, however many parameter tensors the model has.
    """

    kind: str
    hyper: dict[str, Any]
    steps: torch.Tensor  # [C] float64 (host): Adam steps taken per client
    state: dict[str, torch.Tensor]  # exp_avg, exp_avg_sq (Adam) or momentum_buffer: [C, D]
    has_momentum: torch.Tensor  # [C, 1] bool: the SGD buffer exists per client

    @classmethod
    def gather(
        cls, optimizers: list[torch.optim.Optimizer], models: list[nn.Module]
    ) -> StackedOptimizer:
        """Stack the per-client torch optimizer states (zeros where a client has none yet)."""
        kind = _optimizer_kind(optimizers[0])
        assert kind is not None
        group = optimizers[0].param_groups[0]
        hyper = {key: group[key] for key in (_ADAM_KEYS if kind == "adam" else _SGD_KEYS)}
        names = ("exp_avg", "exp_avg_sq") if kind == "adam" else ("momentum_buffer",)
        state = {
            name: torch.stack(
                [
                    torch.cat(
                        [
                            _state_of(optimizer, param, name).reshape(-1)
                            for param in model.parameters()
                        ]
                    )
                    for optimizer, model in zip(optimizers, models, strict=True)
                ]
            )
            for name in names
        }
        firsts = [
            o.state.get(next(m.parameters()), {}) for o, m in zip(optimizers, models, strict=True)
        ]
        steps = torch.tensor([float(f.get("step", 0.0)) for f in firsts], dtype=torch.float64)
        device = next(models[0].parameters()).device
        has_momentum = torch.tensor(
            [[f.get("momentum_buffer") is not None] for f in firsts], device=device
        )
        return cls(kind, hyper, steps, state, has_momentum)

    def scatter(self, optimizers: list[torch.optim.Optimizer], models: list[nn.Module]) -> None:
        """Write each client's row back into its torch optimizer's per-parameter state."""
        for client, (optimizer, model) in enumerate(zip(optimizers, models, strict=True)):
            offset = 0
            for param in model.parameters():
                part = slice(offset, offset + param.numel())
                offset += param.numel()
                if self.kind == "adam":
                    if self.steps[client] == 0:
                        continue
                    optimizer.state[param] = {
                        "step": torch.tensor(float(self.steps[client])),
                        **{
                            name: self.state[name][client, part].reshape(param.shape).clone()
                            for name in ("exp_avg", "exp_avg_sq")
                        },
                    }
                elif bool(self.has_momentum[client]) and self.hyper["momentum"] != 0:
                    buffer = self.state["momentum_buffer"][client, part]
                    optimizer.state[param] = {
                        "momentum_buffer": buffer.reshape(param.shape).clone()
                    }

    def schedule(self, active: np.ndarray, device: torch.device) -> None:
        """Plan the next ``len(active)`` steps (``active`` [S, C] bool): the per-step client
        masks and Adam's bias-correction factors go to the device once, not once per step (a
        host-to-device copy per step would make the host wait for the GPU every step)."""
        self._all_active = active.all(axis=1)
        self._masks = torch.from_numpy(active).to(device)[:, :, None]
        if self.kind == "adam":
            _, (beta1, beta2), _, _ = (self.hyper[k] for k in _ADAM_KEYS)
            steps = self.steps.numpy()[None, :] + np.cumsum(active, axis=0, dtype=np.float64)
            steps = np.maximum(steps, 1.0)
            step_size = self.hyper["lr"] / (1.0 - beta1**steps)
            correction2_sqrt = np.sqrt(1.0 - beta2**steps)
            self._step_size = torch.from_numpy(step_size).float().to(device)[:, :, None]
            self._correction2_sqrt = (
                torch.from_numpy(correction2_sqrt).float().to(device)[:, :, None]
            )
            self._step_counts = torch.from_numpy(steps).float().to(device)
            self.steps += torch.from_numpy(active.sum(axis=0, dtype=np.float64))

    @torch.no_grad()
    def apply(
        self, flat: torch.Tensor, grad: torch.Tensor, row: int, fused: bool | None = None
    ) -> None:
        """Step ``row`` of the schedule on the flat parameters [C, D] with their gradient."""
        self.update(flat, grad, self.mask(row), *self.factors(row), fused=fused)

    @torch.no_grad()
    def update(
        self,
        flat: torch.Tensor,
        grad: torch.Tensor,
        mask: torch.Tensor | None,
        *factors: torch.Tensor,
        fused: bool | None = None,
    ) -> None:
        """One step with explicit device ``factors`` (Adam: [C, 1] step size, [C, 1] bias
        correction and [C] step counts; see :meth:`factors`), so that a captured CUDA graph can
        read them from fixed buffers. ``fused`` (default: on a GPU, when every client steps)
        runs Adam as PyTorch's fused kernel, one pass over memory instead of about twenty."""
        if fused is None:
            fused = flat.is_cuda and mask is None
        if self.kind == "adam" and fused and mask is None and hasattr(torch, "_fused_adam_"):
            self._fused_adam(flat, grad, factors[2])
            return
        if self.hyper["weight_decay"] != 0:
            grad = grad.add(flat, alpha=self.hyper["weight_decay"])
        if self.kind == "adam":
            update = self._adam(grad, mask, factors[0], factors[1])
        else:
            update = self._sgd(grad, mask)
        flat.sub_(update if mask is None else torch.where(mask, update, 0.0))

    def _fused_adam(self, flat: torch.Tensor, grad: torch.Tensor, counts: torch.Tensor) -> None:
        """Adam on every row through ``torch._fused_adam_`` (each client one tensor of the
        multi-tensor kernel, with its own step count)."""
        lr, (beta1, beta2), eps, weight_decay = (self.hyper[k] for k in _ADAM_KEYS)
        torch._fused_adam_(
            list(flat.unbind(0)),
            list(grad.unbind(0)),
            list(self.state["exp_avg"].unbind(0)),
            list(self.state["exp_avg_sq"].unbind(0)),
            [],
            list(counts.unbind(0)),
            lr=lr,
            beta1=beta1,
            beta2=beta2,
            weight_decay=weight_decay,
            eps=eps,
            amsgrad=False,
            maximize=False,
        )

    def factors(self, row: int) -> tuple[torch.Tensor, ...]:
        """Adam's device factors of schedule ``row``: step size and bias correction [C, 1] and
        the step counts [C] (none for SGD)."""
        if self.kind != "adam":
            return ()
        return self._step_size[row], self._correction2_sqrt[row], self._step_counts[row]

    def all_active(self, row: int) -> bool:
        """Whether every client steps at schedule ``row``."""
        return bool(self._all_active[row])

    def mask(self, row: int) -> torch.Tensor | None:
        """The [C, 1] mask of the clients stepping at schedule ``row`` (``None``: all do)."""
        return None if self._all_active[row] else self._masks[row]

    def step(
        self, flat: torch.Tensor, grad: torch.Tensor, active: np.ndarray, fused: bool | None = None
    ) -> None:
        """One optimizer step for the ``active`` clients ([C] bool)."""
        self.schedule(active[None, :], flat.device)
        self.apply(flat, grad, 0, fused)

    def _adam(
        self,
        grad: torch.Tensor,
        mask: torch.Tensor | None,
        step_size: torch.Tensor,
        correction2_sqrt: torch.Tensor,
    ) -> torch.Tensor:
        _, (beta1, beta2), eps, _ = (self.hyper[k] for k in _ADAM_KEYS)
        exp_avg, exp_avg_sq = self.state["exp_avg"], self.state["exp_avg_sq"]
        if mask is None:
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            new_avg, new_sq = exp_avg, exp_avg_sq
        else:
            new_avg = exp_avg.lerp(grad, 1 - beta1)
            new_sq = exp_avg_sq.mul(beta2).addcmul_(grad, grad, value=1 - beta2)
            exp_avg.copy_(torch.where(mask, new_avg, exp_avg))
            exp_avg_sq.copy_(torch.where(mask, new_sq, exp_avg_sq))
        denom = (new_sq.sqrt() / correction2_sqrt).add_(eps)
        return (new_avg / denom).mul_(step_size)

    def _sgd(self, grad: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        lr, momentum, dampening, _, nesterov = (self.hyper[k] for k in _SGD_KEYS)
        if momentum != 0:
            buffer = self.state["momentum_buffer"]
            new_buffer = torch.where(
                self.has_momentum, buffer * momentum + grad * (1 - dampening), grad
            )
            buffer.copy_(new_buffer if mask is None else torch.where(mask, new_buffer, buffer))
            self.has_momentum |= True if mask is None else mask
            grad = grad + momentum * new_buffer if nesterov else new_buffer
        return grad * lr


def _state_of(optimizer: torch.optim.Optimizer, param: nn.Parameter, name: str) -> torch.Tensor:
    value = optimizer.state.get(param, {}).get(name)
    return torch.zeros_like(param) if value is None else value.detach()


def _client_batches(
    rows: np.ndarray, batch_size: int, generator: torch.Generator
) -> list[np.ndarray]:
    order = torch.randperm(len(rows), generator=generator).numpy()
    return [rows[order[start : start + batch_size]] for start in range(0, len(rows), batch_size)]


class BatchedClients:
    """Trains a set of clients (same architecture) in lock-step; see the module docstring."""

    def __init__(
        self,
        template: nn.Module,
        loss_fn: nn.Module,
        cuda_graphs: bool = True,
        precision: str = "fp32",
    ) -> None:
        self.skeleton = copy.deepcopy(template).to("meta")
        self.cuda_graphs = cuda_graphs
        self.precision = precision
        loss = per_sample_loss(loss_fn)
        assert loss is not None
        self.loss = loss

        def forward(params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
            return functional_call(self.skeleton, (params, buffers), (x,))

        self._forward = forward

    def outputs(
        self, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor
    ) -> torch.Tensor:
        """Outputs [C, B, ...] of the stacked models on per-client inputs x [C, B, ...]."""
        self.skeleton.train()
        return vmap(self._forward, randomness="different")(params, buffers, x)

    @torch.inference_mode()
    def predict_many(
        self, state: dict[str, torch.Tensor], source: BatchSource, rows: np.ndarray
    ) -> torch.Tensor:
        """Eval-mode outputs [P, N, ...] of P stacked models (``state``: name -> [P, ...]) on
        the same store ``rows``: one batched forward per batch instead of P forwards."""
        self.skeleton.eval()
        models = next(iter(state.values())).shape[0]
        batch_size = max(64, 2048 // models)
        with compute_precision(self.precision, source.device):
            parts = [
                vmap(self._forward, in_dims=(0, None, None))(state, {}, x)
                for x, _ in source.batches(rows, batch_size)
            ]
        return torch.cat(parts, dim=1).float()

    def train(
        self,
        models: list[nn.Module],
        optimizers: list[torch.optim.Optimizer],
        rows: list[np.ndarray],
        source: BatchSource,
        training: TrainingSettings,
        keys: list[tuple[int, str, int, int]],
        proximal: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        """Run the local epochs of every client; ``keys[i]`` = (seed, stream, round, client).

        ``proximal`` = (coefficients c [C, 1], anchors a [C, D]): client i minimises its loss
        + c_i/2 ||w_i - a_i||^2 (FedProx's pull; its gradient c_i (w_i - a_i) joins every step).
        """
        for model in models:
            model.train()
        _, buffers = stack_module_state(models)
        flat = flatten_parameters(models)
        # The gradient is taken per parameter view, each view a leaf sharing flat's memory:
        # a gradient through slices of one flat leaf would zero-fill and add a full [C, D]
        # tensor for every parameter tensor of the model.
        leaves = {
            name: view.requires_grad_(True)
            for name, view in parameter_views(self.skeleton, flat).items()
        }
        optimizer = StackedOptimizer.gather(optimizers, models)
        seed, stream, round_index = keys[0][0], keys[0][1], keys[0][2]
        seed_torch_global(seed, f"{stream}/dropout-batched", round_index)
        batch_size = training.batch_size
        clients = len(rows)
        on_device = source.resident and source.transforms.augmentation is None

        def step(
            x: torch.Tensor,
            y: torch.Tensor,
            weights: torch.Tensor,
            mask: torch.Tensor | None,
            factors: tuple[torch.Tensor, ...],
        ) -> None:
            x = x.view(clients, batch_size, *x.shape[1:])
            y = y.view(clients, batch_size, *y.shape[1:])
            with compute_precision(self.precision, x.device):
                out = self.outputs(leaves, buffers, x)
            per_sample = self.loss(out.float().flatten(0, 1), y.flatten(0, 1))
            loss = (per_sample.view(clients, batch_size) * weights).sum()
            grads = torch.autograd.grad(loss, list(leaves.values()))
            grad = torch.cat([g.reshape(clients, -1) for g in grads], dim=1)
            if proximal is not None:
                grad = grad + proximal[0] * (flat - proximal[1])
            optimizer.update(flat, grad, mask, *factors)

        graphed = (
            GraphedStep(lambda p, w, f: step(*source.batch_at(p), w, None, f))
            if on_device and self.cuda_graphs and source.device.type == "cuda"
            else None
        )
        for epoch in range(training.local_epochs):
            schedules = [
                _client_batches(r, batch_size, torch_generator(s, f"{st}/shuffle", rd, c, epoch))
                for r, (s, st, rd, c) in zip(rows, keys, strict=True)
            ]
            plan = EpochPlan.of(schedules, batch_size)
            optimizer.schedule(plan.active, source.device)
            positions = (
                source.device_positions(plan.rows.reshape(plan.steps, -1)) if on_device else None
            )
            weights = torch.from_numpy(plan.weights).to(source.device)
            if positions is None:  # through the host: read ahead while the steps compute
                parts = [_step_parts(source, plan, n, keys, epoch) for n in range(plan.steps)]
                reads = [part for step_parts in parts for part in step_parts]
                with Prefetcher(source, reads, depth=training.prefetch) as batches:
                    for number, step_parts in enumerate(parts):
                        x, y = _joined([next(batches) for _ in step_parts])
                        factors = optimizer.factors(number)
                        step(x, y, weights[number], optimizer.mask(number), factors)
                continue
            for number in range(plan.steps):
                factors = optimizer.factors(number)
                if graphed is not None and optimizer.all_active(number):
                    graphed.run(positions[number], weights[number], factors)
                    continue
                x, y = source.batch_at(positions[number])
                step(x, y, weights[number], optimizer.mask(number), factors)
        with torch.no_grad():
            views = parameter_views(self.skeleton, flat)
            for client, model in enumerate(models):
                for name, param in model.named_parameters():
                    param.copy_(views[name][client])
        optimizer.scatter(optimizers, models)


class GraphedStep:
    """One lock-step step captured as a CUDA graph and replayed (GPU, resident data).

    A step of small models is a few hundred kernel launches of microseconds each: the host,
    not the GPU, sets the pace. Here the step (gather, forward, backward, optimizer update) is
    recorded once and each later step is one graph launch. Its per-step inputs (store positions
    [C * B], loss weights [C, B] and Adam's [C, 1] factors) are copied into fixed buffers first;
    the first ``WARMUP`` steps run eagerly on a side stream, as CUDA graph capture requires.
    Steps where some clients sit out (masked) stay eager.
    """

    WARMUP = 3

    def __init__(
        self, body: Callable[[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]], None]
    ) -> None:
        self._body = body
        self._inputs: tuple[torch.Tensor, ...] | None = None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._warm = 0

    def run(
        self, positions: torch.Tensor, weights: torch.Tensor, factors: tuple[torch.Tensor, ...]
    ) -> None:
        """Run one step on these per-step inputs (device tensors of fixed shapes)."""
        if self._inputs is None:
            self._inputs = tuple(t.clone() for t in (positions, weights, *factors))
        else:
            for buffer, value in zip(self._inputs, (positions, weights, *factors), strict=True):
                buffer.copy_(value)
        if self._graph is not None:
            self._graph.replay()
            return
        fixed_positions, fixed_weights, *fixed_factors = self._inputs
        if self._warm < self.WARMUP:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._body(fixed_positions, fixed_weights, tuple(fixed_factors))
            torch.cuda.current_stream().wait_stream(side)
            self._warm += 1
            return
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._body(fixed_positions, fixed_weights, tuple(fixed_factors))
        graph.replay()  # capture records the step without running it
        self._graph = graph


@dataclass(frozen=True)
class EpochPlan:
    """One epoch of lock-step steps: store rows [S, C, B] (padded), their loss weights
    [S, C, B] (1 / batch size for real rows, 0 for padding) and which clients step [S, C]."""

    rows: np.ndarray
    weights: np.ndarray
    counts: np.ndarray

    @property
    def steps(self) -> int:
        return self.rows.shape[0]

    @property
    def active(self) -> np.ndarray:
        return self.counts > 0

    @classmethod
    def of(cls, schedules: list[list[np.ndarray]], batch_size: int) -> EpochPlan:
        steps = max(len(s) for s in schedules)
        clients = len(schedules)
        rows = np.zeros((steps, clients, batch_size), dtype=np.int64)
        weights = np.zeros((steps, clients, batch_size), dtype=np.float32)
        counts = np.zeros((steps, clients), dtype=np.int64)
        for number in range(steps):
            batch = [s[number] if number < len(s) else None for s in schedules]
            filler = next(b for b in batch if b is not None)[0]
            for client, chosen in enumerate(batch):
                count = 0 if chosen is None else len(chosen)
                rows[number, client, :] = filler  # padding repeats a real row, weight 0
                if count:
                    rows[number, client, :count] = chosen
                    weights[number, client, :count] = 1.0 / count
                counts[number, client] = count
        return cls(rows, weights, counts)


def _step_parts(
    source: BatchSource,
    plan: EpochPlan,
    number: int,
    keys: list[tuple[int, str, int, int]],
    epoch: int,
) -> list[tuple[np.ndarray, int | None]]:
    """The host reads of step ``number`` as (store rows, augmentation seed) pieces, in batch
    order: the whole step at once without augmentation, else each client's real rows with its
    own keyed seed and its padding rows unaugmented."""
    rows = plan.rows[number]
    if source.transforms.augmentation is None:
        return [(rows.reshape(-1), None)]
    parts: list[tuple[np.ndarray, int | None]] = []
    for client, (seed, stream, round_index, key_client) in enumerate(keys):
        count = int(plan.counts[number, client])
        if count:
            augment = derive_seed(seed, f"{stream}/augment", round_index, key_client, epoch, number)
            parts.append((rows[client, :count], augment))
        if count < rows.shape[1]:
            parts.append((rows[client, count:], None))
    return parts


def _joined(pieces: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    if len(pieces) == 1:
        return pieces[0]
    return torch.cat([x for x, _ in pieces]), torch.cat([y for _, y in pieces])
