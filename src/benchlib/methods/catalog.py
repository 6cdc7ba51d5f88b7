"""The methods a config may name: topology, parameters and implementation, declared once.

Torch-free (Snakemake's parse reads it): each :class:`MethodDeclaration` names its
implementation as ``"module:Class"``, imported only when a cell builds the method
(:func:`benchlib.methods.base.get_method_class`). Every method is declared by one
:func:`declare_method` call (name, implementation, topology, parameter mapping), as models,
malfunctions and readings are by theirs; a plugin package declares its own methods the same way,
in the module its ``benchlib.plugins`` entry point names (see docs/guide/plugins.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchlib.declarations.params import (
    BOOLEAN,
    COUNT,
    NO_PARAMS,
    NON_NEGATIVE,
    OPTIONAL_COUNT,
    POSITIVE,
    UNIT,
    Param,
    Params,
)
from benchlib.declarations.registry import Registry

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
DRAWS = Param(
    {"enum": ["with_replacement", "without_replacement"]},
    "with_replacement",
    "with_replacement = m draws by lambda, the mean of the drawn models by draw count; "
    "without_replacement = every federation client once, the lambda-weighted mean",
)
LAMBDA_START = Param(
    {"enum": ["uniform", "sizes"]},
    "uniform",
    "lambda^(0): 1/N per federation client, or proportional to their training-set sizes (the "
    "DRFA authors' code)",
)


@dataclass(frozen=True)
class MethodDeclaration:
    """A method: its implementation (``"module:Class"``), topology and parameters."""

    implementation: str
    topology: str  # "star" or "p2p"
    params: Params = NO_PARAMS
    description: str = ""

    def __post_init__(self) -> None:
        if self.topology not in ("star", "p2p"):
            raise ValueError(f"method topology must be 'star' or 'p2p', got {self.topology!r}")
        if ":" not in self.implementation:
            raise ValueError(f"implementation {self.implementation!r} is not 'module:Class'")

    @property
    def variants(self) -> tuple[str, ...]:
        """The named variants (``paper`` first) or () for methods with one behaviour."""
        variant = self.params.entries.get("variant")
        return tuple(variant.schema["enum"]) if variant else ()


def declare_method(
    name: str,
    implementation: str,
    topology: str,
    params: Params | dict[str, Param] | None = None,
    description: str = "",
) -> MethodDeclaration:
    """Declare method ``name`` (for plugins: call it in the entry point's module)."""
    declared = params if isinstance(params, Params) else Params(dict(params or {}))
    return METHODS.add(name, MethodDeclaration(implementation, topology, declared, description))


METHODS: Registry[MethodDeclaration] = Registry("method")
declare_method("local", "benchlib.methods.local:LocalOnly", "p2p")
declare_method("erm", "benchlib.methods.erm:Erm", "star")
declare_method(
    "fedavg",
    "benchlib.methods.fedavg:FedAvg",
    "star",
    {
        "weighting": WEIGHTING,
        "gamma": Param(
            {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            1.0,
            "server step decay: g <- g + gamma^t (mean - g); 1 is plain FedAvg (LIGHTYEAR Fig. 13)",
        ),
    },
)
declare_method(
    "p2p_fedavg",
    "benchlib.methods.fedavg:P2PFedAvg",
    "p2p",
    {"variant": VARIANT},
)
declare_method(
    "lightyear",
    "benchlib.methods.lightyear:Lightyear",
    "p2p",
    {
        "tau": Param(
            {"type": "number", "minimum": 0, "maximum": 1},
            description="agreement threshold (Eq. 17)",
            by_variant={"paper": 0.75, "authors": 0.6},
        ),
        "gamma": Param(
            {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            0.95,
            "decay of the aggregation step gamma^t (Eq. 18)",
        ),
        "variant": VARIANT,
    },
)
declare_method(
    "fedprox",
    "benchlib.methods.fedprox:FedProx",
    "star",
    {
        "mu": Param(NON_NEGATIVE, 0.01, "proximal coefficient mu of mu/2 ||w - w_global||^2"),
        "weighting": WEIGHTING,
    },
)
declare_method(
    "krum",
    "benchlib.methods.krum:Krum",
    "star",
    {
        "f": Param(
            OPTIONAL_COUNT, None, "assumed Byzantine clients; null = largest f with 2f+2 < n"
        ),
        "m": Param({"type": "integer", "minimum": 1}, 1, "models averaged (Multi-Krum); 1 = Krum"),
        "variant": VARIANT,
    },
)
declare_method(
    "afa",
    "benchlib.methods.afa:AFA",
    "star",
    {
        "xi0": Param(NON_NEGATIVE, 2.0, "initial outlier threshold in standard deviations"),
        "delta_xi": Param(
            POSITIVE,
            description="threshold increment per pass",
            by_variant={"paper": 0.5, "authors": 0.25},
        ),
        "alpha0": Param(POSITIVE, 3.0, "Beta prior alpha of a client's reputation"),
        "beta0": Param(POSITIVE, 3.0, "Beta prior beta of a client's reputation"),
        "block_threshold": Param(UNIT, 0.95, "block a client once P(p_k < 0.5) reaches this"),
        "variant": VARIANT,
    },
)
declare_method(
    "asmr",
    "benchlib.methods.asmr:ASMR",
    "star",
    {
        "momentum": Param(
            {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
            description="server momentum (FedAvgM)",
            by_variant={"paper": 0.7, "authors": 0.0},
        ),
        "variant": VARIANT,
    },
)
declare_method(
    "cfl",
    "benchlib.methods.cfl:CFL",
    "star",
    {
        "eps1": Param(NON_NEGATIVE, 0.4, "split when the cluster's mean update norm is below it"),
        "eps2": Param(NON_NEGATIVE, 1.6, "... and some client's update norm is above it"),
        "relative": Param(
            BOOLEAN, False, "read eps1, eps2 in units of the round's median client-update norm"
        ),
        "variant": VARIANT,
    },
)
declare_method(
    "ditto",
    "benchlib.methods.ditto:Ditto",
    "star",
    {
        "lam": Param(NON_NEGATIVE, 0.5, "proximal weight lambda of the personal models"),
        "variant": VARIANT,
    },
)
declare_method(
    "balance",
    "benchlib.methods.balance:Balance",
    "p2p",
    {
        "gamma": Param(NON_NEGATIVE, 0.3, "acceptance radius relative to the own model's norm"),
        "kappa": Param(NON_NEGATIVE, 1.0, "decay rate of the radius over the rounds"),
        "alpha": Param(UNIT, 0.5, "weight of the own model when mixing"),
        "variant": VARIANT,
    },
)
declare_method(
    "scclip",
    "benchlib.methods.scclip:SCClip",
    "p2p",
    {
        "b": Param(OPTIONAL_COUNT, None, "peers removed before clipping; null = half the peers"),
        "tau": Param(
            {"type": ["number", "null"], "exclusiveMinimum": 0},
            None,
            "clipping radius; null = the adaptive remove-then-clip radius",
        ),
        "variant": VARIANT,
    },
)
declare_method(
    "fedagain",
    "benchlib.methods.fedagain:FedAgain",
    "star",
    {
        "eps": Param(POSITIVE, 0.001, "eps of the trust T_k = 1 / (E_k D_k + eps) (Eq. 9)"),
        "benchmark_subset": Param(
            {"enum": ["val", "train"]},
            "val",
            "local data the benchmark error E_k is measured on (Eq. 7: validation)",
        ),
    },
)
declare_method("fedmedian", "benchlib.methods.fedmedian:FedMedian", "star")
declare_method(
    "bulyan",
    "benchlib.methods.bulyan:Bulyan",
    "star",
    {
        "f": Param(
            OPTIONAL_COUNT, None, "assumed Byzantine clients; null = largest f with n >= 4f+3"
        ),
    },
)
declare_method(
    "drfa",
    "benchlib.methods.drfa:DRFA",
    "star",
    {
        "gamma": Param(NON_NEGATIVE, 0.1, "dual step size gamma"),
        "gamma_decay": Param(NON_NEGATIVE, 0.9, "gamma_s = gamma * gamma_decay^(s+1)"),
        "floor": LAMBDA_FLOOR,
        "clients_per_round": CLIENTS_PER_ROUND,
        "dual_clients": Param(COUNT, 0, "clients evaluating the dual loss; 0 = clients_per_round"),
        "lambda_start": LAMBDA_START,
        "variant": Param(
            {"enum": ["paper", "authors"]},
            "paper",
            "paper = clients drawn by lambda, the mean of their models (DRFA's Algorithm 1); "
            "authors = clients drawn uniformly, the server step w - sum_i lambda_i (N/m)(w - w_i) "
            "(the DRFA authors' code)",
        ),
        "local_step_scale": Param(
            BOOLEAN,
            True,
            "dual step tau * gamma * gamma_decay^(s+1), tau the mean local steps of the round's "
            "clients; false drops tau",
        ),
        "draws": DRAWS,
    },
)
declare_method(
    "fedsr",
    "benchlib.methods.fedsr:FedSR",
    "star",
    {
        "z_dim": Param(
            {"type": ["integer", "null"], "minimum": 1},
            None,
            "representation size; null = 512 (classification) or 64 (dense)",
        ),
        "l2r": Param(NON_NEGATIVE, 0.01, "weight alpha_L2R of the representation's L2 norm"),
        "cmi": Param(
            NON_NEGATIVE, 0.0005, "weight alpha_CMI of the conditional mutual information"
        ),
        "num_samples": Param({"type": "integer", "minimum": 1}, 20, "draws of z per prediction"),
        "weighting": Param(WEIGHTING.schema, "uniform", WEIGHTING.description),
        "dense": Param(
            {"type": ["boolean", "null"]},
            None,
            "per-pixel representation; null = true for segmentation tasks",
        ),
    },
)
declare_method(
    "tfl",
    "benchlib.methods.tfl:TFL",
    "star",
    {
        "similarity": Param(
            {"enum": ["dot", "cosine", "l2", "l1"]}, "dot", "model similarity of the graph"
        ),
        "epsilon": Param(UNIT, 0.4, "edge threshold of the scaled similarities (epsilon-graph)"),
        "centrality": Param(
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
        "q": Param(NON_NEGATIVE, 0.1, "weight of the KL regulariser towards the prior"),
        "update_every": Param(
            {"type": "integer", "minimum": 1}, 5, "rounds between topology updates (f)"
        ),
        "lr_lambda": Param(NON_NEGATIVE, 0.1, "dual step size"),
        "lr_decay": Param(NON_NEGATIVE, 0.9, "eta_t = lr_lambda * lr_decay^(t+1)"),
        "floor": LAMBDA_FLOOR,
        "clients_per_round": CLIENTS_PER_ROUND,
        "clusters": Param(COUNT, 0, "KMeans clusters of the topology (Table 6); 0 = none"),
        "embedding_last": Param(
            COUNT, 0, "use only the last N parameter tensors (Table 7); 0 = all"
        ),
        "loss_subset": Param(
            {"enum": ["train", "val"]}, "train", "local data of the dual losses l_k"
        ),
        "normalized_betweenness": Param(
            BOOLEAN,
            False,
            "every centrality in networkx's normalised form (betweenness and current flow "
            "divided by (n-1)(n-2)/2, degree by n-1, closeness, unit-norm eigenvector, "
            "PageRank); false: every centrality on the pair scale of the paper's unnormalised "
            "betweenness (Sec. 3.2; normalised x (n-1)(n-2)/2)",
        ),
        "local_step_scale": Param(
            BOOLEAN,
            True,
            "dual step tau * lr_lambda * lr_decay^(t+1), tau the mean local steps of the "
            "round's clients (DRFA's schedule); false drops tau",
        ),
        "lambda_start": LAMBDA_START,
        "embedding": Param(
            {"enum": ["latest", "recent", "current"]},
            "latest",
            "a node's model: latest = each client's last transmitted model, however old; "
            "recent = only clients drawn in the last f rounds are nodes; current = every "
            "client trains in a topology round (weight 0 unless drawn)",
        ),
        "scaling": Param(
            {"enum": ["minmax", "row", "max"]},
            "minmax",
            "similarities to [0, 1] before epsilon: min-max over all off-diagonal pairs, per "
            "client row (Figure 4), or divided by the largest",
        ),
        "draws": DRAWS,
        "ordered_pairs": Param(
            BOOLEAN,
            False,
            "the raw centrality sums over ordered pairs (s, t) and (t, s): twice the unordered "
            "sum (no change to the normalised forms)",
        ),
    },
)
