"""What this plugin adds to benchlib, declared once and torch-free.

benchlib imports this module (the ``benchlib.plugins`` entry point) in every process, Snakemake's
parse included, so it imports no torch: each declaration names its implementation as
``"module:attribute"``, imported only when a cell builds it.
"""

import benchlib_fedavgm.report  # noqa: F401  (registers the worst_client report kind)
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.declarations.params import Param
from benchlib.methods.catalog import METHODS, declare_method
from benchlib_fedavgm.source import prepare_inverted

declare_method(
    "fedavgm",
    "benchlib_fedavgm.method:FedAvgM",
    "star",
    # FedAvg's own parameters (weighting, gamma), reused from its declaration, plus two
    params={
        **METHODS.get("fedavg").params.entries,
        "server_lr": Param(
            {"type": "number", "exclusiveMinimum": 0}, 1.0, "server learning rate eta"
        ),
        "momentum": Param(
            {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
            0.9,
            "server momentum beta: v <- beta v + (g - mean); g <- g - eta v",
        ),
    },
    description="FedAvg with server momentum (Hsu et al. 2019)",
)

register_dataset(
    DatasetSource(
        name="mnist5k_inverted",
        build=prepare_inverted,
        num_classes=10,
        image_shape=(1, 28, 28),
        description="the 5,000 mnist5k images with inverted grey levels (255 - x)",
    )
)
