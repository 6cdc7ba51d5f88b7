# The HTML report (benchlib html-report, make report): every table as an HTML page with its
# numbers, caption and the cells' settings; a page of what is built; and the target
# report_pages, which names only outputs that exist, so `snakemake --report` covers what has been
# built. Categories: paper, then experiment (benchlib.report.browse).


localrules:
    table_html,
    report_status,
    report_pages,


rule table_html:
    input:
        layout.TABLE,
    output:
        report(
            layout.HTML_TABLE,
            caption="../report/table.rst",
            category=report_category,
            subcategory=report_subcategory,
        ),
    log:
        "logs/table_html/{report}.log",
    wildcard_constraints:
        report=report_pattern("table"),
    conda:
        "../../envs/benchlib.yaml"
    params:
        settings=get_table_settings,
    shell:
        "benchlib table-html --tex {input} --settings {params.settings:q} --out {output}"
        " 2> {log}"


rule report_status:
    output:
        report(
            layout.HTML_STATUS,
            caption="../report/status.rst",
            category="Overview",
        ),
    log:
        "logs/report_status.log",
    conda:
        "../../envs/benchlib.yaml"
    params:
        spec=get_report_status,
    shell:
        "printf %s {params.spec:q} | benchlib report-status --spec @- --out {output} 2> {log}"


rule report_pages:
    input:
        get_report_pages,
