"""What the Snakemake HTML report shows: each report's paper and experiment (its category and
subcategory), the settings of the cells behind a table, and which targets are built.

Imported by the workflow at parse time: no torch, no pandas.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchlib.primitives import layout
from benchlib.primitives.yaml_load import load_yaml_file
from benchlib.report.base import Report, ReportConfig, experiment_title

PAPER_LABELS = {"lightyear": "LIGHTYEAR", "fedagain": "FedAgain", "tfl": "TFL"}
_RUN_INPUT = re.compile(
    rf"(?:{re.escape(layout.COLLECTED)}|{re.escape(layout.RUNS)})/([^/]+?)(?:\.csv$|/)"
)


def paper_index(paper_dir: str | Path) -> dict[str, str]:
    """Experiment and report ids of the paper grids (``config/paper/<paper>.yaml``) -> paper."""
    index: dict[str, str] = {}
    for path in sorted(Path(paper_dir).glob("*.yaml")):
        raw = load_yaml_file(path, "paper config") or {}
        label = PAPER_LABELS.get(path.stem, path.stem)
        for section in ("experiments", "reports"):
            for ident in raw.get(section) or {}:
                index.setdefault(f"{section}:{ident}", label)
    return index


def report_experiments(report: Report, experiments: Iterable[str]) -> list[str]:
    """The config's experiments a report reads, in first-use order (from its inputs and spec)."""
    known = set(experiments)
    found: list[str] = []
    named = [report.spec.get("experiment"), *(report.spec.get("experiments") or [])]
    from_inputs = [m.group(1) for m in map(_RUN_INPUT.search, report.inputs) if m]
    for experiment in [*named, *from_inputs]:
        if isinstance(experiment, str) and experiment in known and experiment not in found:
            found.append(experiment)
    return found


def _base(experiment: str) -> str:
    """An axis-expanded experiment's base id (``mnist_clients__clients_5`` -> ``mnist_clients``)."""
    return experiment.split("__", 1)[0]


def report_paper(report: Report, config: ReportConfig, index: dict[str, str] | None = None) -> str:
    """The paper a report belongs to: the paper file that defines it or its experiment, else the
    proposed method its experiments run (FedAgain, TFL), else LIGHTYEAR."""
    index = index or {}
    if f"reports:{report.name}" in index:
        return index[f"reports:{report.name}"]
    experiments = report_experiments(report, config.experiments)
    for experiment in experiments:
        paper = index.get(f"experiments:{experiment}") or index.get(
            f"experiments:{_base(experiment)}"
        )
        if paper:
            return paper
    if report.kind.startswith("tfl"):
        return "TFL"
    if report.kind.startswith("fedagain"):
        return "FedAgain"
    methods = {m for e in experiments for m in config.experiments[e]["methods"]}
    for method_id in sorted(methods):
        method = config.methods[method_id]["method"]
        if method in ("tfl", "fedagain"):
            return PAPER_LABELS[method]
    return "LIGHTYEAR"


def report_subcategory(report: Report, config: ReportConfig) -> str:
    """The report's experiment (its title), or "several experiments" / "data"."""
    experiments = report_experiments(report, config.experiments)
    if len({_base(e) for e in experiments}) > 1:
        return "several experiments"
    if not experiments:
        return "datasets and other"
    experiment = experiments[0]
    title = config.experiments[experiment].get("title")
    return f"{_base(experiment)}: {title}" if title else _base(experiment)


def report_settings(report: Report, config: ReportConfig) -> dict[str, dict[str, Any]]:
    """The settings behind a report: its kind and parameters, then per experiment the grid and
    its dataset's clients, partition, model and training."""
    spec = {k: v for k, v in report.spec.items() if k not in ("name", "inputs", "runs")}
    settings: dict[str, dict[str, Any]] = {
        "Report": {"name": report.name, "kind": report.kind, **spec}
    }
    for experiment in report_experiments(report, config.experiments):
        exp = config.experiments[experiment]
        dataset = config.experiment_dataset(experiment)
        ds = config.datasets[dataset]
        settings[f"Experiment {experiment}"] = {
            "title": experiment_title(config, experiment),
            "dataset": dataset,
            "methods": ", ".join(config.method_label(m) for m in exp["methods"]),
            "malfunctions": ", ".join(exp["malfunctions"]),
            "k": ", ".join(map(str, exp["k"])),
            "seeds": ", ".join(map(str, exp["seeds"])),
            "clients": ds["clients"],
            "partition": ds["partition"],
            "model": ds["model"].to_dict(),
            **{f"training.{k}": v for k, v in sorted(ds["training"].to_dict().items())},
            "malfunction": ds["malfunction"].to_dict(),
        }
    return settings


def built_and_missing(
    targets: Iterable[str], root: str | Path = "."
) -> tuple[list[str], list[str]]:
    """Split target paths into those that exist under ``root`` and those that do not."""
    built, missing = [], []
    for target in targets:
        (built if (Path(root) / target).exists() else missing).append(target)
    return built, missing


def status_page(title: str, built: list[str], missing: list[str]) -> str:
    """A standalone HTML page listing the config's built and not yet built targets."""

    def items(paths: list[str]) -> str:
        return "".join(f"<li><code>{html.escape(p)}</code></li>" for p in paths) or "<li>none</li>"

    total = len(built) + len(missing)
    how = (
        "<p>Build the rest with <code>snakemake --configfile=CONFIG --cores N</code> (or one "
        "target at a time), then run <code>make report</code> again.</p>"
        if missing
        else ""
    )
    return (
        "<!DOCTYPE html><html><head><meta charset=utf-8><title>What is built</title></head>"
        "<body style='font-family:sans-serif;margin:1.5em'>"
        f"<h2>{html.escape(title)}</h2>"
        f"<p id=summary>{len(built)} of {total} targets built, {len(missing)} not built yet.</p>"
        f"{how}<h3>Not built yet</h3><ul id=missing>{items(missing)}</ul>"
        f"<h3>Built</h3><ul id=built>{items(built)}</ul></body></html>\n"
    )
