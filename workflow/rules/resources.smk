# SLURM resources of run_cell: memory and runtime scale with the prepared dataset (read from its
# manifest, an input of the cell) and with the cell's epochs, and grow with each retry. A
# profile's set-resources (or --set-resources on the command line) overrides both.
# Its functions (get_cell_mem_mb, get_cell_runtime, heavy_prepare) are in common.smk.


# Heavy data preparation (sources that declare prepare_resources: multi-GB archives such as
# Camelyon17-WILDS and ISIC 2019) runs as a cluster job, not on the submitting host (a login
# node): the same step as prepare_data, preferred for those datasets. Downloads stay local.
use rule prepare_data as prepare_data_job with:
    wildcard_constraints:
        dataset="|".join(HEAVY_DATASETS) or "(?!)",
    threads: lambda wildcards: heavy_prepare(wildcards.dataset)["cpus_per_task"]
    resources:
        mem_mb=lambda wildcards, attempt: attempt
        * heavy_prepare(wildcards.dataset)["mem_mb"],
        runtime=lambda wildcards, attempt: attempt
        * heavy_prepare(wildcards.dataset)["runtime"],


ruleorder: prepare_data_job > prepare_data
