# Aggregate targets per paper and kind: `snakemake lightyear_figures`, `snakemake tfl_tables`,
# `snakemake fedagain_all`... (<paper>_tables, _figures, _reports, _all; benchlib.configuration.targets).

AGGREGATES = aggregate_targets(CFG, PAPER_INDEX)


for aggregate_name, aggregate_files in AGGREGATES.items():

    rule:
        name:
            aggregate_name
        input:
            aggregate_files,
