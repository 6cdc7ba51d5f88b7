# Text reports (reports/<name>.md plus reports/<name>.pdf), e.g. the paper-vs-ours comparison
# (report kind paper_comparison): like render_figure, inputs, kind and spec come from the config.


localrules:
    render_markdown,
    render_markdown_numbers,


rule render_markdown:
    input:
        get_report_inputs,
    output:
        md=report(
            layout.MARKDOWN,
            caption="../report/comparison.rst",
            category=report_category,
            subcategory="paper comparison",
        ),
        pdf=report(
            layout.MARKDOWN_PDF,
            caption="../report/comparison.rst",
            category=report_category,
            subcategory="paper comparison",
        ),
    log:
        "logs/render_markdown/{report}.log",
    wildcard_constraints:
        report=report_pattern("markdown"),
    conda:
        "../../envs/benchlib.yaml"
    params:
        kind=get_report_kind,
        spec=get_report_spec,
    shell:
        "printf %s {params.spec:q} | benchlib report --kind {params.kind} --spec @- --collected {input}"
        " --out {output.md} {output.pdf} 2> {log}"


# A text report with the CSV of its numbers (report kind claims: one verdict per claim); its own
# section of the HTML report.
rule render_markdown_numbers:
    input:
        get_report_inputs,
    output:
        md=report(
            layout.MARKDOWN,
            caption="../report/claims.rst",
            category=report_category,
            subcategory="claims",
        ),
        pdf=report(
            layout.MARKDOWN_PDF,
            caption="../report/claims.rst",
            category=report_category,
            subcategory="claims",
        ),
        csv=report(
            layout.MARKDOWN_NUMBERS,
            caption="../report/claims.rst",
            category=report_category,
            subcategory="claims",
        ),
    log:
        "logs/render_markdown/{report}.log",
    wildcard_constraints:
        report=report_pattern("markdown_numbers"),
    conda:
        "../../envs/benchlib.yaml"
    params:
        kind=get_report_kind,
        spec=get_report_spec,
    shell:
        "printf %s {params.spec:q} | benchlib report --kind {params.kind} --spec @- --collected {input}"
        " --out {output.md} {output.pdf} {output.csv} 2> {log}"
