# Report steps (cheap, run on the submitting host): collect metrics, render tables and figures.
# Every table and figure is a report of a registered kind (benchlib.report.base); two generic
# rules render them all, taking each report's inputs and spec from the config (common.smk).


localrules:
    all,
    collect_results,
    collect_table_results,
    render_table,
    render_figure,
    render_figure_numbers,


rule collect_results:
    input:
        get_experiment_metrics,
    output:
        layout.COLLECTED_EXPERIMENT,
    log:
        "logs/collect_results/{experiment}.log",
    conda:
        "../../envs/benchlib.yaml"
    shell:
        "benchlib collect --experiment {wildcards.experiment} --out {output} {input} 2> {log}"


# One table needs only its malfunction's cells (and the shared k = 0 cells).
rule collect_table_results:
    input:
        get_table_metrics,
    output:
        layout.COLLECTED_CSV,
    log:
        "logs/collect_results/{experiment}_{malfunction}.log",
    conda:
        "../../envs/benchlib.yaml"
    shell:
        "benchlib collect --experiment {wildcards.experiment} --out {output} {input} 2> {log}"


rule render_table:
    input:
        get_report_inputs,
    output:
        layout.TABLE,  # in the HTML report as its page (browse.smk: table_html)
    log:
        "logs/render_table/{report}.log",
    wildcard_constraints:
        report=report_pattern("table"),
    conda:
        "../../envs/benchlib.yaml"
    params:
        kind=get_report_kind,
        spec=get_report_spec,
    shell:
        "printf %s {params.spec:q} | benchlib report --kind {params.kind} --spec @- --collected {input}"
        " --out {output} 2> {log}"


rule render_figure:
    input:
        get_report_inputs,
    output:
        pdf=layout.FIGURE_PDF,
        png=report(
            layout.FIGURE_PNG,
            caption="../report/figure.rst",
            category=report_category,
            subcategory=report_subcategory,
        ),
    log:
        "logs/render_figure/{report}.log",
    wildcard_constraints:
        report=report_pattern("figure"),
    conda:
        "../../envs/benchlib.yaml"
    params:
        kind=get_report_kind,
        spec=get_report_spec,
    shell:
        "printf %s {params.spec:q} | benchlib report --kind {params.kind} --spec @- --collected {input}"
        " --out {output.pdf} {output.png} 2> {log}"


# A figure with a CSV of the numbers it shows (e.g. the ranking kind); the report shows both.
rule render_figure_numbers:
    input:
        get_report_inputs,
    output:
        pdf=layout.FIGURE_PDF,
        png=report(
            layout.FIGURE_PNG,
            caption="../report/figure.rst",
            category=report_category,
            subcategory=report_subcategory,
        ),
        csv=report(
            layout.FIGURE_NUMBERS,
            caption="../report/figure_numbers.rst",
            category=report_category,
            subcategory=report_subcategory,
        ),
    log:
        "logs/render_figure/{report}.log",
    wildcard_constraints:
        report=report_pattern("figure_numbers"),
    conda:
        "../../envs/benchlib.yaml"
    params:
        kind=get_report_kind,
        spec=get_report_spec,
    shell:
        "printf %s {params.spec:q} | benchlib report --kind {params.kind} --spec @- --collected {input}"
        " --out {output.pdf} {output.png} {output.csv} 2> {log}"
