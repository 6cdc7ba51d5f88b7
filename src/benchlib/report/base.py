"""Report kinds: every table and figure the workflow renders is a named report of a registered kind.

A report kind is one module in ``benchlib/report/kinds/`` (plus, for a LaTeX table, its template in
``benchlib/templates/``) that registers a :class:`ReportKind` subclass on import. A config names
reports in its ``reports:`` section (``name -> {kind, ...parameters}``); experiments add their
default reports implicitly (:meth:`ReportKind.implicit`). A table report ``NAME`` is the target
``tables/NAME.tex``, a figure report ``figures/NAME.pdf`` and ``figures/NAME.png`` (plus
``figures/NAME.csv``, the numbers it shows, for a ``figure_numbers`` report); see :data:`OUTPUTS`.

The life of a report:

1. config load: :func:`resolve_reports` checks every entry's parameters against the kind's
   declaration (``params``, a :class:`benchlib.declarations.params.Params`), fills in the defaults,
   checks its references against the config (:meth:`ReportKind.spec`), and resolves them into a JSON
   spec: everything rendering needs, so rendering never reads the config;
2. Snakemake: the generic rules ``render_table`` / ``render_figure`` take the report's
   :attr:`Report.inputs` (collected CSVs) as input and pass the spec as a parameter;
3. ``benchlib report --kind KIND --spec JSON --collected CSV... --out FILE...`` calls
   :meth:`ReportKind.render`.

This module and the kind modules import no torch and no pandas at import time: Snakemake imports
them when it parses the workflow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from benchlib.declarations.params import NO_PARAMS, Param, Params
from benchlib.declarations.registry import Registry, import_submodules
from benchlib.grid.spec import Cell
from benchlib.primitives import layout
from benchlib.primitives.errors import BenchlibError, require


class ReportConfig(Protocol):
    """What report kinds read from a loaded config (:class:`benchlib.configuration.config.Config` is
    one); the reports depend on this view, not on the config module, which resolves them."""

    raw: dict[str, Any]
    datasets: dict[str, dict[str, Any]]
    methods: dict[str, dict[str, Any]]
    experiments: dict[str, dict[str, Any]]

    def store_name(self, dataset: str) -> str: ...

    def experiment_dataset(self, experiment: str) -> str: ...

    def method_label(self, method_id: str) -> str: ...

    def dataset_label(self, dataset: str) -> str: ...

    def cells(self, experiment: str, malfunction: str | None = None) -> list[Cell]: ...


# kind of output -> the target paths of a report (figure_numbers: a figure and a CSV of the
# numbers it shows); the patterns live in benchlib.primitives.layout
OUTPUTS: dict[str, tuple[str, ...]] = layout.REPORT_OUTPUTS


class ReportKind:
    """One kind of table or figure. Subclass it in a module of ``benchlib.report.kinds`` and
    decorate the subclass with :func:`register_kind`.

    Override :attr:`name`, :attr:`output`, :attr:`params` (the config entry's parameters besides
    ``kind``: every one described, and :func:`required_param` or with a default, null for one the
    config decides: :func:`derived_param`), :meth:`spec` and :meth:`render`; :meth:`inputs` and
    :meth:`implicit` when the kind reads collected results or is added by experiments.
    """

    name: ClassVar[str]
    output: ClassVar[str]  # a key of OUTPUTS: "table", "figure", ...
    params: ClassVar[Params] = NO_PARAMS

    def implicit(self, config: ReportConfig) -> dict[str, dict[str, Any]]:
        """Reports every config gets without naming them: report name -> parameters."""
        return {}

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        """The JSON-able spec of report ``name`` (raise BenchlibError for a bad reference);
        ``params`` holds every declared parameter, defaults filled in."""
        raise NotImplementedError

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        """The files the report reads (collected CSVs), in the order :meth:`render` gets them."""
        return []

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        """Write the report's output files (atomically) from ``spec`` and ``inputs``."""
        raise NotImplementedError


KINDS: Registry[ReportKind] = Registry(
    "report kind", loader=import_submodules("benchlib.report.kinds")
)


def register_kind(cls: type[ReportKind]) -> type[ReportKind]:
    """Class decorator: register one instance of ``cls`` under ``cls.name``."""
    require(cls.output in OUTPUTS, f"report kind {cls.name}: output must be one of {list(OUTPUTS)}")
    KINDS.add(cls.name, cls())
    return cls


