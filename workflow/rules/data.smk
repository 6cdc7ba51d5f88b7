# Data steps: prepare a dataset into the standard store, then split it into clients.
# Both run on the submitting host (no GPU; once per dataset); only training cells are jobs.


localrules:
    prepare_data,
    split_data,


rule prepare_data:
    input:
        lambda wildcards: CFG.download_files(wildcards.dataset),
    output:
        manifest=layout.STORE_MANIFEST,
        index=layout.STORE_INDEX,
    log:
        "logs/prepare_data/{dataset}.log",
    benchmark:
        "benchmarks/prepare_data/{dataset}.tsv"
    conda:
        "../../envs/benchlib.yaml"
    params:
        spec=get_dataset_spec,
        store=subpath(output.manifest, parent=True),
    shell:
        "benchlib prepare --spec {params.spec:q} --out {params.store} 2> {log}"


rule split_data:
    input:
        manifest=lambda wildcards: layout.store_manifest(
            CFG.store_name(wildcards.dataset)
        ),
    output:
        split=layout.SPLIT,
    log:
        "logs/split_data/{dataset}.log",
    benchmark:
        "benchmarks/split_data/{dataset}.tsv"
    conda:
        "../../envs/benchlib.yaml"
    params:
        spec=get_dataset_spec,
        store=subpath(input.manifest, parent=True),
    shell:
        "benchlib split --spec {params.spec:q} --store {params.store} --out {output.split} 2> {log}"
