"""Models of the TFL paper: the 2-conv CNN of FedAvg (McMahan et al. 2017) that TFL uses on
CIFAR-10/100 (Table 5), and FedSR's probabilistic representation head (Nguyen et al. 2022), per
sample (:class:`FedSRNet`) and per pixel for segmentation (:class:`FedSRSegNet`)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from benchlib.primitives.errors import BenchlibError


def fedavg_cnn(
    num_outputs: int,
    input_shape: tuple[int, ...],
    *,
    channels: tuple[int, int],
    hidden: int,
) -> nn.Module:
    """Two 5x5 convolutions (32, 64 channels, each followed by ReLU and 2x2 max-pooling), a
    fully connected layer of 512 units and the output layer (TFL Appendix D)."""
    in_channels, height, width = input_shape
    flat = channels[1] * (height // 4) * (width // 4)
    return nn.Sequential(
        nn.Conv2d(in_channels, channels[0], 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(channels[0], channels[1], 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, hidden),
        nn.ReLU(),
        nn.Linear(hidden, num_outputs),
    )


class FedSRPrior(nn.Module):
    """FedSR's local conditional prior: r_mu (C x z, init 0), r_sigma (C x z, init 1, used through
    softplus) and the scale C (init 1). Learned locally, never transmitted."""

    def __init__(self, num_classes: int, z_dim: int) -> None:
        super().__init__()
        self.r_mu = nn.Parameter(torch.zeros(num_classes, z_dim))
        self.r_sigma = nn.Parameter(torch.ones(num_classes, z_dim))
        self.C = nn.Parameter(torch.ones(()))


class FedSRNet(nn.Module):
    """A backbone with 2 z_dim outputs read as (mu, pre-softplus sigma), z ~ N(mu, diag sigma^2)
    by reparameterisation, and a linear classifier z -> classes.

    Training mode draws one z per sample and keeps (z, mu, sigma) in ``last`` for the FedSR loss;
    eval mode returns log of the mean softmax over ``num_samples`` draws, from a generator with a
    fixed seed per call so that evaluation is deterministic and resume-safe.
    """

    def __init__(
        self, backbone: nn.Module, z_dim: int, num_classes: int, num_samples: int = 20
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.z_dim = int(z_dim)
        self.num_samples = int(num_samples)
        self.classifier = self._classifier(num_classes)
        self.fedsr_prior = FedSRPrior(num_classes, self.z_dim)
        self.last: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def _classifier(self, num_classes: int) -> nn.Module:
        return nn.Linear(self.z_dim, num_classes)

    def _check_features(self, h: torch.Tensor) -> None:
        if h.dim() != 2:
            raise BenchlibError(
                f"fedsr: the model outputs {tuple(h.shape)} maps, not one vector per sample (a "
                f"segmentation model); set the method's parameter dense: true"
            )

    def representation(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.backbone(x)
        self._check_features(h)
        return h[:, : self.z_dim], F.softplus(h[:, self.z_dim :])

    def _mean_probabilities(
        self, mu: torch.Tensor, sigma: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        eps = torch.randn(
            (self.num_samples, *mu.shape), generator=generator, device=mu.device, dtype=mu.dtype
        )
        z = mu.unsqueeze(0) + sigma.unsqueeze(0) * eps
        return F.softmax(self.classifier(z), dim=-1).mean(dim=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mu, sigma = self.representation(x)
        if self.training:
            z = mu + sigma * torch.randn_like(mu)
            self.last = (z, mu, sigma)
            return self.classifier(z)
        generator = torch.Generator(device=mu.device)
        generator.manual_seed(0)
        return self._mean_probabilities(mu, sigma, generator).clamp_min(1e-12).log()


class FedSRSegNet(FedSRNet):
    """FedSR per pixel: a dense backbone with ``2 z_dim`` output channels read at every pixel as
    (mu, pre-softplus sigma), z ~ N(mu, diag sigma^2) per pixel by reparameterisation, and a 1x1
    convolution z -> classes, so the output is ``[N, classes, H, W]`` like the backbone's.

    Training mode draws one z map and keeps (z, mu, sigma), each ``[N, z_dim, H, W]``, in
    ``last`` for the loss. Eval mode returns, per pixel, the log of the mean softmax over
    ``num_samples`` draws (as :class:`FedSRNet`: Dice and saved predictions take its arg-max,
    a softmax-based loss recovers the mean probabilities). The draws come one at a time from a
    generator seeded 0 on each call (deterministic), so only one z map is held at once.
    """

    def _classifier(self, num_classes: int) -> nn.Module:
        return nn.Conv2d(self.z_dim, num_classes, kernel_size=1)

    def _check_features(self, h: torch.Tensor) -> None:
        if h.dim() != 4 or h.shape[1] != 2 * self.z_dim:
            raise BenchlibError(
                f"fedsr (dense): the model must output [N, {2 * self.z_dim}, H, W] maps, got "
                f"{tuple(h.shape)}; dense: true needs a segmentation model such as unet"
            )

    def _mean_probabilities(
        self, mu: torch.Tensor, sigma: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        total = torch.zeros((), device=mu.device, dtype=mu.dtype)
        for _ in range(self.num_samples):
            eps = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
            total = total + F.softmax(self.classifier(mu + sigma * eps), dim=1)
        return total / self.num_samples
