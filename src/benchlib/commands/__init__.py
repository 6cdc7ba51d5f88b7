"""Commands: the `benchlib` command line, its benchmarks and fork server, and what it runs
besides the pipeline steps (status, docs, the HTML report, plugin listings, method checks, the
workflow guard)."""
