"""Experiment configs: schema validation, semantic checks, and the cell grid.

A config file is standalone and complete. It has these sections:

- ``datasets``: prepared-data variants (source, clients, partition, split, model, training,
  malfunction settings);
- ``methods``: method ids -> registered method name, table label and parameters;
- ``experiments``: grids of cells (dataset x methods x malfunctions x k x seeds); each experiment
  yields ``tables/<experiment>_<malfunction>.tex`` and ``figures/<experiment>_robustness.pdf``;
- ``reports`` (optional): further tables and figures, ``name -> {kind, ...parameters}`` (see
  ``benchlib.report.base``).

``k = 0`` cells are shared by all malfunctions of an experiment (malfunction ``none``).

A method id whose method is not declared (by benchlib or an installed plugin) is an error naming
the closest declared one; a paper baseline that is not implemented says so explicitly
(``not_implemented: <reason>``) and is left out of every experiment, listed by ``benchlib
check-config`` and never faked. An experiment that names a method id not defined under
``methods`` is an error.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from benchlib.data.corruptions import (
    Scenario,
    cell_store,
    corruption_schema,
    resolved_json,
    scenario_of,
)
from benchlib.declarations import plugins
from benchlib.declarations.malfunctions import (
    MALFUNCTION_SETTINGS,
    MALFUNCTIONS,
    NO_MALFUNCTION,
    MalfunctionSettings,
)
from benchlib.declarations.params import bound_fix
from benchlib.declarations.settings import Entry, SplitSettings, TrainingSettings, TransformSettings
from benchlib.grid.axes import (
    SEPARATOR,
    apply_axes,
    changes_data,
    get_axis,
    is_default_reading,
    reading_combinations,
    variant_suffix,
    variants,
)
from benchlib.grid.plugin_use import planned_plugins
from benchlib.grid.readings import method_settings
from benchlib.grid.spec import Cell, CellSpec
from benchlib.methods.catalog import METHODS
from benchlib.models.catalog import MODEL_INIT, ModelSettings
from benchlib.primitives import layout
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.limits import MAX_CLIENTS, MAX_SEED
from benchlib.primitives.yaml_load import load_config_file, load_yaml
from benchlib.tasks.catalog import TASKS, loss_settings

LOG = logging.getLogger("benchlib")
DEFAULT_TASK = "classification"
DOWNLOAD_ROOT = layout.DOWNLOADS


def schema() -> dict[str, Any]:
    """The JSON schema, with the enums that the catalog owns filled in."""
    text = resources.files("benchlib").joinpath("schemas/config.schema.yaml").read_text()
    result = load_yaml(text, "the config schema")
    dataset = result["properties"]["datasets"]["additionalProperties"]["properties"]
    dataset["task"]["enum"] = TASKS.names()
    dataset["task"]["default"] = DEFAULT_TASK
    dataset["clients"]["maximum"] = MAX_CLIENTS
    experiment = result["properties"]["experiments"]["additionalProperties"]["properties"]
    experiment["seeds"]["items"]["maximum"] = MAX_SEED
    dataset["training"] = TrainingSettings.params().schema()
    # the sections declared in code: the file keeps only their descriptions
    dataset["split"] |= SplitSettings.params().schema()
    dataset["transforms"] |= TransformSettings.params().schema()
    dataset["corruption"] |= corruption_schema()
    dataset["model"]["properties"]["init"] = MODEL_INIT.json_schema()
    malfunction = dataset["malfunction"]["properties"]
    for name, param in MALFUNCTION_SETTINGS.items():
        malfunction[name] = param.json_schema()
    for name, declared in MALFUNCTIONS.items():
        if declared.params:
            malfunction[name] = declared.params.schema()
    return result


def _location(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def _nonfinite_location(value: Any, path: str = "") -> str | None:
    """Dotted path of the first NaN/Inf number in a parsed config (YAML's .nan, .inf)."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "(top level)"
    if isinstance(value, dict):
        children = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        children = [(str(i), v) for i, v in enumerate(value)]
    else:
        return None
    for key, child in children:
        found = _nonfinite_location(child, f"{path}.{key}" if path else key)
        if found:
            return found
    return None


def validate_schema(config: dict[str, Any], section: str | None = None) -> None:
    """Check ``config`` against the schema (or ``{section: ...}`` against that top-level
    section's schema); raise one readable error for the first problem."""
    where = _nonfinite_location(config)
    require(where is None, f"config error at {where}: NaN/Inf is not allowed; give a finite number")
    full = schema()
    if section is not None:  # its entries only (grid-axis variants have longer names)
        entries = {k: v for k, v in full["properties"][section].items() if k != "propertyNames"}
        full = {"type": "object", "properties": {section: entries}}
    validator = jsonschema.Draft202012Validator(full)
    # an unknown key first: a typo also makes a required key look missing at the same place
    errors = sorted(
        validator.iter_errors(config),
        key=lambda e: (list(map(str, e.absolute_path)), e.validator != "additionalProperties"),
    )
    if errors:
        error = errors[0]
        raise BenchlibError(f"config error at {_location(error)}: {_message(error)}")


def _message(error: jsonschema.ValidationError) -> str:
    """The error's message; for an unknown key, the accepted ones (and the closest); for a
    failed choice (oneOf/anyOf), the alternatives it offered."""
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        if unknown and allowed:
            close = difflib.get_close_matches(unknown[0], allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"unknown key {unknown[0]!r}{hint}; it takes: {', '.join(allowed)}"
    if error.validator == "maxLength" and isinstance(error.instance, str):
        return (
            f"the id {error.instance[:20]}... has {len(error.instance)} characters; ids become "
            f"file names, so use at most {error.validator_value}"
        )
    if error.validator == "maximum" and error.path:
        return error.message + bound_fix(error)
    if error.validator in ("oneOf", "anyOf") and error.context:
        options = sorted({sub.message for sub in error.context if not sub.path})
        if options:
            return " or ".join(options)
    return error.message


@dataclass(frozen=True, eq=False)
class DatasetEntry(Entry):
    """A ``datasets`` entry resolved once: every section typed, every default filled."""

    source: str
    params: Mapping[str, Any]  # the source's, defaults filled
    task: str
    label: str  # tables name the dataset by it (default its id)
    clients: int
    partition: Mapping[str, Any]  # {name, ...the partitioner's parameters}
    split: SplitSettings
    transforms: TransformSettings
    corruption: Scenario
    model: ModelSettings
    training: TrainingSettings  # the loss resolved: the task's default when not given
    malfunction: MalfunctionSettings
    held_out: tuple[int, ...]

    @classmethod
    def from_config(cls, name: str, ds: Mapping[str, Any]) -> DatasetEntry:
        """Check one dataset entry as the config gives it and resolve it (``ds`` unchanged)."""
        from benchlib.data.download import check_remote, remote_files
        from benchlib.data.partition import partition_settings
        from benchlib.data.registry import get_dataset

        source = get_dataset(ds["source"])
        require(
            "download_dir" not in ds.get("params", {}),
            f"params.download_dir is set by benchlib ({DOWNLOAD_ROOT}/{name}); remove it",
        )
        params = source.params.resolve(f"source {source.name!r} params", ds.get("params"))
        for remote in remote_files(ds["source"], params):
            check_remote(remote, f"datasets.{name}.params")
        task = ds.get("task", DEFAULT_TASK)
        # the config's schema checked the section (it embeds the declaration, whose defaults
        # the dataclass fills); the loss is the task's: resolved here
        training = ds["training"]
        loss, loss_params = loss_settings(
            "", task, training.get("loss"), training.get("loss_params")
        )
        held_out = tuple(ds.get("held_out", ()))
        clients = ds["clients"]
        require(
            all(c < clients for c in held_out) and len(held_out) <= clients - 2,
            f"held_out {list(held_out)} must name clients below {clients} and leave at least "
            "2 training clients",
        )
        return cls(
            source=ds["source"],
            params=params,
            task=task,
            label=ds.get("label", name),
            clients=clients,
            partition=partition_settings(ds["partition"]),
            split=SplitSettings.from_config("split", ds["split"]),
            transforms=TransformSettings.from_config("transforms", ds.get("transforms")),
            corruption=scenario_of(ds.get("corruption")),
            model=ModelSettings.from_config("", ds["model"]),
            training=TrainingSettings(**{**training, "loss": loss, "loss_params": loss_params}),
            malfunction=MalfunctionSettings.from_config("malfunction", ds.get("malfunction")),
            held_out=held_out,
        )


@dataclass(frozen=True, eq=False)
class MethodEntry(Entry):
    """A ``methods`` entry resolved once: the declared method, its label and its parameters
    (every one, defaults filled)."""

    method: str
    label: str
    params: Mapping[str, Any]


class Config:
    """A validated config with the lookups the workflow and the CLI need."""

    def __init__(self, raw: dict[str, Any]) -> None:
        from benchlib.grid.paper_configs import with_added_methods

        validate_schema(raw)
        raw = with_added_methods(raw)  # add_methods: the experiments' method lists extended
        self.raw = raw  # the file as given (add_methods applied): never changed
        # the dataset entries as given, plus one per grid-axis variant (see _expand_axes);
        # _check_semantics resolves each once into self.datasets
        self._given_datasets: dict[str, dict[str, Any]] = copy.deepcopy(raw["datasets"])
        self.stores: dict[str, str] = {name: name for name in raw["datasets"]}  # -> store
        self.splits: dict[str, str] = {name: name for name in raw["datasets"]}  # -> split
        self._check_method_ids(raw)
        entries = {k: method_entry(k, v) for k, v in raw["methods"].items()}
        plugins.require_loadable()
        self.skipped_methods = self._unimplemented_methods(entries, raw["experiments"])
        self._method_names: dict[str, str] = {
            k: v["method"] for k, v in entries.items() if k not in self.skipped_methods
        }
        self.experiments: dict[str, dict[str, Any]] = {
            name: experiment_entry(name, exp, set(self._method_names))
            for name, exp in raw["experiments"].items()
        }
        self._expand_axes()
        # the grid-axis variants of dataset entries: checked like the file's entries
        variants = {k: v for k, v in self._given_datasets.items() if k not in raw["datasets"]}
        if variants:
            validate_schema({"datasets": variants}, "datasets")
        self.datasets: dict[str, DatasetEntry] = {}
        self.methods: dict[str, MethodEntry] = {}
        self._check_semantics(entries)
        from benchlib.report.base import resolve_reports

        # every table and figure: experiments' implicit reports + the reports: section
        self.reports = resolve_reports(self)

    # ------------------------------------------------------------------ methods
    @staticmethod
    def _check_method_ids(raw: dict[str, Any]) -> None:
        for name, exp in raw["experiments"].items():
            for method_id in exp["methods"]:
                require(
                    method_id in raw["methods"],
                    f"experiment {name}: method {method_id!r} is not defined under methods",
                )

    @staticmethod
    def _unimplemented_methods(
        entries: dict[str, dict[str, Any]], experiments: dict[str, Any]
    ) -> dict[str, str]:
        """Method ids marked ``not_implemented`` -> the reason (logged); an undeclared method
        without that mark is an error (a typo must not shrink the grid)."""
        skipped = {}
        for method_id, entry in entries.items():
            name = entry["method"]
            reason = entry.get("not_implemented")
            if reason is None:
                if name not in METHODS:
                    raise BenchlibError(
                        f"methods.{method_id}: {METHODS.unknown(name)}; a paper method that "
                        "is not implemented is marked not_implemented: <reason>"
                    )
                continue
            require(
                name not in METHODS,
                f"methods.{method_id}: method {name!r} is implemented; remove not_implemented",
            )
            skipped[method_id] = reason
            users = [e for e, exp in experiments.items() if method_id in exp["methods"]]
            LOG.warning(
                "method %s (%s) is not implemented: %s; left out of experiments: %s",
                method_id,
                name,
                reason,
                ", ".join(users) or "none",
            )
        return skipped

    # -------------------------------------------------------------------- grid axes
    def _variant_dataset(self, base: str, chosen: dict[str, Any]) -> str:
        """The dataset entry for ``base`` with axis values ``chosen`` (created once)."""
        if not chosen:
            return base
        suffix = variant_suffix(chosen)
        if not suffix:
            return base
        name = f"{base}{SEPARATOR}{suffix}"
        if name not in self._given_datasets:
            self._given_datasets[name] = apply_axes(self._given_datasets[base], chosen)
            self.stores[name] = self.stores[base]
            self.splits[name] = name  # _expand_axes re-points a variant that shares a split
        return name

    def _expand_axes(self) -> None:
        """Replace every experiment that has ``axes`` by one variant per value combination."""
        expanded: dict[str, dict[str, Any]] = {}
        for name, exp in self.experiments.items():
            if not exp.get("axes") and not exp.get("combinations"):
                expanded[name] = exp
                continue
            require(
                exp["dataset"] in self._given_datasets,
                f"experiment {name}: dataset {exp['dataset']!r} is not defined under datasets",
            )
            try:
                require(
                    not (exp.get("axes") and exp.get("combinations")),
                    "give axes (every combination) or combinations (the listed ones), not both",
                )
                if exp.get("combinations"):
                    registered = [self._method_names[m] for m in exp["methods"]]
                    combos = reading_combinations(exp["combinations"], registered)
                else:
                    combos = [(s, c, None) for s, c in variants(exp["axes"])]
                for suffix, chosen, homed in combos:
                    variant_name = f"{name}{SEPARATOR}{suffix}" if suffix else name
                    taken = variant_name in expanded or variant_name in self.raw["experiments"]
                    require(
                        variant_name == name or not taken,
                        f"its variant {variant_name} is also an experiment of the config; "
                        "rename one",
                    )
                    # axes that change the dataset entry (a reading only away from its default)
                    on_dataset = {
                        k: v
                        for k, v in chosen.items()
                        if get_axis(k).reading is None
                        or (get_axis(k).reading.changes_dataset and not is_default_reading(k, v))
                    }
                    data_axes = {k: v for k, v in on_dataset.items() if changes_data({k: v})}
                    split = self._variant_dataset(exp["dataset"], data_axes)
                    dataset = self._variant_dataset(exp["dataset"], on_dataset)
                    self.splits[dataset] = split
                    variant = {k: v for k, v in exp.items() if k not in ("axes", "combinations")}
                    if homed is not None:  # only the cells of listed combinations it holds
                        kept = [m for m in exp["methods"] if self._method_names[m] in homed]
                        variant.update(implied=True, default_reports=False, methods=kept)
                    expanded[variant_name] = {
                        **variant,
                        "dataset": dataset,
                        "axes_values": {
                            k: v for k, v in chosen.items() if not is_default_reading(k, v)
                        },
                        "base": name,
                        **self._reading_cells(name, exp, chosen),
                    }
            except BenchlibError as exc:
                raise BenchlibError(f"experiment {name}: {exc}") from exc
        self.experiments = expanded

    def _reading_cells(
        self, name: str, exp: dict[str, Any], chosen: dict[str, Any]
    ) -> dict[str, Any]:
        """For a variant with reading axes: ``method_settings`` (method id -> the parameters
        its readings set) and ``cell_experiments`` (method id -> the variant whose cells it
        shares: the one with the readings it does not depend on at their defaults)."""
        readings = {k: get_axis(k).reading for k in chosen if get_axis(k).reading is not None}
        if not readings:
            return {}
        settings: dict[str, dict[str, Any]] = {}
        homes: dict[str, str] = {}
        for method_id in exp["methods"]:
            method = self._method_names[method_id]
            given = self.raw["methods"][method_id].get("params") or {}
            home = dict(chosen)
            for axis, reading in readings.items():
                if not reading.concerns(method):
                    home[axis] = reading.default
                    continue
                own = {key for alt in reading.alternatives for key in alt.methods.get(method, {})}
                clash = sorted(own & set(given))
                require(
                    not clash,
                    f"methods.{method_id} sets {', '.join(clash)}, which the swept reading "
                    f"{reading.name} sets; remove it from the method's params",
                )
                settings.setdefault(method_id, {}).update(
                    method_settings(reading, chosen[axis], method)
                )
            suffix = variant_suffix(home)
            homes[method_id] = f"{name}{SEPARATOR}{suffix}" if suffix else name
        return {
            "method_settings": settings,
            "cell_experiments": homes,
            "readings": {r.name: chosen[axis] for axis, r in readings.items()},
        }

    def store_name(self, dataset: str) -> str:
        """The dataset whose prepared store ``dataset`` uses (itself unless a grid variant)."""
        return self.stores[dataset]

    def split_name(self, dataset: str) -> str:
        """The dataset whose split ``dataset`` uses (a variant shares its base's split unless
        its axes change the clients' data)."""
        return self.splits[dataset]

    def cell_inputs(self, dataset: str) -> tuple[str, str]:
        """The store directory and split CSV the cells of ``dataset`` read (the corrupted copy
        of the store when the dataset has a corruption)."""
        return cell_store(self, dataset), layout.split_csv(self.split_name(dataset))

    def corruption_json(self, dataset: str) -> str:
        """The resolved corruption of ``dataset`` as canonical JSON (defaults filled in): the
        parameter of rule ``corrupt_store``."""
        return resolved_json(self.datasets[dataset].corruption)

    # ------------------------------------------------------------------ validation
    def _check_semantics(self, entries: dict[str, dict[str, Any]]) -> None:
        """Resolve every dataset and method entry once against its declarations (every
        default filled, so every cell spec is complete), then check the experiments."""
        for name, given in self._given_datasets.items():
            try:
                self.datasets[name] = DatasetEntry.from_config(name, given)
            except BenchlibError as exc:
                raise BenchlibError(f"dataset {name}: {exc}") from exc
        for method_id, method in self._method_names.items():
            self.methods[method_id] = MethodEntry(
                method, entries[method_id]["label"], self._method_params(method_id, {})
            )
        for name, exp in self.experiments.items():
            exp["method_params"] = {
                method_id: self._method_params(method_id, given)
                for method_id, given in exp["method_settings"].items()
            }
            declared = self.raw["experiments"][exp["base"]]["methods"]
            require(
                exp["dataset"] in self.datasets,
                f"experiment {name}: dataset {exp['dataset']!r} is not defined under datasets",
            )
            require(
                bool(exp["methods"]),
                f"experiment {name}: none of its methods is implemented in this benchlib "
                f"(left out: {', '.join(declared)}); add one that is",
            )
            for malfunction in exp["malfunctions"]:
                require(
                    malfunction in MALFUNCTIONS,
                    f"experiment {name}: {MALFUNCTIONS.unknown(malfunction)}",
                )
            clients = self.datasets[exp["dataset"]].clients
            for k in exp["k"]:
                require(
                    0 <= k < clients,
                    f"experiment {name}: k={k} malfunctioning clients must be in 0..{clients - 1} "
                    f"(dataset {exp['dataset']} has {clients} clients)",
                )

    def _method_params(self, method_id: str, settings: dict[str, Any]) -> dict[str, Any]:
        """A method entry's parameters, with a reading's settings on top, resolved: the one
        place a config's method parameters are checked and filled."""
        method = self._method_names[method_id]
        given = self.raw["methods"][method_id].get("params") or {}
        what = f"methods.{method_id} (method {method!r}) params"
        return METHODS.get(method).params.resolve(
            f"{what} with its readings" if settings else what, {**given, **settings}
        )

    # --------------------------------------------------------------------- lookups
    def experiment_dataset(self, experiment: str) -> str:
        return self.experiments[experiment]["dataset"]

    def method_label(self, method_id: str) -> str:
        return self.methods[method_id].label

    def cells(self, experiment: str, malfunction: str | None = None) -> list[Cell]:
        """The cells an experiment (optionally one malfunction's table) needs, sorted."""
        exp = self.experiments[experiment]
        malfunctions = exp["malfunctions"] if malfunction is None else [malfunction]
        found: set[Cell] = set()
        for mal in malfunctions:
            for method in exp["methods"]:
                for k in exp["k"]:
                    for seed in exp["seeds"]:
                        home = exp["cell_experiments"].get(method, experiment)
                        found.add(Cell(home, NO_MALFUNCTION if k == 0 else mal, method, k, seed))
        return sorted(found, key=lambda c: (c.malfunction, c.method, c.k, c.seed))

    def table_names(self) -> list[str]:
        """Names of the config's table reports (``tables/<name>.tex``)."""
        return [name for name, report in self.reports.items() if report.output == "table"]

    def cell_spec(self, cell: Cell) -> CellSpec:
        """The resolved, self-contained spec of one cell (its config hash names its state):
        assembled from the entries resolved when the config loaded, nothing checked again."""
        dataset_name = self.experiment_dataset(cell.experiment)
        ds = self.datasets[dataset_name]
        entry = self.methods[cell.method]
        experiment = self.experiments[cell.experiment]
        spec = CellSpec(
            experiment=cell.experiment,
            dataset=dataset_name,
            method_id=cell.method,
            method=entry.method,
            method_params=experiment["method_params"].get(cell.method, entry.params),
            malfunction=cell.malfunction,
            k=cell.k,
            seed=cell.seed,
            clients=ds.clients,
            model=ds.model,
            training=ds.training,
            malfunction_params=ds.malfunction.for_cell(cell.malfunction),
            task=ds.task,
            transforms=ds.transforms,
            held_out=ds.held_out,
            axes=experiment["axes_values"],
            plugins={},
        )
        # the versions of the plugins it uses are part of the cell's identity
        plugins = planned_plugins(spec.components(), ds.source, ds.partition["name"])
        return dataclasses.replace(spec, plugins=plugins)

    def dataset_label(self, dataset: str) -> str:
        return self.datasets[dataset].label

    def download_files(self, dataset: str) -> list[str]:
        """The files the dataset's source downloads (``results/downloads/<dataset>/<name>``)."""
        from benchlib.data.download import remote_files

        ds = self.datasets[dataset]
        files = remote_files(ds.source, ds.params)
        return [f"{DOWNLOAD_ROOT}/{dataset}/{f.name}" for f in files]

    def dataset_spec(self, dataset: str) -> dict[str, Any]:
        """What the download, prepare and split steps need for one dataset."""
        ds = self.datasets[dataset]
        params = dict(ds.params)
        if self.download_files(dataset):
            params["download_dir"] = f"{DOWNLOAD_ROOT}/{dataset}"
        return {
            "dataset": dataset,
            "task": ds.task,
            "source": ds.source,
            "params": params,
            "clients": ds.clients,
            "partition": dict(ds.partition),
            "split": dict(ds.split),
        }


def experiment_entry(name: str, entry: dict[str, Any], implemented: set[str]) -> dict[str, Any]:
    """An ``experiments`` entry with its defaults filled: tables by default, no caption note;
    ``base`` is the file's experiment it comes from (itself until the grid axes
    expand it) and ``axes_values`` its axis values (none); only implemented methods."""
    filled = {
        "caption_note": "",
        "default_reports": True,
        **copy.deepcopy(entry),
        "base": name,
        "axes_values": {},
        # set by reading axes (Config._reading_cells): method id -> parameters the readings set,
        # method id -> the variant whose cells it shares, reading -> alternative
        "method_settings": {},
        "cell_experiments": {},
        "readings": {},
        "implied": False,  # a combination not listed, only home to cells of listed ones
    }
    filled["methods"] = [m for m in filled["methods"] if m in implemented]
    return filled


def method_entry(method_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A ``methods`` entry with its defaults filled: the registered method and the label are
    the id, no params (the method's declaration fills those)."""
    return {"method": method_id, "label": method_id, "params": {}, **copy.deepcopy(entry)}


def load_config(path: str | Path) -> Config:
    """Load and validate a config file (laid over the paper grids if it says so)."""
    from benchlib.grid.paper_configs import with_paper_grids

    return Config(with_paper_grids(load_config_file(path)))
