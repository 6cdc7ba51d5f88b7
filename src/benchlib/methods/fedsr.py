"""FedSR (Nguyen, Torr and Lim, "FedSR: A Simple and Effective Domain Generalization Method for
Federated Learning", NeurIPS 2022), as in the authors' released code.

The configured model becomes the backbone of a probabilistic representation
(:class:`~benchlib.models.tfl.FedSRNet`): its ``2 z_dim`` outputs are mu and softplus sigma,
z ~ N(mu, diag sigma^2) by reparameterisation, a linear classifier maps z to the classes, and test
predictions average the softmax over 20 draws of z. Each local step minimises

    CE(cls(z), y) + alpha_L2R mean_i ||z_i||_2
        + alpha_CMI mean_i KL(N(C mu_i, C sigma_i) || N(r_mu[y_i], softplus(r_sigma)[y_i]))

(the authors' code uses the unsquared norm; the KL is summed over the z dimensions). r_mu, r_sigma
and C are each client's private parameters (never transmitted or averaged); the server averages
the rest uniformly over the participating clients (the authors' code; ``weighting`` as in
``fedavg``). Defaults: z_dim 512 (ResNet18), alpha_L2R 1e-2, alpha_CMI 5e-4 (the README's PACS
command uses 1e-3), 20 test samples.

Segmentation (``dense: true``, TFL Table 3 on FeTS): the same method per pixel
(:class:`~benchlib.models.tfl.FedSRSegNet`). The backbone (e.g. ``unet``) outputs ``2 z_dim``
channels, mu and softplus sigma at every pixel; z is drawn per pixel, a 1x1 convolution maps it
to the classes, and test predictions average the softmax over the draws per pixel. The objective
is the task's own loss (e.g. ``dice_ce``; FedSR's cross entropy is the classification case) plus
the regularisers of every pixel p, averaged over all pixels of the batch:

    task_loss + alpha_L2R mean_p ||z_p||_2 + alpha_CMI mean_p KL(N(C mu_p, C sigma_p) || prior[y_p])

with the prior of pixel p's label. The dense default z_dim is 64: the authors set z_dim to the
width of the feature the head reads (512 for ResNet18's pooled features, 2048 for ResNet50), and
the U-Net's last decoder level has 64 channels per pixel. Memory: z, mu and sigma are each one
64-channel full-resolution map, like the U-Net's own top-level feature maps; measured on the
``unet`` at 128 x 128 (CPU, batch 2), the tensors kept for the backward pass grow from 315 MiB
(U-Net and dice_ce) to 403 MiB (z_dim 32: 359, 128: 491), about +28 %; evaluation holds one draw
at a time.

``build_model`` receives the cell's task and picks the dense head for per-pixel targets; the
``dense`` parameter overrides that choice (the FeTS experiment sets it explicitly).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from benchlib.methods.base import TrainingContext
from benchlib.methods.fedavg import FedAvg
from benchlib.models.tfl import FedSRNet, FedSRSegNet
from benchlib.primitives.errors import require
from benchlib.tasks.base import Task

Z_DIM = 512  # per sample: ResNet18's feature width, the authors' default
DENSE_Z_DIM = 64  # per pixel: the U-Net's last decoder width (see the module docstring)
DataLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def fedsr_regularisers(
    z: torch.Tensor,
    mu: torch.Tensor,
    sigma: torch.Tensor,
    labels: torch.Tensor,
    r_mu: torch.Tensor,
    r_sigma: torch.Tensor,
    scale: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(L2R, CMI): mean_i ||z_i||_2 and mean_i sum_d KL(N(C mu, C sigma) || N(r_mu_y,
    softplus(r_sigma_y))).

    Per sample: z, mu, sigma are ``[N, z_dim]`` and labels ``[N]``. Per pixel: ``[N, z_dim, H,
    W]`` and ``[N, H, W]``; i then runs over every pixel of the batch (dimension 1 is z's).
    """
    l2r = z.norm(dim=1).mean()
    z_mu, z_sigma = scale * mu, scale * sigma
    # the gathered prior has z last; move it to dimension 1 (a no-op per sample)
    p_mu = r_mu[labels].movedim(-1, 1)
    p_sigma = F.softplus(r_sigma[labels]).movedim(-1, 1)
    kl = (
        torch.log(p_sigma)
        - torch.log(z_sigma)
        + (z_sigma**2 + (z_mu - p_mu) ** 2) / (2 * p_sigma**2)
        - 0.5
    )
    return l2r, kl.sum(dim=1).mean()


class FedSR(FedAvg):
    description = "star; probabilistic representation with L2R and CMI regularisers (local prior)"
    private_prefixes = ("fedsr_prior.",)

    def __init__(
        self,
        *,
        z_dim: int | None,
        l2r: float,
        cmi: float,
        num_samples: int,
        weighting: str,
        dense: bool | None,
    ) -> None:
        super().__init__(weighting=weighting, gamma=1.0)
        self.z_dim = None if z_dim is None else int(z_dim)  # None: Z_DIM or DENSE_Z_DIM
        self.l2r = float(l2r)
        self.cmi = float(cmi)
        self.num_samples = int(num_samples)
        self.dense = dense

    def build_model(
        self, build: Callable[[int], nn.Module], num_outputs: int, task: Task | None = None
    ) -> nn.Module:
        """FedSR's head on ``build(2 z_dim)``: per pixel when ``dense`` (or, with ``dense``
        unset, when ``task`` has per-pixel targets), per sample otherwise."""
        require(num_outputs >= 2, "fedsr needs a classification or segmentation task")
        dense = self.dense if self.dense is not None else task is not None and is_dense(task)
        if dense:
            z_dim = DENSE_Z_DIM if self.z_dim is None else self.z_dim
            return FedSRSegNet(build(2 * z_dim), z_dim, num_outputs, self.num_samples)
        z_dim = Z_DIM if self.z_dim is None else self.z_dim
        return FedSRNet(build(2 * z_dim), z_dim, num_outputs, self.num_samples)

    def loss_fn(
        self, model: FedSRNet | FedSRSegNet, data_loss: DataLoss = F.cross_entropy
    ) -> DataLoss:
        """The local objective on one batch (uses the draws the forward pass kept):
        ``data_loss`` (the cell's task loss: cross entropy or the configured one per sample, the
        task's loss per pixel) + the regularisers."""

        def loss(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            assert model.last is not None
            z, mu, sigma = model.last
            prior = model.fedsr_prior
            l2r, cmi = fedsr_regularisers(z, mu, sigma, labels, prior.r_mu, prior.r_sigma, prior.C)
            return data_loss(outputs, labels) + self.l2r * l2r + self.cmi * cmi

        return loss

    def train_client(self, context: TrainingContext, client: int, round: int) -> None:
        model = context.models[client]
        require(
            isinstance(model, (FedSRNet, FedSRSegNet)), "fedsr: the client model lacks FedSR's head"
        )
        assert isinstance(model, (FedSRNet, FedSRSegNet))
        context.train(client, loss_fn=self.loss_fn(model, context.loss_fn))


def is_dense(task: Task) -> bool:
    """Whether ``task`` has one target per pixel (segmentation's masks)."""
    return task.target_kind == "masks"
