"""Readings: the choices a paper leaves open, declared with their alternatives and run both ways.

A :class:`Reading` names one unstated (or ambiguous) choice of a paper, the alternatives a
reproduction may take (each: the config settings it means), the default and why, the paper's own
words, and the tables it affects. A config sweeps readings like any grid axis (``axes:
{reading.<name>: [<alternative>, ...]}``, :mod:`benchlib.grid.axes`); the ``readings`` report kind
puts one table's reading combinations side by side. ``docs/papers/readings.md`` is written from
these declarations (``benchlib docs``).

An alternative's settings are method parameters, keyed by the registered method
(``{"tfl": {"lr_lambda": 0.01}}``: every method id of a config whose method is ``tfl``), and/or
dataset settings (``{"corruption": {"subsets": ["train"]}}``). Torch-free.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchlib.declarations.registry import Registry
from benchlib.primitives.errors import BenchlibError, require


@dataclass(frozen=True)
class Alternative:
    """One way to read the choice: its name, what it means and the settings that run it."""

    name: str
    meaning: str
    methods: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    dataset: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reading:
    """An unstated choice of a paper, its alternatives and the default this project runs."""

    name: str
    paper: str  # the paper (or papers) whose choice it is
    question: str  # the choice, in one sentence
    quotes: tuple[str, ...]  # the paper's own words on it (short phrases, with their place)
    alternatives: tuple[Alternative, ...]
    default: str
    why: str  # why the default is the default
    affects: str  # the tables and figures whose numbers it changes
    not_offered: tuple[str, ...] = ()  # plausible readings that are not implemented, and why

    def alternative(self, name: Any) -> Alternative:
        """The alternative ``name``, or one error naming the choices."""
        for alt in self.alternatives:
            if alt.name == name:
                return alt
        names = ", ".join(a.name for a in self.alternatives)
        raise BenchlibError(f"reading {self.name}: no alternative {name!r}; choose one of: {names}")

    @property
    def methods(self) -> set[str]:
        """The registered methods whose parameters some alternative sets."""
        return {m for alt in self.alternatives for m in alt.methods}

    @property
    def changes_dataset(self) -> bool:
        return any(alt.dataset for alt in self.alternatives)

    def concerns(self, method: str) -> bool:
        """Whether the reading can change a cell of registered method ``method``."""
        return self.changes_dataset or method in self.methods


READINGS: Registry[Reading] = Registry("reading")


def declare_reading(reading: Reading) -> Reading:
    """Register a reading (a plugin may declare its own); its default must be an alternative."""
    reading.alternative(reading.default)
    require(
        len({a.name for a in reading.alternatives}) == len(reading.alternatives),
        f"reading {reading.name}: two alternatives have the same name",
    )
    return READINGS.add(reading.name, reading)


def check_reading(reading: Reading) -> None:
    """Every alternative's settings name declared parameters with values their schemas accept
    (method parameters against the method's declaration; dataset settings against the config
    schema's section); raises one error naming the reading and the alternative."""
    from benchlib.methods.catalog import METHODS

    for alt in reading.alternatives:
        what = f"reading {reading.name}, alternative {alt.name}"
        for method, params in alt.methods.items():
            require(method in METHODS, f"{what}: {METHODS.unknown(method)}")
            require(bool(params), f"{what}: method {method} has no settings")
            METHODS.get(method).params.resolve(f"{what}, method {method!r} params", params)
        for key, value in alt.dataset.items():
            _check_dataset_setting(what, key, value)


def _check_dataset_setting(what: str, key: str, value: Any) -> None:
    require(key in DATASET_SETTINGS, f"{what}: dataset setting {key!r} cannot be a reading")
    DATASET_SETTINGS[key].check(what, value)


@dataclass(frozen=True)
class _CorruptionSetting:
    """Corruption keys merged into a dataset's corruption (a scenario name is resolved first)."""

    def check(self, what: str, value: Any) -> None:
        from benchlib.data.corruptions import scenario_of

        require(isinstance(value, dict), f"{what}: corruption settings must be a mapping")
        try:
            scenario_of({"ratio": 0.5, "severity": 1, **value})
        except BenchlibError as exc:
            raise BenchlibError(f"{what}: {exc}") from exc

    def apply(self, dataset: dict[str, Any], value: Mapping[str, Any]) -> None:
        from benchlib.data.corruptions import scenario_of

        current = dataset.get("corruption")
        require(
            current not in (None, "none"),
            "a corruption reading needs a dataset with a corruption",
        )
        base = scenario_of(current).to_dict()
        dataset["corruption"] = {**base, **copy.deepcopy(dict(value))}


DATASET_SETTINGS = {"corruption": _CorruptionSetting()}


def apply_dataset_settings(dataset: dict[str, Any], alternative: Alternative) -> None:
    """Apply an alternative's dataset settings to a dataset's config entry (in place)."""
    for key, value in alternative.dataset.items():
        DATASET_SETTINGS[key].apply(dataset, value)


def method_settings(reading: Reading, alternative: str, method: str) -> dict[str, Any]:
    """The parameters an alternative sets on registered method ``method`` ({} if none)."""
    return copy.deepcopy(dict(reading.alternative(alternative).methods.get(method, {})))


def cell_readings(method: str, params: Mapping[str, Any]) -> dict[str, str]:
    """{reading: alternative} of a cell of registered method ``method`` with the resolved
    parameters ``params``: every declared reading whose alternatives set parameters of the
    method, each with the alternative whose settings ``params`` holds, defaults included, or
    ``"(other)"`` when the parameters match none (a config that sets them directly). Readings
    that set dataset settings only are named in the spec's ``axes`` when swept."""
    found: dict[str, str] = {}
    for name in READINGS.names():
        reading = READINGS.get(name)
        if method not in reading.methods:
            continue
        match = "(other)"
        for alt in reading.alternatives:
            settings = alt.methods.get(method)
            if settings and all(params.get(k) == v for k, v in settings.items()):
                match = alt.name
                break
        found[name] = match
    return found


# ------------------------------------------------------------------------- the declarations
def _gamma(value: float, meaning: str) -> Alternative:
    return Alternative(
        f"gamma_{value:g}",
        meaning,
        methods={"drfa": {"gamma": value}, "tfl": {"lr_lambda": value}},
    )


_TFL_TABLES = (
    "TFL Tables 1-5 and 7-10 and Figures 1, 2, 6-8 (every DRFA and TFL cell; FedAvg, FedProx, "
    "FedSR and ERM do not depend on it)"
)

declare_reading(
    Reading(
        name="dual_step",
        paper="TFL (and DRFA, its baseline)",
        question=(
            "The step of the dual (lambda) update: step = tau x gamma x 0.9^(s+1), tau the local "
            "steps; neither paper gives gamma for these datasets."
        ),
        quotes=(
            "TFL Sec. 3.3: lambda^(t+1) = P_Delta(lambda^t + eta_lambda^t grad_lambda F), "
            '"where eta^t is the step size"; Algorithm 1\'s input: "learning rate eta_theta and '
            'eta_lambda"; no value is given',
            "DRFA (Deng et al. 2020), Algorithm 1: lambda^(s+1) = P_Lambda(lambda^(s) + "
            "tau gamma v); gamma is a step size its experiments tune",
        ),
        alternatives=(
            _gamma(0.1, "FedTorch's default (the DRFA authors' code) for 1-10 local steps"),
            _gamma(0.01, "ten times smaller"),
            _gamma(0.001, "a hundred times smaller: lambda stays close to its start"),
        ),
        default="gamma_0.1",
        why=(
            "the DRFA authors' code (FedTorch) runs gamma 0.1; TFL states none and shares "
            "DRFA's step here. At paper scale its round-0 step is about 4.2 (PACS), 5.1 "
            "(CIFAR-10 Dir(0.1)), 1.35 (eICU) and 0.81 (TPT-48), large enough to collapse "
            "lambda onto 2-3 clients within 3 rounds"
        ),
        affects=_TFL_TABLES,
    )
)

declare_reading(
    Reading(
        name="prior",
        paper="TFL",
        question=(
            "The scale of the centrality whose softmax is TFL's prior p: the literal raw sum of "
            "Sec. 3.2, or networkx's normalised form (the authors' code is not public)."
        ),
        quotes=(
            'Sec. 3.2: "The betweenness centrality of client k is given by the expression of '
            'c_k = sum_{s != k != t} sigma_st(k) / sigma_st"; "Then we apply softmax to '
            'normalize client centrality c_k to obtain client topological prior"',
            "Table 10 compares betweenness, degree, closeness, eigenvector and current flow "
            "and states no scaling for any",
        ),
        alternatives=(
            Alternative(
                "raw",
                "every centrality on the pair scale of the unnormalised betweenness sum "
                "(a sharp prior: p_max 0.96 on G(58, 0.1))",
                methods={"tfl": {"normalized_betweenness": False}},
            ),
            Alternative(
                "normalised",
                "every centrality in networkx's normalised form (a prior within a factor e "
                "of uniform)",
                methods={"tfl": {"normalized_betweenness": True}},
            ),
        ),
        default="raw",
        why="it is the paper's formula as written (Sec. 3.2: a sum, then softmax)",
        affects=(
            "TFL Tables 1-5 and 7-10 and Figures 1, 2, 6, 8 (every TFL cell; Table 10 compares "
            "the centralities on this footing)"
        ),
    )
)

declare_reading(
    Reading(
        name="lambda_start",
        paper="TFL (and DRFA)",
        question="The start lambda^(0) of the client weights of TFL's and DRFA's dual update.",
        quotes=(
            'TFL Algorithm 1\'s input: "initial lambda^(0)"; no value is given',
            'Figure 6: "Uniformly initializing client topology before topology learning" '
            "(the graph, not lambda)",
        ),
        alternatives=(
            Alternative(
                "uniform",
                "1/N per federation client",
                methods={"drfa": {"lambda_start": "uniform"}, "tfl": {"lambda_start": "uniform"}},
            ),
            Alternative(
                "sizes",
                "proportional to the clients' training-set sizes, n_i / n (the DRFA authors' code)",
                methods={"drfa": {"lambda_start": "sizes"}, "tfl": {"lambda_start": "sizes"}},
            ),
        ),
        default="uniform",
        why=(
            "neither paper states a start; uniform is the neutral one, and TFL's prior starts "
            "uniform too. It is not the DRFA authors' start; the two differ wherever clients "
            "differ in size: PACS (334-786 images per client), eICU, CIFAR Dir(0.1) and FeTS "
            "(TPT-48's states have equal numbers of windows)"
        ),
        affects=_TFL_TABLES,
    )
)

declare_reading(
    Reading(
        name="embedding",
        paper="TFL",
        question=(
            "Which model stands for a client that was not drawn recently when the graph is "
            "built: only the drawn clients train in a round, so a client's last transmitted "
            "model can be many rounds old."
        ),
        quotes=(
            'Sec. 3.1: "We propose to utilize model weights to learn client topology"; Eq. 4 '
            'uses "theta denotes the model of local clients"',
            'Algorithm 1: "server samples m clients according to lambda^(t)", and every f '
            'rounds "server updating graph G via Equation 4"; it does not say which model a '
            "client not sampled this round contributes",
        ),
        alternatives=(
            Alternative(
                "latest",
                "each client's latest transmitted model, however old (a client not drawn yet "
                "is left out)",
                methods={"tfl": {"embedding": "latest"}},
            ),
            Alternative(
                "recent",
                "only the clients drawn in the last f rounds are nodes; the others get the "
                "smallest node mass",
                methods={"tfl": {"embedding": "recent"}},
            ),
            Alternative(
                "current",
                "every federation client trains from the global model in a topology round "
                "(weight 0 in the new model unless drawn): every node is a model of this round",
                methods={"tfl": {"embedding": "current"}},
            ),
        ),
        default="latest",
        why=(
            "it is what the server holds without extra training or bookkeeping. On TPT-48 one "
            "stale client maps every pair with itself to about 0 after min-max scaling and the "
            "rest into [0.6, 1], so the graph becomes a clique plus isolated nodes and the prior "
            "uniform: the alternatives test whether staleness decides TFL's numbers"
        ),
        affects="every TFL cell (Tables 1-10, Figures 1, 2, 6-8)",
    )
)

declare_reading(
    Reading(
        name="similarity_scaling",
        paper="TFL",
        question=(
            "How the model similarities are put on the scale of the threshold epsilon = 0.4 "
            "(raw dot products of model weights are not within [0, 1])."
        ),
        quotes=(
            'Sec. 3.1 (Figure 4): "For a clear comparison, we normalized all scores into '
            '[0,1]" (client 10 against every other client)',
            'Sec. 3.1: "hard thresholding on W to construct epsilon-graph"; "we mask out (i.e., '
            'set to zero) those elements in W smaller than a non-negative threshold epsilon"',
        ),
        alternatives=(
            Alternative(
                "minmax",
                "min-max scaling over all off-diagonal pairs",
                methods={"tfl": {"scaling": "minmax"}},
            ),
            Alternative(
                "row",
                "each client's row min-max scaled over the other clients, as Figure 4 scales "
                "client 10's row; an edge needs both rows to reach epsilon",
                methods={"tfl": {"scaling": "row"}},
            ),
            Alternative(
                "max",
                "divided by the largest off-diagonal similarity (distances: 1 - d / max d)",
                methods={"tfl": {"scaling": "max"}},
            ),
        ),
        default="minmax",
        why=(
            "it puts the whole matrix on [0, 1] as Figure 4 puts a row, so epsilon = 0.4 is a "
            "share of the observed range; division by the maximum leaves dot products of "
            "similar-sized models all near 1 (a complete graph)"
        ),
        affects="every TFL cell (Tables 1-10, Figures 1, 2, 4, 6-8)",
    )
)

declare_reading(
    Reading(
        name="client_draws",
        paper="TFL (and DRFA)",
        question=(
            "How the m clients of a round are drawn according to lambda, and how their models "
            "are combined."
        ),
        quotes=(
            'Algorithm 1: "server samples m clients according to lambda^(t)"; "server computes '
            'theta^(t+1) = sum_{i=1}^m theta_i^(t+1)"; m is not given',
            'DRFA Algorithm 1: "sample clients according to lambda", then the average of their '
            "models",
        ),
        alternatives=(
            Alternative(
                "with_replacement",
                "m = K draws by lambda with replacement; the mean of the drawn models, a client "
                "drawn twice counting twice",
                methods={
                    "tfl": {"draws": "with_replacement"},
                    "drfa": {"draws": "with_replacement"},
                },
            ),
            Alternative(
                "without_replacement",
                "every federation client once (m = K without replacement), the models weighted "
                "by lambda: the expectation of the draws (with m = K and a plain mean lambda "
                "would not matter)",
                methods={
                    "tfl": {"draws": "without_replacement"},
                    "drfa": {"draws": "without_replacement"},
                },
            ),
        ),
        default="with_replacement",
        why=(
            "it is Algorithm 1's sampling read literally with m = K, so lambda decides which "
            "models enter the mean; DRFA's paper variant draws the same way"
        ),
        affects=(
            "every TFL cell and every DRFA cell of the paper variant (Tables 1-5 and 7-10, "
            "Figures 1, 2, 6-8)"
        ),
        not_offered=("m < K without replacement: the papers give no m for any dataset",),
    )
)

declare_reading(
    Reading(
        name="dual_schedule",
        paper="TFL (and DRFA)",
        question=(
            "The schedule of the dual step around gamma: DRFA's tau x gamma x 0.9^(s+1) (tau "
            "the local steps, 0.9 the authors' per-round decay), or without tau, or without "
            "the decay."
        ),
        quotes=(
            'TFL Eq. 7: "eta^t is the step size" (a schedule in t, not given)',
            "DRFA Algorithm 1: lambda^(s+1) = P(lambda^(s) + tau gamma v); the DRFA authors' "
            "code multiplies gamma by 0.9 at the start of every round",
        ),
        alternatives=(
            Alternative(
                "tau_decay",
                "tau x gamma x 0.9^(s+1) (DRFA's algorithm with the authors' decay)",
                methods={
                    "tfl": {"local_step_scale": True, "lr_decay": 0.9},
                    "drfa": {"local_step_scale": True, "gamma_decay": 0.9},
                },
            ),
            Alternative(
                "no_tau",
                "gamma x 0.9^(s+1): the step does not grow with the local steps",
                methods={
                    "tfl": {"local_step_scale": False, "lr_decay": 0.9},
                    "drfa": {"local_step_scale": False, "gamma_decay": 0.9},
                },
            ),
            Alternative(
                "no_decay",
                "tau x gamma in every round (a constant step)",
                methods={
                    "tfl": {"local_step_scale": True, "lr_decay": 1.0},
                    "drfa": {"local_step_scale": True, "gamma_decay": 1.0},
                },
            ),
        ),
        default="tau_decay",
        why=(
            "DRFA's update multiplies by tau and the DRFA authors' code decays gamma by 0.9 per "
            "round; TFL states no schedule and shares DRFA's here"
        ),
        affects=_TFL_TABLES,
    )
)

declare_reading(
    Reading(
        name="drfa_variant",
        paper="DRFA (TFL's baseline)",
        question=(
            "DRFA as its paper writes it (clients drawn by lambda, the mean of their models) or "
            "as the DRFA authors' code runs it (clients drawn uniformly, the server step "
            "w - sum_i lambda_i (N/m)(w - w_i))."
        ),
        quotes=(
            'DRFA Algorithm 1: "sample clients according to lambda"',
            "TFL Sec. 4 names DRFA as a baseline and cites its paper, not its code",
        ),
        alternatives=(
            Alternative(
                "paper",
                "lambda-sampling and the mean of the drawn models",
                methods={"drfa": {"variant": "paper"}},
            ),
            Alternative(
                "authors",
                "uniform sampling and the lambda-weighted server step of the authors' code",
                methods={"drfa": {"variant": "authors"}},
            ),
        ),
        default="paper",
        why="TFL cites DRFA's paper; its algorithm is the one written there",
        affects="every DRFA cell (Tables 1-5 and 9, Figures 1, 2, 7, 8)",
    )
)

declare_reading(
    Reading(
        name="pairs",
        paper="TFL",
        question=(
            "Whether Sec. 3.2's betweenness sum runs over unordered pairs {s, t} or ordered "
            "pairs (s, t): a factor 2 in c_k, so a sharper softmax prior on the raw footing."
        ),
        quotes=(
            'Sec. 3.2: "c_k = sum_{s != k != t in [K]} sigma_st(k) / sigma_st" (the index set '
            "does not say whether (s, t) and (t, s) are one term)",
        ),
        alternatives=(
            Alternative(
                "unordered",
                "each unordered pair once (networkx normalized=False on an undirected graph)",
                methods={"tfl": {"ordered_pairs": False}},
            ),
            Alternative(
                "ordered",
                "ordered pairs: every raw centrality doubled (normalised forms unchanged)",
                methods={"tfl": {"ordered_pairs": True}},
            ),
        ),
        default="unordered",
        why=(
            "the usual reading for an undirected graph, and networkx's unnormalised value; "
            "with the normalised prior the two alternatives give the same cells"
        ),
        affects="every TFL cell with the raw prior (Tables 1-10, Figures 1, 2, 6-8)",
    )
)


_AUTHORS_VARIANT = ("afa", "asmr", "cfl", "ditto", "krum", "balance", "scclip")

declare_reading(
    Reading(
        name="baseline_code",
        paper="LIGHTYEAR",
        question=(
            "Whether LIGHTYEAR's baselines run as their original papers define them or as the "
            "LIGHTYEAR authors' code runs them (thresholds, momentum, clipping, FedAvg weights)."
        ),
        quotes=(
            "Sec. 5 compares against the baselines by name and cites their papers; the "
            "settings that differ from those papers are only in the authors' code",
        ),
        alternatives=(
            Alternative(
                "authors",
                "every baseline as the LIGHTYEAR authors' code runs it (FedAvg weighted by "
                "local batches)",
                methods={
                    "fedavg": {"weighting": "batches"},
                    **{m: {"variant": "authors"} for m in _AUTHORS_VARIANT},
                },
            ),
            Alternative(
                "paper",
                "every baseline as its own paper defines it (FedAvg weighted by samples)",
                methods={
                    "fedavg": {"weighting": "samples"},
                    **{m: {"variant": "paper"} for m in _AUTHORS_VARIANT},
                },
            ),
        ),
        default="authors",
        why=(
            "the paper's numbers came from the authors' code; the paper configs run it in "
            "tables/<dataset>_<malfunction>.tex and the other reading in the *_faithful twins"
        ),
        affects=(
            "LIGHTYEAR's robustness tables tables/<dataset>_<malfunction>.tex (authors) and "
            "their tables/<dataset>_<malfunction>_faithful.tex twins (paper); LIGHTYEAR itself "
            "and FedProx do not depend on it"
        ),
    )
)

declare_reading(
    Reading(
        name="corruption_subsets",
        paper="FedAgain",
        question=(
            "Which local data of a corrupted client is corrupted: all of it (training and "
            "validation) or the training data only."
        ),
        quotes=(
            'Sec. 5.3: "Corruption was applied only to the training data of affected clients, '
            'while the global model was always evaluated on clean test sets"',
            "Eq. 7 / Algorithm 2: the benchmark error E_k is the global model's loss on the "
            'client\'s "local validation data"; Sec. 3.3: it "reflects the representativeness '
            'and quality of the client data"',
        ),
        alternatives=(
            Alternative(
                "local_data",
                "training and validation images of a corrupted client",
                dataset={"corruption": {"subsets": ["train", "val"]}},
            ),
            Alternative(
                "train_only",
                "training images only (E_k measured on clean validation data)",
                dataset={"corruption": {"subsets": ["train"]}},
            ),
        ),
        default="local_data",
        why=(
            "Sec. 5.3's sentence contrasts the clients' data with the clean test sets and does "
            "not mention validation; E_k, measured on the validation data, is meant to reflect "
            "the quality of the client's data, which it can only do if that data is corrupted"
        ),
        affects="FedAgain Tables 1-3 and Figures 3-5 (every corrupted cell)",
    )
)

declare_reading(
    Reading(
        name="corruption_types",
        paper="FedAgain",
        question="How many corruption types a corrupted image is drawn from: 19 or 16.",
        quotes=(
            'Sec. 5.3: "The corruption types spanned 16 categories across four families"',
            "Table 3 lists 19 types (noise 4, blur 5, weather 3, digital 7), imagecorruptions' 19",
        ),
        alternatives=(
            Alternative(
                "table3_19",
                "the 19 types of Table 3, imagecorruptions' 19 (the only set implemented)",
            ),
        ),
        default="table3_19",
        why="Table 3 names all 19 types; the paper names no 16 of them",
        affects="FedAgain Tables 1-3 and Figures 3-5 (every corrupted cell)",
        not_offered=(
            "16 types (Sec. 5.3's count): the paper does not say which 16; perhaps the "
            "authors' endoscopy corruption suite, which it does not name",
        ),
    )
)