def get_kind(name: str) -> ReportKind:
    return KINDS.get(name)


@dataclass(frozen=True)
class Report:
    """One resolved report of a config."""

    name: str
    kind: str
    output: str
    spec: dict[str, Any]
    inputs: tuple[str, ...]

    @property
    def targets(self) -> list[str]:
        return list(layout.report_outputs(self.output, self.name))


def resolve_reports(config: ReportConfig) -> dict[str, Report]:
    """Every report of ``config``: the kinds' implicit reports of its experiments, then the
    ``reports:`` entries (an entry with an implicit report's name replaces it)."""
    named: dict[str, dict[str, Any]] = {}
    tables_first = sorted(KINDS.items(), key=lambda item: (item[1].output != "table", item[0]))
    for kind_name, kind in tables_first:
        for name, params in kind.implicit(config).items():
            named[name] = {"kind": kind_name, **params}
    explicit: Mapping[str, Any] = config.raw.get("reports") or {}
    named.update({name: dict(entry) for name, entry in explicit.items()})
    reports = {}
    for name, entry in named.items():
        try:
            kind = KINDS.get(str(entry.get("kind")))
        except BenchlibError as exc:
            raise BenchlibError(f"config error at reports.{name}.kind: {exc}") from exc
        given = {k: v for k, v in entry.items() if k != "kind"}
        params = kind.params.resolve(
            f"config error at reports.{name} (report kind {kind.name})", given
        )
        try:
            spec = kind.spec(name, params, config)
        except BenchlibError as exc:
            raise BenchlibError(f"config error at reports.{name}: {exc}") from exc
        reports[name] = Report(name, kind.name, kind.output, spec, tuple(kind.inputs(spec)))
    return reports


# --------------------------------------------------------------------- helpers for kinds
def required_param(schema: Mapping[str, Any], description: str) -> Param:
    """A parameter every entry of the kind must give."""
    return Param(schema, description=description, required=True)


def derived_param(schema: Mapping[str, Any], description: str, null_means: str) -> Param:
    """A parameter whose default depends on the config: null, the default, means ``null_means``
    (the kind derives it in :meth:`ReportKind.spec`)."""
    if "enum" in schema:
        nullable = {**schema, "enum": [*schema["enum"], None]}
    else:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        nullable = {**schema, "type": [*types, "null"]}
    return Param(nullable, None, f"{description}; null = {null_means}")


def check_experiments(config: ReportConfig, experiments: list[str]) -> None:
    for experiment in experiments:
        require(
            experiment in config.experiments,
            f"experiment {experiment!r} is not defined under experiments; choose one of: "
            f"{', '.join(config.experiments)}",
        )


def check_known(
    config: ReportConfig, experiment: str, field: str, values: list[Any], what: Callable[[Any], str]
) -> None:
    """Require every value to be listed in the experiment's ``field``; ``what(value)`` names a
    missing one in the error."""
    known = config.experiments[experiment][field]
    for value in values:
        require(
            value in known,
            f"experiment {experiment} has no {what(value)}; choose one of: "
            f"{', '.join(map(str, known))}",
        )


def check_malfunctions(config: ReportConfig, experiment: str, malfunctions: list[str]) -> None:
    check_known(config, experiment, "malfunctions", malfunctions, lambda m: f"malfunction {m!r}")


def method_rows(config: ReportConfig, experiment: str) -> list[list[str]]:
    """[[method_id, label]] of an experiment's (implemented) methods, in row order."""
    return [[m, config.method_label(m)] for m in config.experiments[experiment]["methods"]]


def experiment_title(config: ReportConfig, experiment: str) -> str:
    return config.experiments[experiment].get("title", experiment)


def check_outputs(kind: ReportKind, outputs: list[Path]) -> None:
    """The output paths match the kind's outputs by suffix (``.tex``; ``.pdf`` and ``.png``)."""
    expected = [Path(p).suffix for p in OUTPUTS[kind.output]]
    require(
        [p.suffix for p in outputs] == expected,
        f"report kind {kind.name} writes {' and '.join(expected)} files; pass --out with "
        f"{len(expected)} path(s) ending in {', '.join(expected)} in that order",
    )


def spec_value(spec: dict[str, Any], key: str) -> Any:
    """``spec[key]`` or a clear error for a hand-written spec that lacks it."""
    require(
        key in spec,
        f"--spec lacks {key!r}; pass the spec the workflow generates (benchlib targets --specs)",
    )
    return spec[key]
