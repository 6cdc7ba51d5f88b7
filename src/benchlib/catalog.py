"""The torch-free catalog: names and parameters of everything a config may name.

Snakemake checks a config when it parses the workflow, and must not import torch for that (it
would add seconds to every `snakemake -n`). So the facts a config check needs - which methods,
models, malfunctions and tasks exist, and which parameters they take - live here, as plain data;
the implementations (torch) are imported only when a cell runs, and
``tests/test_catalog.py`` checks that both sides agree.

Method and malfunction parameters are JSON-schema fragments: the config check validates the
values (types, ranges, enums such as ``variant``) before any cell runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchlib.registry import Registry

VARIANT = {"enum": ["paper", "authors"], "description": "paper = faithful; authors = their code"}
PROBABILITY = {"type": "number", "minimum": 0, "maximum": 1}
NON_NEGATIVE = {"type": "number", "minimum": 0}


@dataclass(frozen=True)
class MethodEntry:
    """A method: where its class lives, its topology and its parameters (JSON schema)."""

    module: str  # benchlib.methods.<module> (or a full dotted module path) registers the class
    topology: str  # "star" or "p2p"
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def variants(self) -> tuple[str, ...]:
        """The named variants (``paper`` first) or () for methods with one behaviour."""
        return tuple(self.params.get("variant", {}).get("enum", ()))


METHODS: Registry[MethodEntry] = Registry("method")
for _name, _entry in {
    "local": MethodEntry("local", "p2p"),
    "erm": MethodEntry("erm", "star"),
    "fedavg": MethodEntry(
        "fedavg",
        "star",
        {
            "weighting": {"enum": ["samples", "batches", "uniform"]},
            "gamma": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        },
    ),
    "p2p_fedavg": MethodEntry("fedavg", "p2p", {"variant": VARIANT}),
    "lightyear": MethodEntry(
        "lightyear",
        "p2p",
        {
            "tau": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "gamma": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "variant": VARIANT,
        },
    ),
    "fedprox": MethodEntry(
        "fedprox",
        "star",
        {"mu": NON_NEGATIVE, "weighting": {"enum": ["samples", "batches", "uniform"]}},
    ),
    "krum": MethodEntry(
        "krum",
        "star",
        {
            "f": {"type": ["integer", "null"], "minimum": 0},
            "m": {"type": "integer", "minimum": 1},
            "variant": VARIANT,
        },
    ),
    "afa": MethodEntry(
        "afa",
        "star",
        {
            "xi0": NON_NEGATIVE,
            "delta_xi": {"type": ["number", "null"], "minimum": 0},
            "alpha0": {"type": "number", "exclusiveMinimum": 0},
            "beta0": {"type": "number", "exclusiveMinimum": 0},
            "block_threshold": PROBABILITY,
            "variant": VARIANT,
        },
    ),
    "asmr": MethodEntry(
        "asmr",
        "star",
        {
            "momentum": {"type": ["number", "null"], "minimum": 0, "exclusiveMaximum": 1},
            "variant": VARIANT,
        },
    ),
    "cfl": MethodEntry(
        "cfl",
        "star",
        {
            "eps1": NON_NEGATIVE,
            "eps2": NON_NEGATIVE,
            "relative": {"type": "boolean"},
            "variant": VARIANT,
        },
    ),
    "ditto": MethodEntry("ditto", "star", {"lam": NON_NEGATIVE, "variant": VARIANT}),
    "balance": MethodEntry(
        "balance",
        "p2p",
        {"gamma": NON_NEGATIVE, "kappa": NON_NEGATIVE, "alpha": PROBABILITY, "variant": VARIANT},
    ),
    "scclip": MethodEntry(
        "scclip",
        "p2p",
        {
            "b": {"type": ["integer", "null"], "minimum": 0},
            "tau": {"type": ["number", "null"], "exclusiveMinimum": 0},
            "variant": VARIANT,
        },
    ),
    "fedagain": MethodEntry(
        "fedagain",
        "star",
        {
            "eps": {"type": "number", "exclusiveMinimum": 0},
            "benchmark_subset": {"enum": ["val", "train"]},
        },
    ),
    "fedmedian": MethodEntry("fedmedian", "star"),
    "bulyan": MethodEntry("bulyan", "star", {"f": {"type": ["integer", "null"], "minimum": 0}}),
    "drfa": MethodEntry(
        "drfa",
        "star",
        {
            "gamma": NON_NEGATIVE,
            "gamma_decay": NON_NEGATIVE,
            "floor": PROBABILITY,
            "clients_per_round": {"type": "integer", "minimum": 0},
            "dual_clients": {"type": "integer", "minimum": 0},
            "variant": VARIANT,
        },
    ),
    "fedsr": MethodEntry(
        "fedsr",
        "star",
        {
            "z_dim": {"type": "integer", "minimum": 1},
            "l2r": NON_NEGATIVE,
            "cmi": NON_NEGATIVE,
            "num_samples": {"type": "integer", "minimum": 1},
            "weighting": {"enum": ["samples", "batches", "uniform"]},
            "dense": {"type": "boolean"},
        },
    ),
    "tfl": MethodEntry(
        "tfl",
        "star",
        {
            "similarity": {"enum": ["dot", "cosine", "l2", "l1"]},
            "epsilon": PROBABILITY,
            "centrality": {
                "enum": [
                    "betweenness",
                    "degree",
                    "closeness",
                    "eigenvector",
                    "pagerank",
                    "current_flow",
                ]
            },
            "q": NON_NEGATIVE,
            "update_every": {"type": "integer", "minimum": 1},
            "lr_lambda": NON_NEGATIVE,
            "lr_decay": NON_NEGATIVE,
            "floor": PROBABILITY,
            "clients_per_round": {"type": "integer", "minimum": 0},
            "clusters": {"type": "integer", "minimum": 0},
            "embedding_last": {"type": "integer", "minimum": 0},
            "loss_subset": {"enum": ["train", "val"]},
            "normalized_betweenness": {
                "type": "boolean",
                "default": False,
                "description": "betweenness and current-flow betweenness divided by "
                "(n-1)(n-2)/2 (networkx's normalisation); false: the paper's unnormalised sum "
                "(Sec. 3.2)",
            },
            "local_step_scale": {
                "type": "boolean",
                "default": True,
                "description": "dual step tau * lr_lambda * lr_decay^(t+1), tau the mean local "
                "steps of the round's clients (DRFA's schedule); false drops tau",
            },
        },
    ),
}.items():
    METHODS.add(_name, _entry)


# Malfunctions and their parameters (config: datasets.<d>.malfunction.<name>: {...}).
MALFUNCTIONS: Registry[dict[str, dict[str, Any]]] = Registry("malfunction")
MALFUNCTIONS.add("none", {})
MALFUNCTIONS.add(
    "ana",
    {"scale": {"type": "number", "minimum": 0, "description": "noise scale s in percent"}},
)
MALFUNCTIONS.add("sfa", {})
MALFUNCTIONS.add("random", {})
MALFUNCTIONS.add("dynamic", {})
PLACEMENTS = ("first", "last", "random")

# Models: name -> module of benchlib.models that registers it.
MODELS: Registry[str] = Registry("model")
for _name, _module in {
    "femnist_cnn": "cnn",
    "densenet121": "vision",
    "resnet18": "vision",
    "resnet50": "vision",
    "efficientnet_b0": "vision",
    "small_unet": "segmentation",
    "unet": "segmentation",
    "transunet": "transunet",
    "mlp": "tabular",
    "fedavg_cnn": "tfl",
}.items():
    MODELS.add(_name, _module)


@dataclass(frozen=True)
class TaskEntry:
    """A task: its losses (name -> parameter schema), metrics, and the metric tables default to."""

    losses: dict[str, dict[str, Any]]
    metrics: tuple[str, ...]
    primary_metric: str
    default_loss: str


TASKS: Registry[TaskEntry] = Registry("task")
TASKS.add(
    "classification",
    TaskEntry(
        losses={
            "cross_entropy": {},
            "focal": {
                "gamma": NON_NEGATIVE,
                "alpha": {
                    "oneOf": [
                        {"type": "array", "items": NON_NEGATIVE, "minItems": 1},
                        {"const": "inverse_train_frequency"},
                    ]
                },
            },
        },
        metrics=(
            "accuracy",
            "balanced_accuracy",
            "precision_macro",
            "recall_macro",
            "f1_macro",
            "roc_auc",
        ),
        primary_metric="accuracy",
        default_loss="cross_entropy",
    ),
)
TASKS.add(
    "segmentation",
    TaskEntry(
        losses={
            "dice_ce": {"lambda_dice": NON_NEGATIVE, "lambda_ce": NON_NEGATIVE},
            "dice": {},
            "cross_entropy": {},
        },
        metrics=("dice", "pixel_accuracy"),
        primary_metric="dice",
        default_loss="dice_ce",
    ),
)
TASKS.add(
    "regression",
    TaskEntry(
        losses={"mse": {}, "l1": {}},
        metrics=("mse", "mae"),
        primary_metric="mse",
        default_loss="mse",
    ),
)


def check_params(what: str, schema: dict[str, dict[str, Any]], params: dict[str, Any]) -> None:
    """Validate ``params`` against a parameter schema; one clear error for the first problem.

    ``what`` names the owner in the message, e.g. ``method 'lightyear'``.
    """
    from benchlib.errors import BenchlibError

    unknown = sorted(set(params) - set(schema))
    if unknown:
        raise BenchlibError(
            f"{what} does not take parameters {unknown}; it accepts {sorted(schema) or 'none'}"
        )
    if not params:
        return  # nothing to validate (and no jsonschema import: `benchlib bench` runs without it)
    import jsonschema

    validator = jsonschema.Draft202012Validator(
        {"type": "object", "properties": schema, "additionalProperties": False}
    )
    errors = sorted(validator.iter_errors(params), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        where = ".".join(str(p) for p in errors[0].absolute_path)
        raise BenchlibError(f"{what}: {where}: {errors[0].message}")


# Training augmentations a dataset may list (torchvision.transforms.v2 classes, applied per sample).
TRANSFORMS = (
    "ColorJitter",
    "GaussianBlur",
    "RandomAffine",
    "RandomCrop",
    "RandomErasing",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "RandomRotation",
    "RandomVerticalFlip",
)
