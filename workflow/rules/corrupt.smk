# FedAgain's corrupted clients: a copy of a dataset's store whose corrupted clients' training
# and validation images (or training only: `subsets: [train]`) carry one random corruption each
# (benchlib.data.corruptions). Cells of a dataset entry with `corruption:` (or the `corruption`
# grid axis) read it instead of the prepared store. Its path ends in a key of its settings
# (benchlib.data.corruptions.settings_key, defaults filled in), so a changed setting or default
# builds a new store instead of reusing a stale one.


rule corrupt_store:
    input:
        manifest=lambda wildcards: layout.store_manifest(
            CFG.store_name(wildcards.dataset)
        ),
        split=lambda wildcards: layout.split_csv(CFG.split_name(wildcards.dataset)),
    output:
        manifest=layout.CORRUPTED_MANIFEST,
    log:
        "logs/corrupt_store/{dataset}/{settings}.log",
    wildcard_constraints:
        settings=r"[0-9a-f]{12}",
    conda:
        "../../envs/benchlib.yaml"
    threads: 4
    params:
        store=subpath(input.manifest, parent=True),
        out=subpath(output.manifest, parent=True),
        clients=lambda wildcards: CFG.datasets[wildcards.dataset]["clients"],
        scenario=lambda wildcards: CFG.corruption_json(wildcards.dataset),
        seed=lambda wildcards: CFG.datasets[wildcards.dataset]["split"]["seed"],
    shell:
        "python -m benchlib.data.corruptions corrupt --store {params.store} --split {input.split}"
        " --out {params.out} --clients {params.clients} --scenario {params.scenario:q}"
        " --seed {params.seed} --settings {wildcards.settings} --workers {threads} 2> {log}"
