"""The output layout: where every file of a run lives, relative to the working directory.

One owner for every path the rules, report kinds, dataset steps and ``benchlib status`` use. The
patterns are Snakemake wildcard patterns (``{experiment}``...); the functions fill them. A
plugin's report kind finds its inputs here (e.g. :func:`collected_csv`). Torch-free.
"""

from __future__ import annotations

RESULTS = "results"
TABLES = "tables"
FIGURES = "figures"
REPORTS = "reports"
LOGS = "logs"

# prepared data, splits and what leads to them
STORE = f"{RESULTS}/data/{{dataset}}"
STORE_MANIFEST = f"{STORE}/manifest.json"
STORE_INDEX = f"{STORE}/index.csv"
DOWNLOADS = f"{RESULTS}/downloads"
DOWNLOAD = f"{DOWNLOADS}/{{dataset}}/{{filename}}"
SPLIT = f"{RESULTS}/splits/{{dataset}}.csv"
CORRUPTED = f"{RESULTS}/corrupted"
CORRUPTED_MANIFEST = f"{CORRUPTED}/{{dataset}}/{{settings}}/manifest.json"
WEIGHTS = f"{RESULTS}/weights"
WEIGHT_FILE = f"{WEIGHTS}/{{filename}}"

# cells
RUNS = f"{RESULTS}/runs"
CELL = "{experiment}/{malfunction}/{method}/k{k}/seed{seed}"
RUN_METRICS = f"{RUNS}/{CELL}/metrics.json"
RUN_TIMING = f"{RUNS}/{CELL}/timing.json"
CHECKPOINTS = f"{RESULTS}/checkpoints"

# collected results and rendered reports
COLLECTED = f"{RESULTS}/collected"
COLLECTED_EXPERIMENT = f"{COLLECTED}/{{experiment}}.csv"
COLLECTED_CSV = f"{COLLECTED}/{{experiment}}/{{malfunction}}.csv"
TABLE = f"{TABLES}/{{report}}.tex"
FIGURE_PDF = f"{FIGURES}/{{report}}.pdf"
FIGURE_PNG = f"{FIGURES}/{{report}}.png"
FIGURE_NUMBERS = f"{FIGURES}/{{report}}.csv"
MARKDOWN = f"{REPORTS}/{{report}}.md"
MARKDOWN_PDF = f"{REPORTS}/{{report}}.pdf"
MARKDOWN_NUMBERS = f"{REPORTS}/{{report}}.csv"
# what a report of each output kind writes
REPORT_OUTPUTS: dict[str, tuple[str, ...]] = {
    "table": (TABLE,),
    "figure": (FIGURE_PDF, FIGURE_PNG),
    "figure_numbers": (FIGURE_PDF, FIGURE_PNG, FIGURE_NUMBERS),
    "markdown": (MARKDOWN, MARKDOWN_PDF),  # text report + its figure
    "markdown_numbers": (MARKDOWN, MARKDOWN_PDF, MARKDOWN_NUMBERS),  # + the numbers it shows
}
HTML_TABLE = f"{RESULTS}/report/tables/{{report}}.html"
HTML_STATUS = f"{RESULTS}/report/status.html"
HTML_REPORT = f"{RESULTS}/report.html"


def store_dir(dataset: str) -> str:
    """The prepared store of ``dataset`` (a store name, see ``Config.store_name``)."""
    return STORE.format(dataset=dataset)


def store_manifest(dataset: str) -> str:
    return STORE_MANIFEST.format(dataset=dataset)


def split_csv(split: str) -> str:
    """The split CSV of ``split`` (a split name, see ``Config.split_name``)."""
    return SPLIT.format(dataset=split)


def weight_file(filename: str) -> str:
    return WEIGHT_FILE.format(filename=filename)


def run_dir(cell_id: str) -> str:
    """The folder of a cell's metrics.json, by its id ``experiment/malfunction/method/kK/seedS``."""
    return f"{RUNS}/{cell_id}"


def cell_metrics(cell_id: str) -> str:
    """A cell's metrics.json, by its id."""
    return f"{run_dir(cell_id)}/metrics.json"


def cell_timing(cell_id: str) -> str:
    """A cell's timing.json (wall time, host, device), by its id."""
    return f"{run_dir(cell_id)}/timing.json"


def checkpoint_dir(cell_id: str) -> str:
    """A cell's round checkpoints: outside its declared outputs, which Snakemake deletes before
    re-running a job."""
    return f"{CHECKPOINTS}/{cell_id}"


def run_metrics(experiment: str, malfunction: str, method: str, k: int, seed: int) -> str:
    return RUN_METRICS.format(
        experiment=experiment, malfunction=malfunction, method=method, k=k, seed=seed
    )


def collected_csv(experiment: str, malfunction: str) -> str:
    """The tidy CSV of one experiment's cells of one malfunction (k = 0 cells: ``none``)."""
    return COLLECTED_CSV.format(experiment=experiment, malfunction=malfunction)


def collected_from(path: str) -> tuple[str, str | None] | None:
    """``(experiment, malfunction)`` of a collected CSV path (malfunction None for an
    experiment's whole CSV), or None for another path."""
    prefix = f"{COLLECTED}/"
    if not path.startswith(prefix) or not path.endswith(".csv"):
        return None
    parts = path.removeprefix(prefix).removesuffix(".csv").split("/")
    return (parts[0], parts[1] if len(parts) == 2 else None)


def report_outputs(output: str, name: str) -> tuple[str, ...]:
    """The files report ``name`` of output kind ``output`` writes."""
    return tuple(pattern.format(report=name) for pattern in REPORT_OUTPUTS[output])


def html_table(name: str) -> str:
    return HTML_TABLE.format(report=name)
