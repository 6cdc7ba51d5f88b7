# One federated run per cell: (experiment, malfunction, method, k, seed).
# Round checkpoints live outside the declared outputs (Snakemake deletes outputs before a
# job runs), so a re-run after a crash resumes from the last completed round.


include: "resources.smk"


rule run_cell:
    input:
        unpack(get_cell_data),
    output:
        metrics=layout.RUN_METRICS,
        timing=layout.RUN_TIMING,
    log:
        "logs/run_cell/{experiment}/{malfunction}/{method}/k{k}/seed{seed}.log",
    benchmark:
        "benchmarks/run_cell/{experiment}/{malfunction}/{method}/k{k}/seed{seed}.tsv"
    conda:
        "../../envs/benchlib.yaml"
    threads: 1
    resources:
        mem_mb=get_cell_mem_mb,
        runtime=get_cell_runtime,
    params:
        spec=get_cell_spec,
        store=subpath(input.store, parent=True),
        checkpoints=get_checkpoint_dir,
    shell:
        "benchlib run --spec {params.spec:q} --store {params.store} --split {input.split}"
        " --out {output.metrics} --timing {output.timing}"
        " --checkpoints {params.checkpoints} --threads {threads} 2> {log}"
