"""How large a config's models are, counted before anything is allocated (on PyTorch's meta
device): ``benchlib check-config`` refuses a model no machine could train."""

from __future__ import annotations

from typing import Any

from benchlib.primitives.errors import BenchlibError

MAX_PARAMETERS = 10**10  # 40 GB of float32 per copy: no federated cell holds such a model


def parameter_count(name: str, params: dict[str, Any], outputs: int, shape: tuple[int, ...]) -> int:
    """The parameters of model ``name`` for ``outputs`` outputs and inputs of ``shape``."""
    import torch

    from benchlib.models import build_model

    with torch.device("meta"):
        model = build_model(name, outputs, shape, params)
    return sum(p.numel() for p in model.parameters())


def nominal_input_shape(dataset: dict[str, Any]) -> tuple[int, ...] | None:
    """The input shape a dataset's source declares, with its ``size`` parameter (the side of
    resized images) applied; None for tabular sources (their width comes from the data)."""
    from benchlib.data.registry import get_dataset

    shape = tuple(get_dataset(dataset["source"]).image_shape)
    if len(shape) != 3:
        return None
    size = (dataset.get("params") or {}).get("size")
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        shape = (shape[0], size, size)
    return shape


def check_model_sizes(datasets: dict[str, dict[str, Any]]) -> None:
    """Refuse a dataset whose model has more than :data:`MAX_PARAMETERS` parameters."""
    from benchlib.data.registry import get_dataset

    for name, dataset in datasets.items():
        shape = nominal_input_shape(dataset)
        if shape is None:
            continue
        model = dataset["model"]
        outputs = get_dataset(dataset["source"]).num_classes
        try:
            count = parameter_count(model["name"], dict(model["params"]), outputs, shape)
        except Exception:  # e.g. pretrained weights not fetched yet: the cell checks it later
            continue
        if count > MAX_PARAMETERS:
            raise BenchlibError(
                f"datasets.{name}.model: {model['name']} with params {model['params']} has "
                f"{count:,} parameters for inputs {shape} ({4 * count / 1e9:,.0f} GB per copy, "
                f"more than the {MAX_PARAMETERS:,} any cell can hold); make it smaller"
            )
