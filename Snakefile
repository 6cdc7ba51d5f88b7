# benchlib: regenerate the tables and figures of LIGHTYEAR, FedAgain and TFL from raw data.
# Usage: snakemake --profile profiles/slurm tables/femnist_ana.tex  (a paper target, on SLURM)
#        snakemake --configfile=config/demo.yaml --cores 2          (all targets of a config)


import sys
from pathlib import Path

from snakemake.utils import min_version

from benchlib.errors import BenchlibError
from benchlib.home import use_workflow_dir
from benchlib.paper_configs import wants_paper_grids, with_paper_grids
from benchlib.targets import (
    all_targets,
    config_file_targets,
    requested_targets,
    unknown_report_target,
)

min_version("9.0")


# The --configfile trap: it takes several values, so `--configfile A.yaml B.yaml` loads both, and
# `snakemake A.yaml` asks to build a config. Say so in one line (README: --configfile=FILE).
for named in config_file_targets(requested_targets()):
    sys.stderr.write(
        f"error: target {named} is a config file; pass it as --configfile={named} "
        "(with '=': --configfile takes several values and swallows targets written after it)\n"
    )
    sys.exit(1)


# BENCHLIB_DIR: this checkout, also when another project imports the workflow as a module
# (`module benchlib: snakefile: ...; config: config`), where the working directory is theirs.
# benchlib's own files (paper configs, paper values, references) resolve against it, the user's
# against the working directory (benchlib.home).
BENCHLIB_DIR = Path(workflow.current_basedir).resolve()
use_workflow_dir(BENCHLIB_DIR)

# The paper grids (config/paper/*.yaml of benchlib's folder, merged) with the config laid over
# them, so every paper target resolves by name: without a --configfile and without experiments
# (the config a project passes to the module), or with `paper_grids: true`. A config with
# experiments (or a --configfile) is otherwise standalone: the paper grids never leak into it.
PAPER_GRIDS = wants_paper_grids(config, bool(workflow.overwrite_configfiles))
if PAPER_GRIDS:
    try:
        paper_config = with_paper_grids(config, force=True)
    except BenchlibError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(1)
    config.clear()
    config.update(paper_config)


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/corrupt.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/weights.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/comparison.smk"
include: "workflow/rules/paper.smk"
include: "workflow/rules/browse.smk"
include: "workflow/rules/aggregate.smk"


# A requested table, figure or report the config does not build: one line saying why and which
# config builds it (not Snakemake's MissingRuleException).
_unknown = unknown_report_target(requested_targets(), CFG)
if _unknown:
    sys.stderr.write(f"error: {_unknown}\n")
    sys.exit(1)


rule all:
    default_target: True
    input:
        all_targets(CFG),
