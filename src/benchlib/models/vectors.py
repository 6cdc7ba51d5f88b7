"""Flat parameter vectors of a model: what clients transmit and methods aggregate.

A vector is the concatenation of every floating-point entry of a model's state dict (parameters
and float buffers such as BatchNorm running statistics). Integer buffers (BatchNorm's
``num_batches_tracked``) are not part of it: they are never averaged and stay with each model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ParamLayout:
    """Names, shapes and offsets of the floating entries of a model's state dict."""

    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]
    numels: tuple[int, ...]

    @classmethod
    def of(cls, model: nn.Module, exclude: tuple[str, ...] = ()) -> ParamLayout:
        """The layout of ``model``'s floating state, without entries whose names start with one
        of ``exclude`` (a method's private parameters: never transmitted or averaged)."""
        state = model.state_dict()
        names = tuple(
            name
            for name, t in state.items()
            if t.is_floating_point() and not (exclude and name.startswith(exclude))
        )
        return cls(
            names=names,
            shapes=tuple(state[n].shape for n in names),
            numels=tuple(state[n].numel() for n in names),
        )

    @property
    def size(self) -> int:
        return sum(self.numels)

    def parameter_entries(self, model: nn.Module, vector: torch.Tensor) -> torch.Tensor:
        """The entries of ``vector`` that hold ``model``'s trainable parameters, in
        ``named_parameters()`` order (the order of the batched path's flat rows)."""
        where, offset = {}, 0
        for name, numel in zip(self.names, self.numels, strict=True):
            where[name] = (offset, numel)
            offset += numel
        parts = [where[name] for name, _ in model.named_parameters()]
        return torch.cat([vector[start : start + numel] for start, numel in parts])

    def parameter_mask(self, model: nn.Module) -> torch.Tensor:
        """A bool vector of length :attr:`size`: True at the entries of ``model``'s parameters
        (``named_parameters()``), False at float buffers such as BatchNorm running statistics.
        Measures of how far models moved (FedAgain's divergence, TFL's model similarity) read
        only the True entries."""
        params = {name for name, _ in model.named_parameters(remove_duplicate=False)}
        if not self.names:
            return torch.zeros(0, dtype=torch.bool)
        return torch.cat(
            [
                torch.full((numel,), name in params, dtype=torch.bool)
                for name, numel in zip(self.names, self.numels, strict=True)
            ]
        )

    def flatten(self, model: nn.Module) -> torch.Tensor:
        """A detached float32 copy of the model's floating state as one vector."""
        state = model.state_dict()
        return torch.cat([state[n].detach().reshape(-1).float() for n in self.names])

    def load(self, model: nn.Module, vector: torch.Tensor) -> None:
        """Copy ``vector`` into the model's floating state, in place."""
        state = model.state_dict()
        offset = 0
        with torch.no_grad():
            for name, shape, numel in zip(self.names, self.shapes, self.numels, strict=True):
                target = state[name]
                target.copy_(vector[offset : offset + numel].view(shape).to(target.dtype))
                offset += numel

    def unflatten_many(self, vectors: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of stacked vectors ``[P, size]`` as ``name -> [P, *shape]`` (no copies)."""
        result, offset = {}, 0
        for name, shape, numel in zip(self.names, self.shapes, self.numels, strict=True):
            result[name] = vectors[:, offset : offset + numel].view(len(vectors), *shape)
            offset += numel
        return result


class StackSpace:
    """Memory kept across calls for stacking flat vectors: a fresh [n, d] tensor of a large
    model costs more in page faults than the arithmetic that reads it. Each :meth:`stack`
    overwrites what the previous one returned."""

    def __init__(self) -> None:
        self._space: torch.Tensor | None = None

    def stack(self, vectors: list[torch.Tensor]) -> torch.Tensor:
        """``torch.stack(vectors)`` (same values, same contiguous layout) in the kept memory."""
        first, space = vectors[0], self._space
        if (
            space is None
            or len(space) < len(vectors)
            or space.shape[1:] != first.shape
            or space.dtype != first.dtype
            or space.device != first.device
        ):
            space = self._space = torch.empty(
                (len(vectors), *first.shape), dtype=first.dtype, device=first.device
            )
        return torch.stack(vectors, out=space[: len(vectors)])

    def holds(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` shares the kept memory (so the next stack would overwrite it)."""
        return (
            self._space is not None
            and tensor.untyped_storage().data_ptr() == self._space.untyped_storage().data_ptr()
        )
