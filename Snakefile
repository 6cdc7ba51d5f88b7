# benchlib: regenerate the tables and figures of LIGHTYEAR, FedAgain and TFL from raw data.
# Usage: snakemake --profile profiles/slurm tables/femnist_ana.tex  (a paper target, on SLURM)
#        snakemake --configfile=config/demo.yaml --cores 2          (all targets of a config)
# The checkout's entry: with no --configfile, the config is the three papers' grids
# (config/paper/*.yaml merged), so every paper target resolves by name. The workflow itself is
# workflow/Snakefile, the catalog's entry (snakedeploy, `snakemake -s workflow/Snakefile`),
# whose default config is config/config.yaml.

# What the `include:` directive does, keeping the included rule `all` as the default target
# (the directive restores the includer's default target, none here).
workflow.include("workflow/Snakefile", overwrite_default_target=True)
