# Paper data: checksummed raw-data downloads. They run on the submitting host (localrules):
# cluster nodes often have no network. prepare_data (data.smk) takes the downloaded files of its
# dataset as input. (Paper tables and figures are reports: report.smk renders them.)


localrules:
    download_data,


rule download_data:
    output:
        layout.DOWNLOAD,
    log:
        "logs/download_data/{dataset}/{filename}.log",
    wildcard_constraints:
        filename=r"[^/]+",
    conda:
        "../../envs/benchlib.yaml"
    params:
        spec=get_dataset_spec,
    shell:
        "benchlib download --spec {params.spec:q} --out {output} 2> {log}"
