"""The parameter reference (docs/guide/parameters.md, ``benchlib params``), written from the
declarations themselves: training settings, a dataset's split, transforms and corruption,
methods, models, dataset sources, partitioners, malfunctions, losses, report kinds and grid
axes. Torch-free."""

from __future__ import annotations

from collections.abc import Iterable

from benchlib.declarations.params import Params

HEADER = """# Parameter reference

Every parameter a config may set, with its type, default and description. This page is written
by `make docs` (`benchlib docs`) from the declarations in the code (one per parameter), and a
test fails when it is out of date. A config is checked against these declarations when it loads
(`snakemake -n` stops at a typo with one line naming the key), and the defaults below are filled
in before any cell runs. The methods, models, sources and report kinds themselves:
[components.md](components.md).
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(rows: Iterable[tuple[str, str, str, str]]) -> list[str]:
    rows = list(rows)
    if not rows:
        return ["No parameters.", ""]
    lines = ["| parameter | type | default | description |", "|---|---|---|---|"]
    lines += [f"| `{n}` | {_cell(t)} | {_cell(d)} | {_cell(desc)} |" for n, t, d, desc in rows]
    return [*lines, ""]


def _section(title: str, params: Params, note: str = "") -> list[str]:
    lines = [f"### {title}", ""]
    if note:
        lines += [note, ""]
    return lines + _table(params.reference_rows())


def _training() -> list[str]:
    from benchlib.declarations.settings import TrainingSettings

    return [
        "## Training settings (`datasets.<name>.training`)",
        "",
        *_table(TrainingSettings.params().reference_rows()),
    ]


def _dataset_sections() -> list[str]:
    """A dataset's split, transforms and corruption sections, and the corruption scenarios."""
    from benchlib.data.corruptions import CORRUPTION, SCENARIOS
    from benchlib.declarations.settings import SplitSettings, TransformSettings

    lines = ["## Dataset sections (`datasets.<name>.split`, `.transforms`, `.corruption`)", ""]
    lines += _section(
        "`split`",
        SplitSettings.params(),
        "Mode random takes `val` and `test` (both given); mode source takes `val_from_test` or "
        "`val_from_train` (one given).",
    )
    lines += _section("`transforms`", TransformSettings.params())
    lines += [
        "### `corruption`",
        "",
        "FedAgain's corrupted clients: a scenario name or a mapping (below); absent = `none`.",
        "",
        "| scenario | ratio | severity | subsets | image_fraction |",
        "|---|---|---|---|---|",
    ]
    for name, scenario in SCENARIOS.items():
        values = scenario.to_dict().values()
        lines.append(f"| `{name}` | " + " | ".join(_cell(str(v)) for v in values) + " |")
    return [*lines, "", *_table(CORRUPTION.reference_rows())]


def _methods() -> list[str]:
    from benchlib.methods.catalog import METHODS

    lines = ["## Methods (`methods.<id>.params`)", ""]
    for name, entry in METHODS.items():
        lines += _section(f"`{name}` ({entry.topology})", entry.params)
    return lines


def _models() -> list[str]:
    from benchlib.models.catalog import MODEL_INIT, MODELS

    lines = ["## Models (`datasets.<name>.model.params`)", ""]
    lines += _section("`init` (every model, beside `params`)", Params({"init": MODEL_INIT}))
    for name, entry in MODELS.items():
        lines += _section(f"`{name}`", entry.params)
    return lines


def _sources() -> list[str]:
    from benchlib.data.registry import dataset_names, get_dataset

    lines = ["## Dataset sources (`datasets.<name>.params`)", ""]
    for name in dataset_names():
        source = get_dataset(name)
        lines += _section(f"`{name}`", source.params, _cell(source.description))
    return lines


def _partitioners() -> list[str]:
    from benchlib.data.partition import partitioner_names, partitioner_params

    lines = ["## Partitioners (`datasets.<name>.partition`, beside `name`)", ""]
    for name in partitioner_names():
        lines += _section(f"`{name}`", partitioner_params(name))
    return lines


def _malfunctions() -> list[str]:
    from benchlib.declarations.malfunctions import MALFUNCTION_SETTINGS, MALFUNCTIONS

    lines = ["## Malfunctions (`datasets.<name>.malfunction`)", ""]
    lines += _table(MALFUNCTION_SETTINGS.reference_rows())
    for name, declared in MALFUNCTIONS.items():
        lines += _section(f"`{name}`", declared.params)
    return lines


def _losses() -> list[str]:
    from benchlib.tasks.catalog import TASKS

    lines = ["## Losses (`datasets.<name>.training.loss_params`)", ""]
    for task, entry in TASKS.items():
        for loss, params in entry.losses.items():
            default = " (the task's default)" if loss == entry.default_loss else ""
            lines += _section(f"{task}: `{loss}`{default}", params)
    return lines


def _report_kinds() -> list[str]:
    from benchlib.report.base import KINDS

    lines = ["## Report kinds (`reports.<name>`, beside `kind`)", ""]
    for name, kind in KINDS.items():
        lines += _section(f"`{name}` ({kind.output})", kind.params)
    return lines


def _axes() -> list[str]:
    from benchlib.grid.axes import AXES

    lines = ["## Grid axes (`experiments.<name>.axes`)", ""]
    lines += ["| axis | values |", "|---|---|"]
    for name, axis in AXES.items():
        lines.append(f"| `{name}` | {_cell(axis.description)} |")
    lines.append(
        "| `<malfunction>.<parameter>` | any malfunction parameter above, e.g. `ana.scale` |"
    )
    lines.append(
        "| `reading.<name>` | a declared reading's alternatives, e.g. `reading.dual_step: "
        "[gamma_0.1, gamma_0.01]`; its default must be listed and is left out of the variant's "
        "name ([readings](../papers/readings.md)) |"
    )
    return [*lines, ""]


def parameter_reference() -> str:
    """The whole reference as Markdown."""
    parts = [
        HEADER,
        *_training(),
        *_dataset_sections(),
        *_methods(),
        *_models(),
        *_sources(),
        *_partitioners(),
        *_malfunctions(),
        *_losses(),
        *_report_kinds(),
        *_axes(),
    ]
    return "\n".join(parts).rstrip() + "\n"
