# Config validation, wildcard constraints and input functions shared by all rules.

import functools
import json
import math
import os
import sys

import benchlib.primitives.layout as layout
from benchlib.configuration.config import Config, Cell, NO_MALFUNCTION
from benchlib.configuration.targets import report_names
from benchlib.data.registry import get_dataset
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.weights import weights_path, weights_url
from benchlib.primitives.yaml_load import typed_scalars
from snakemake.utils import update_config


def load_validated_config(raw):
    try:
        return Config(raw)
    except BenchlibError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(1)


# --config key={a: [0, 1]}: Snakemake leaves the scalars of a flow collection strings
for _key, _value in (workflow.config_settings.config or {}).items():
    if isinstance(_value, dict | list):
        update_config(config, {_key: typed_scalars(_value)})
CFG = load_validated_config(config)
MALFUNCTIONS = sorted(
    {m for e in CFG.experiments.values() for m in e["malfunctions"]} | {NO_MALFUNCTION}
)


def alternatives(names):
    return "|".join(sorted(names, key=len, reverse=True))


wildcard_constraints:
    dataset=alternatives(CFG.datasets),
    experiment=alternatives(CFG.experiments),
    malfunction=alternatives(MALFUNCTIONS),
    method=alternatives(CFG.methods),
    k=r"\d+",
    seed=r"\d+",


def as_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def wildcard_cell(wildcards):
    return Cell(
        wildcards.experiment,
        wildcards.malfunction,
        wildcards.method,
        int(wildcards.k),
        int(wildcards.seed),
    )


def get_dataset_spec(wildcards):
    return as_json(CFG.dataset_spec(wildcards.dataset))


# Snakemake calls a job's input, params and resource functions several times (DAG, dry-run
# listing, scheduling); a paper grid has thousands of cells. Each cell's spec and each dataset's
# inputs are resolved once (CFG does not change after parsing). Read-only: never mutate them.
@functools.cache
def cell_spec_of(cell):
    return CFG.cell_spec(cell)


@functools.cache
def cell_spec_json(cell):
    return cell_spec_of(cell).to_json()


@functools.cache
def cell_inputs_of(dataset):
    return CFG.cell_inputs(dataset)


def get_cell_spec(wildcards):
    return cell_spec_json(wildcard_cell(wildcards))


def get_cell_data(wildcards):
    dataset = CFG.experiment_dataset(wildcards.experiment)
    store, split = cell_inputs_of(dataset)  # the corrupted copy of the store if any
    return {
        "store": f"{store}/manifest.json",
        "split": split,
        **weights_of(
            dataset
        ),  # pretrained weights (weights.smk), fetched on the submitting host
    }


def get_checkpoint_dir(wildcards):
    return wildcard_cell(wildcards).checkpoint_dir


def get_experiment_metrics(wildcards):
    return [cell.metrics_path for cell in CFG.cells(wildcards.experiment)]


def get_table_metrics(wildcards):
    cells = CFG.cells(wildcards.experiment, wildcards.malfunction)
    return [cell.metrics_path for cell in cells]


# Reports (benchlib.report.base): every table and figure of the config, by name. The generic
# rules render_table and render_figure (report.smk) take their inputs and spec from here.
def report_pattern(output):
    """Regex of the config's report names of one output kind (never matches when none)."""
    return alternatives(report_names(CFG, output)) or "(?!)"


def get_report(wildcards):
    return CFG.reports[wildcards.report]


def get_report_inputs(wildcards):
    return list(get_report(wildcards).inputs)


def get_report_spec(wildcards):
    return as_json(get_report(wildcards).spec)


def get_report_kind(wildcards):
    return get_report(wildcards).kind


# ---- pretrained weights (weights.smk)
def weights_of(dataset):
    """The weights file a dataset's model needs ({} when it is not pretrained)."""
    model = CFG.datasets[dataset]["model"]  # params with every default filled
    if not model["params"].get("pretrained"):  # only torchvision models declare it
        return {}
    return {"weights": weights_path(model["name"], model["params"])}


def get_weights_url(wildcards):
    for dataset in CFG.datasets:
        needed = weights_of(dataset).get("weights")
        if needed == layout.weight_file(wildcards.filename):
            model = CFG.datasets[dataset]["model"]
            return weights_url(model["name"], model["params"])
    raise ValueError(f"no dataset of this config uses the weights {wildcards.filename}")


# ---- SLURM resources of run_cell and heavy preparation (resources.smk)
RESIDENT_LIMIT_MB = 2 * 1024**3 / 1e6  # benchlib.fl.data.RESIDENT_LIMIT_BYTES


def cell_data_mb(input):
    """Size of the prepared inputs in MB (uint8 images, float32 rows), from the store manifest."""
    with open(input.store) as handle:
        manifest = json.load(handle)
    itemsize = 4 if "features" in manifest.get("arrays", []) else 1
    return manifest["num_samples"] * math.prod(manifest["image_shape"]) * itemsize / 1e6


def get_cell_mem_mb(wildcards, input, attempt):
    """Host memory: 2 GB plus twice the data kept resident (a copy and its staging copy);
    cells stream stores above the resident limit batch by batch, so that bounds the need.
    """
    return attempt * (2000 + math.ceil(2 * min(cell_data_mb(input), RESIDENT_LIMIT_MB)))


def get_cell_runtime(wildcards, input, attempt):
    """Minutes: 30 plus 2 minutes per GB of pixels per local epoch (conservative on a GPU)."""
    training = cell_spec_of(wildcard_cell(wildcards))["training"]
    epochs = training["rounds"] * training["local_epochs"]
    return attempt * (30 + math.ceil(epochs * cell_data_mb(input) / 500))


def heavy_prepare(dataset):
    return get_dataset(CFG.datasets[dataset]["source"]).prepare_resources


HEAVY_DATASETS = sorted(d for d in CFG.datasets if heavy_prepare(d))


# ---- the HTML report (browse.smk): categories, table settings, what is built
import benchlib.report.browse as browse
from benchlib.configuration.targets import aggregate_targets, all_targets
from benchlib.grid.paper_configs import paper_dir

PAPER_INDEX = browse.paper_index(paper_dir()) if PAPER_GRIDS else {}


def report_category(wildcards):
    return browse.report_paper(get_report(wildcards), CFG, PAPER_INDEX)


def report_subcategory(wildcards):
    return browse.report_subcategory(get_report(wildcards), CFG)


def get_table_settings(wildcards):
    entry = get_report(wildcards)
    return as_json(
        {"title": entry.name, "settings": browse.report_settings(entry, CFG)}
    )


def get_report_status(wildcards):
    built, missing = browse.built_and_missing(all_targets(CFG))
    title = CFG.raw.get("description", "paper grids")
    return as_json(
        {"title": f"{title}: what is built", "built": built, "missing": missing}
    )


def get_report_pages(wildcards):
    """The report's files that exist: the HTML page of each built table, each built figure's
    PNG (and CSV of its numbers), each built text report, and the status page."""
    pages = [layout.HTML_STATUS]
    for entry in CFG.reports.values():
        if not all(os.path.exists(target) for target in entry.targets):
            continue
        if entry.output == "table":
            pages.append(layout.html_table(entry.name))
        elif entry.output in ("figure", "figure_numbers"):
            pages += [t for t in entry.targets if t.endswith((".png", ".csv"))]
        else:
            pages += entry.targets
    return pages
