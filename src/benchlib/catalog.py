"""The torch-free catalog: names and parameters of everything a config may name.

Snakemake checks a config when it parses the workflow, and must not import torch for that (it
would add seconds to every `snakemake -n`). So the facts a config check needs - which methods,
models, malfunctions and tasks exist, and which parameters they take - live here, as plain data;
the implementations (torch) are imported only when a cell runs, and
``tests/test_catalog.py`` checks that both sides agree.

Parameters are declared once, as :class:`benchlib.params.Params` (type as a JSON-schema fragment,
default, description): the config check validates a config's values against them and fills in
the defaults before any cell runs, and ``benchlib params`` prints the reference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from benchlib.errors import BenchlibError
from benchlib.params import NO_PARAMS, Param, Params
from benchlib.registry import Registry

UNIT = {"type": "number", "minimum": 0, "maximum": 1}
NON_NEGATIVE = {"type": "number", "minimum": 0}
POSITIVE = {"type": "number", "exclusiveMinimum": 0}
COUNT = {"type": "integer", "minimum": 0}
OPTIONAL_COUNT = {"type": ["integer", "null"], "minimum": 0}
BOOLEAN = {"type": "boolean"}
VARIANT = Param(
    {"enum": ["paper", "authors"]},
    "paper",
    "paper = as the method's paper defines it; authors = as the LIGHTYEAR authors' code runs it",
)
WEIGHTING = Param(
    {"enum": ["samples", "batches", "uniform"]},
    "samples",
    "aggregation weights: training-set sizes, numbers of local batches, or equal",
)

# shared by DRFA and TFL (the same dual step and client sampling)
LAMBDA_FLOOR = Param(UNIT, 0.001, "lambda entries below it are raised to it")
CLIENTS_PER_ROUND = Param(COUNT, 0, "clients sampled per round; 0 = all")


@dataclass(frozen=True)
class MethodEntry:
    """A method: where its class lives, its topology and its parameters."""

    module: str  # benchlib.methods.<module> (or a full dotted module path) registers the class
    topology: str  # "star" or "p2p"
    params: Params = NO_PARAMS

    @property
    def variants(self) -> tuple[str, ...]:
        """The named variants (``paper`` first) or () for methods with one behaviour."""
        variant = self.params.entries.get("variant")
        return tuple(variant.schema["enum"]) if variant else ()


def _method(module: str, topology: str, **params: Param) -> MethodEntry:
    return MethodEntry(module, topology, Params(params))


METHODS: Registry[MethodEntry] = Registry("method")
for _name, _entry in {
    "local": _method("local", "p2p"),
    "erm": _method("erm", "star"),
    "fedavg": _method(
        "fedavg",
        "star",
        weighting=WEIGHTING,
        gamma=Param(
            {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            1.0,
            "server step decay: g <- g + gamma^t (mean - g); 1 is plain FedAvg (LIGHTYEAR Fig. 13)",
        ),
    ),
    "p2p_fedavg": _method("fedavg", "p2p", variant=VARIANT),
    "lightyear": _method(
        "lightyear",
        "p2p",
        tau=Param(
            {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            None,
            "agreement threshold (Eq. 17); null = 0.75 (paper) or 0.6 (authors)",
        ),
        gamma=Param(
            {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            0.95,
            "decay of the aggregation step gamma^t (Eq. 18)",
        ),
        variant=VARIANT,
    ),
    "fedprox": _method(
        "fedprox",
        "star",
        mu=Param(NON_NEGATIVE, 0.01, "proximal coefficient mu of mu/2 ||w - w_global||^2"),
        weighting=WEIGHTING,
    ),
    "krum": _method(
        "krum",
        "star",
        f=Param(OPTIONAL_COUNT, None, "assumed Byzantine clients; null = largest f with 2f+2 < n"),
        m=Param({"type": "integer", "minimum": 1}, 1, "models averaged (Multi-Krum); 1 = Krum"),
        variant=VARIANT,
    ),
    "afa": _method(
        "afa",
        "star",
        xi0=Param(NON_NEGATIVE, 2.0, "initial outlier threshold in standard deviations"),
        delta_xi=Param(
            {"type": ["number", "null"], "minimum": 0},
            None,
            "threshold increment per pass; null = 0.5 (paper) or 0.25 (authors)",
        ),
        alpha0=Param(POSITIVE, 3.0, "Beta prior alpha of a client's reputation"),
        beta0=Param(POSITIVE, 3.0, "Beta prior beta of a client's reputation"),
        block_threshold=Param(UNIT, 0.95, "block a client once P(p_k < 0.5) reaches this"),
        variant=VARIANT,
    ),
    "asmr": _method(
        "asmr",
        "star",
        momentum=Param(
            {"type": ["number", "null"], "minimum": 0, "exclusiveMaximum": 1},
            None,
            "server momentum (FedAvgM); null = 0.7 (paper) or 0 (authors)",
        ),
        variant=VARIANT,
    ),
    "cfl": _method(
        "cfl",
        "star",
        eps1=Param(NON_NEGATIVE, 0.4, "split when the cluster's mean update norm is below it"),
        eps2=Param(NON_NEGATIVE, 1.6, "... and some client's update norm is above it"),
        relative=Param(
            BOOLEAN, False, "read eps1, eps2 in units of the round's median client-update norm"
        ),
        variant=VARIANT,
    ),
    "ditto": _method(
        "ditto",
        "star",
        lam=Param(NON_NEGATIVE, 0.5, "proximal weight lambda of the personal models"),
        variant=VARIANT,
    ),
    "balance": _method(
        "balance",
        "p2p",
        gamma=Param(NON_NEGATIVE, 0.3, "acceptance radius relative to the own model's norm"),
        kappa=Param(NON_NEGATIVE, 1.0, "decay rate of the radius over the rounds"),
        alpha=Param(UNIT, 0.5, "weight of the own model when mixing"),
        variant=VARIANT,
    ),
    "scclip": _method(
        "scclip",
        "p2p",
        b=Param(OPTIONAL_COUNT, None, "peers removed before clipping; null = half the peers"),
        tau=Param(
            {"type": ["number", "null"], "exclusiveMinimum": 0},
            None,
            "clipping radius; null = the adaptive remove-then-clip radius",
        ),
        variant=VARIANT,
    ),
    "fedagain": _method(
        "fedagain",
        "star",
        eps=Param(POSITIVE, 0.001, "eps of the trust T_k = 1 / (E_k D_k + eps) (Eq. 9)"),
        benchmark_subset=Param(
            {"enum": ["val", "train"]},
            "val",
            "local data the benchmark error E_k is measured on (Eq. 7: validation)",
        ),
    ),
    "fedmedian": _method("fedmedian", "star"),
    "bulyan": _method(
        "bulyan",
        "star",
        f=Param(OPTIONAL_COUNT, None, "assumed Byzantine clients; null = largest f with n >= 4f+3"),
    ),
    "drfa": _method(
        "drfa",
        "star",
        gamma=Param(NON_NEGATIVE, 0.1, "dual step size gamma"),
        gamma_decay=Param(NON_NEGATIVE, 0.9, "gamma_s = gamma * gamma_decay^(s+1)"),
        floor=LAMBDA_FLOOR,
        clients_per_round=CLIENTS_PER_ROUND,
        dual_clients=Param(COUNT, 0, "clients evaluating the dual loss; 0 = clients_per_round"),
        variant=VARIANT,
    ),
    "fedsr": _method(
        "fedsr",
        "star",
        z_dim=Param(
            {"type": ["integer", "null"], "minimum": 1},
            None,
            "representation size; null = 512 (classification) or 64 (dense)",
        ),
        l2r=Param(NON_NEGATIVE, 0.01, "weight alpha_L2R of the representation's L2 norm"),
        cmi=Param(NON_NEGATIVE, 0.0005, "weight alpha_CMI of the conditional mutual information"),
        num_samples=Param({"type": "integer", "minimum": 1}, 20, "draws of z per prediction"),
        weighting=Param(WEIGHTING.schema, "uniform", WEIGHTING.description),
        dense=Param(
            {"type": ["boolean", "null"]},
            None,
            "per-pixel representation; null = true for segmentation tasks",
        ),
    ),
    "tfl": _method(
        "tfl",
        "star",
        similarity=Param(
            {"enum": ["dot", "cosine", "l2", "l1"]}, "dot", "model similarity of the graph"
        ),
        epsilon=Param(UNIT, 0.4, "edge threshold of the scaled similarities (epsilon-graph)"),
        centrality=Param(
            {
                "enum": [
                    "betweenness",
                    "degree",
                    "closeness",
                    "eigenvector",
                    "pagerank",
                    "current_flow",
                ]
            },
            "betweenness",
            "centrality whose softmax is the prior p",
        ),
        q=Param(NON_NEGATIVE, 0.1, "weight of the KL regulariser towards the prior"),
        update_every=Param(
            {"type": "integer", "minimum": 1}, 5, "rounds between topology updates (f)"
        ),
        lr_lambda=Param(NON_NEGATIVE, 0.1, "dual step size"),
        lr_decay=Param(NON_NEGATIVE, 0.9, "eta_t = lr_lambda * lr_decay^(t+1)"),
        floor=LAMBDA_FLOOR,
        clients_per_round=CLIENTS_PER_ROUND,
        clusters=Param(COUNT, 0, "KMeans clusters of the topology (Table 6); 0 = none"),
        embedding_last=Param(COUNT, 0, "use only the last N parameter tensors (Table 7); 0 = all"),
        loss_subset=Param({"enum": ["train", "val"]}, "train", "local data of the dual losses l_k"),
        normalized_betweenness=Param(
            BOOLEAN,
            False,
            "betweenness and current-flow betweenness divided by (n-1)(n-2)/2 (networkx's "
            "normalisation); false: the paper's unnormalised sum (Sec. 3.2)",
        ),
        local_step_scale=Param(
            BOOLEAN,
            True,
            "dual step tau * lr_lambda * lr_decay^(t+1), tau the mean local steps of the "
            "round's clients (DRFA's schedule); false drops tau",
        ),
    ),
}.items():
    METHODS.add(_name, _entry)


# Malfunctions and their parameters (config: datasets.<d>.malfunction.<name>: {...}).
MALFUNCTIONS: Registry[Params] = Registry("malfunction")
MALFUNCTIONS.add("none", NO_PARAMS)
MALFUNCTIONS.add(
    "ana",
    Params({"scale": Param(NON_NEGATIVE, 120.5, "noise scale s in percent (LIGHTYEAR v1)")}),
)
MALFUNCTIONS.add("sfa", NO_PARAMS)
MALFUNCTIONS.add("random", NO_PARAMS)
MALFUNCTIONS.add("dynamic", NO_PARAMS)
PLACEMENTS = ("first", "last", "random")
# A dataset's malfunction section: these, plus one parameter mapping per malfunction.
MALFUNCTION_SETTINGS = Params(
    {
        "placement": Param(
            {"enum": list(PLACEMENTS)},
            "first",
            "which federation clients malfunction: the first k, the last k or k seeded ones",
        ),
        "start_round": Param(
            COUNT,
            0,
            "diagnostic, not a paper setting: rounds 0..start_round-1 are clean",
        ),
    }
)


def malfunction_settings(
    what: str, section: Mapping[str, Any] | None, malfunctions: Iterable[str] = ()
) -> dict[str, Any]:
    """A malfunction section with its defaults filled: placement, start_round, and the
    parameters of every malfunction it names and of ``malfunctions``."""
    section = dict(section or {})
    own = {k: v for k, v in section.items() if k in MALFUNCTION_SETTINGS}
    named = {k: v for k, v in section.items() if k not in MALFUNCTION_SETTINGS}
    result = MALFUNCTION_SETTINGS.resolve(what, own)
    for name in sorted(set(named) | set(malfunctions)):
        params = MALFUNCTIONS.get(name)
        if name in named or params:
            result[name] = params.resolve(f"{what}.{name}", named.get(name))
    return result


MODEL_INIT = Param(
    {"enum": ["shared", "per_client", None]},
    None,
    "null - the method's choice (per_client for the LIGHTYEAR authors' P2P variants, else "
    "shared); shared - one seeded initial model for all clients; per_client - a separate "
    "random start per client",
)


def model_settings(what: str, model: Mapping[str, Any]) -> dict[str, Any]:
    """A model section ``{name, params, init}`` with the model's parameters checked and every
    default filled."""
    name = model["name"]
    return {
        "name": name,
        "params": MODELS.get(name).params.resolve(
            f"{what}model {name!r} params", model.get("params")
        ),
        "init": model.get("init", MODEL_INIT.default),
    }


@dataclass(frozen=True)
class ModelEntry:
    """A model: the module of benchlib.models that registers its builder, and its parameters
    (a config's ``model.params``; the builder receives every one, defaults filled in)."""

    module: str
    params: Params = NO_PARAMS


def _widths(default: list[int], description: str, min_items: int = 1) -> Param:
    schema = {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": min_items}
    return Param(schema, default, description)


DROPOUT = {"type": "number", "minimum": 0, "exclusiveMaximum": 1}
_IMAGENET = {
    "pretrained": Param(
        BOOLEAN, False, "start from ImageNet weights (results/weights, the fetch_weights rule)"
    ),
    "weights_url": Param(
        {"type": "string"}, "", "download the weights from this URL instead of the pinned one"
    ),
}

MODELS: Registry[ModelEntry] = Registry("model")
for _name, _model in {
    "femnist_cnn": ModelEntry(
        "cnn",
        Params(
            {
                "conv1": Param({"type": "integer", "minimum": 1}, 32, "channels of conv block 1"),
                "conv2": Param({"type": "integer", "minimum": 1}, 64, "channels of conv block 2"),
                "hidden": Param({"type": "integer", "minimum": 1}, 512, "hidden units"),
                "dropout": Param(DROPOUT, 0.5, "dropout before the output layer"),
            }
        ),
    ),
    "densenet121": ModelEntry("vision", Params(_IMAGENET)),
    "resnet18": ModelEntry("vision", Params(_IMAGENET)),
    "resnet50": ModelEntry("vision", Params(_IMAGENET)),
    "efficientnet_b0": ModelEntry("vision", Params(_IMAGENET)),
    "small_unet": ModelEntry(
        "segmentation",
        Params(
            {
                "features": _widths([8, 8, 16, 32, 64, 8], "channels per U-Net level (6)"),
                "dropout": Param(DROPOUT, 0.0, "dropout in the U-Net blocks"),
            }
        ),
    ),
    "unet": ModelEntry(
        "segmentation",
        Params(
            {
                "features": _widths([64, 128, 256, 512, 1024, 64], "channels per U-Net level (6)"),
                "dropout": Param(DROPOUT, 0.0, "dropout in the U-Net blocks"),
                "norm": Param({"enum": ["instance", "batch"]}, "instance", "normalisation layers"),
            }
        ),
    ),
    "transunet": ModelEntry(
        "transunet",
        Params(
            {
                "resnet_layers": _widths([3, 4, 9], "ResNet-50 blocks per hybrid stage"),
                "resnet_channels": _widths([256, 512, 1024], "channels per hybrid stage"),
                "stem_channels": Param(
                    {"type": "integer", "minimum": 1}, 64, "channels of the ResNet stem"
                ),
                "norm_groups": Param(
                    {"type": "integer", "minimum": 1}, 32, "groups of the GroupNorm layers"
                ),
                "hidden_size": Param({"type": "integer", "minimum": 1}, 768, "transformer width"),
                "depth": Param({"type": "integer", "minimum": 1}, 12, "transformer layers"),
                "heads": Param({"type": "integer", "minimum": 1}, 12, "attention heads"),
                "mlp_dim": Param({"type": "integer", "minimum": 1}, 3072, "transformer MLP width"),
                "dropout": Param(DROPOUT, 0.1, "transformer dropout"),
                "decoder_channels": _widths([256, 128, 64, 16], "channels per decoder stage"),
                "head_channels": Param(
                    {"type": "integer", "minimum": 1}, 512, "channels before the decoder"
                ),
            }
        ),
    ),
    "mlp": ModelEntry(
        "tabular",
        Params(
            {
                "hidden": _widths([64, 64], "units per hidden layer ([] = a linear model)", 0),
                "dropout": Param(DROPOUT, 0.0, "dropout after every hidden layer"),
            }
        ),
    ),
    "fedavg_cnn": ModelEntry(
        "tfl",
        Params(
            {
                "channels": _widths([32, 64], "channels of the two conv layers"),
                "hidden": Param({"type": "integer", "minimum": 1}, 512, "hidden units"),
            }
        ),
    ),
}.items():
    MODELS.add(_name, _model)


@dataclass(frozen=True)
class TaskEntry:
    """A task: its losses (name -> parameters), metrics, and the metric tables default to."""

    losses: dict[str, Params]
    metrics: tuple[str, ...]
    primary_metric: str
    default_loss: str


TASKS: Registry[TaskEntry] = Registry("task")
TASKS.add(
    "classification",
    TaskEntry(
        losses={
            "cross_entropy": NO_PARAMS,
            "focal": Params(
                {
                    "gamma": Param(NON_NEGATIVE, 2.0, "focusing parameter gamma"),
                    "alpha": Param(
                        {
                            "oneOf": [
                                {"type": "array", "items": NON_NEGATIVE, "minItems": 1},
                                {"const": "inverse_train_frequency"},
                                {"type": "null"},
                            ]
                        },
                        None,
                        "per-class weights, inverse_train_frequency (FLamby), or null (none)",
                    ),
                }
            ),
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
            "dice_ce": Params(
                {
                    "lambda_dice": Param(NON_NEGATIVE, 1.0, "weight of the Dice term"),
                    "lambda_ce": Param(NON_NEGATIVE, 1.0, "weight of the cross-entropy term"),
                }
            ),
            "dice": NO_PARAMS,
            "cross_entropy": NO_PARAMS,
        },
        metrics=("dice", "pixel_accuracy"),
        primary_metric="dice",
        default_loss="dice_ce",
    ),
)
TASKS.add(
    "regression",
    TaskEntry(
        losses={"mse": NO_PARAMS, "l1": NO_PARAMS},
        metrics=("mse", "mae"),
        primary_metric="mse",
        default_loss="mse",
    ),
)


def loss_settings(
    what: str, task: str, loss: str | None, params: Mapping[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """The task's loss (``None``: its default) and that loss's parameters with defaults filled."""
    entry = TASKS.get(task)
    name = loss or entry.default_loss
    if name not in entry.losses:
        raise BenchlibError(
            f"{what}task {task} has no loss {name!r}; choose one of: "
            f"{', '.join(sorted(entry.losses))}"
        )
    return name, entry.losses[name].resolve(f"{what}loss {name!r} params", params)


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
