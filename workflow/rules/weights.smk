# Pretrained model weights (a dataset's model with params.pretrained: true): fetched once on the
# submitting host (localrule: compute nodes are often offline) into results/weights/, checked
# against the sha256 prefix torchvision puts in the file name; cells load them from there.
# Its functions (weights_of, get_weights_url) are in common.smk.


localrules:
    fetch_weights,


rule fetch_weights:
    output:
        layout.WEIGHT_FILE,
    log:
        "logs/fetch_weights/{filename}.log",
    wildcard_constraints:
        filename=r"[^/]+\.pth",
    conda:
        "../../envs/benchlib.yaml"
    params:
        url=get_weights_url,
    shell:
        "benchlib fetch-weights --url {params.url:q} --out {output} 2> {log}"
