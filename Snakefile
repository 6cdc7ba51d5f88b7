# benchlib: regenerate the tables and figures of LIGHTYEAR, FedAgain and TFL from raw data.
# Usage: snakemake --profile profiles/slurm tables/femnist_ana.tex  (a paper target, on SLURM)
#        snakemake --configfile=config/demo.yaml --cores 2          (all targets of a config)


import sys
from pathlib import Path

from snakemake.utils import min_version, update_config

from benchlib.errors import BenchlibError
from benchlib.paper_configs import load_paper_config
from benchlib.targets import all_targets, config_file_targets, requested_targets
from benchlib.workflow_guard import guard

min_version("9.0")


# The --configfile trap: it takes several values, so `--configfile A.yaml B.yaml` loads both, and
# `snakemake A.yaml` asks to build a config. Say so in one line (README: --configfile=FILE).
for named in config_file_targets(requested_targets()):
    sys.stderr.write(
        f"error: target {named} is a config file; pass it as --configfile={named} "
        "(with '=': --configfile takes several values and swallows targets written after it)\n"
    )
    sys.exit(1)


# Every config file read strictly (module configs too) and a word on a concurrent Snakemake.
guard(workflow, config)


# BENCHLIB_DIR: this checkout, also when another project imports the workflow as a module
# (`module benchlib: snakefile: ...; config: config`), where the working directory is theirs.
BENCHLIB_DIR = Path(workflow.current_basedir).resolve()

# A --configfile, or a config with experiments (the one a project passes to the module), is
# standalone: the paper grids never leak into it. Otherwise the config is the papers' grids
# together (config/paper/*.yaml of this checkout, merged), so every paper target resolves by
# name; --config key=value still overrides either.
PAPER_GRIDS = not workflow.overwrite_configfiles and "experiments" not in config
if PAPER_GRIDS:
    try:
        paper_config = load_paper_config(BENCHLIB_DIR / "config" / "paper")
    except BenchlibError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(1)
    update_config(paper_config, config)
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


rule all:
    default_target: True
    input:
        all_targets(CFG),
