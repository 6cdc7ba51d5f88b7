"""The HTML report commands: ``benchlib html-report`` (the whole self-contained report of what a
config has built) and the two steps its workflow rules run, ``benchlib table-html`` and
``benchlib report-status``.

``html-report`` runs Snakemake twice in the workflow's working directory: first it builds the
HTML pages of the tables that exist and the "what is built" page (rules ``table_html`` and
``report_status`` only, so nothing is trained), then ``snakemake --report`` over the target
``report_pages``, which names only outputs that exist: the report covers what has been built and
lists the rest instead of failing on a missing file.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from benchlib.primitives import layout
from benchlib.primitives.errors import BenchlibError, require

REPORT_TARGET = "report_pages"
BUILD_RULES = ("table_html", "report_status", REPORT_TARGET)
EXAMPLES = """examples:
  benchlib html-report --config config/demo.yaml --out results/report.html   (make report)
  benchlib html-report --out results/paper_report.zip        (the paper grids, as a zip)
  benchlib html-report --config config/smoke.yaml -d /tmp/smoke --out /tmp/smoke/report.html"""


def _snakefile(given: str | None) -> Path:
    if given:
        path = Path(given)
    elif Path("Snakefile").is_file():
        path = Path("Snakefile")
    else:
        path = Path(__file__).resolve().parents[3] / "Snakefile"
    require(path.is_file(), f"Snakefile {path} not found; pass --snakefile PATH")
    return path.resolve()


def snakemake_argv(args: argparse.Namespace, *extra: str) -> list[str]:
    """The snakemake command line of one step of ``html-report``."""
    argv = ["snakemake", "-s", str(_snakefile(args.snakefile)), "-d", str(args.directory)]
    if args.config:
        argv.append(f"--configfile={Path(args.config).resolve()}")
    return [*argv, *extra, REPORT_TARGET]


def _run(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        tail = " | ".join(line for line in result.stderr.splitlines()[-6:] if line.strip())
        raise BenchlibError(f"{what} failed (snakemake exit {result.returncode}): {tail}")


def cmd_html_report(args: argparse.Namespace) -> None:
    from benchlib.commands.cli_args import check_output_file

    out = Path(args.out)
    require(
        out.suffix in (".html", ".zip"),
        f"--out {out} must end in .html (one self-contained file) or .zip",
    )
    check_output_file(out)
    out = out.resolve()
    build = snakemake_argv(args, "--cores", str(args.cores), "--allowed-rules", *BUILD_RULES, "--")
    _run(build, "building the table pages")
    _run(snakemake_argv(args, f"--report={out}", "--"), "snakemake --report")
    print(f"wrote {out}; open it in a browser")


def cmd_table_html(args: argparse.Namespace) -> None:
    from benchlib.commands.cli_args import check_output_file
    from benchlib.grid.spec import parse_spec
    from benchlib.primitives.io import write_text_atomic
    from benchlib.report.html_table import table_page

    tex, out = Path(args.tex), Path(args.out)
    require(tex.is_file(), f"table {tex} not found; build it first (snakemake {tex})")
    check_output_file(out)
    spec = parse_spec(args.settings)
    page = table_page(tex.read_text(), str(spec.get("title", tex.stem)), spec.get("settings", {}))
    write_text_atomic(out, page)


def cmd_report_status(args: argparse.Namespace) -> None:
    from benchlib.commands.cli_args import check_output_file
    from benchlib.grid.spec import parse_spec
    from benchlib.primitives.io import write_text_atomic
    from benchlib.report.browse import status_page

    out = Path(args.out)
    check_output_file(out)
    spec = parse_spec(args.spec)
    page = status_page(str(spec.get("title", "Targets")), spec["built"], spec["missing"])
    write_text_atomic(out, page)


def register(add) -> None:
    """Add the three subcommands to the ``benchlib`` parser (``add(name, func, help)``)."""
    p = add(
        "html-report",
        cmd_html_report,
        "write the self-contained HTML report of what a config has built: tables with their "
        "numbers, figures, paper comparisons and a page listing what is not built yet",
    )
    p.epilog = EXAMPLES
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "--config",
        default=None,
        help="config file (default: none, i.e. the paper grids config/paper/*.yaml)",
    )
    p.add_argument(
        "--out",
        default=layout.HTML_REPORT,
        help="report file to write, .html or .zip (default results/report.html)",
    )
    p.add_argument(
        "-d", "--directory", default=".", help="the workflow's working directory (default .)"
    )
    p.add_argument("--cores", type=int, default=1, help="cores for the table pages (default 1)")
    p.add_argument(
        "--snakefile",
        default=None,
        help="the workflow's Snakefile (default ./Snakefile, else the checkout's)",
    )

    p = add("table-html", cmd_table_html, "render a LaTeX table as an HTML page (report step)")
    p.epilog = (
        "example: benchlib table-html --tex tables/mnist5k_sfa.tex "
        '--settings \'{"title": "mnist5k_sfa", "settings": {}}\' --out sfa.html'
    )
    p.add_argument("--tex", required=True, help="the rendered table, tables/<name>.tex")
    p.add_argument(
        "--settings",
        required=True,
        help="JSON (or @file): title and settings (section -> key -> value)",
    )
    p.add_argument("--out", required=True, help="HTML page to write")

    p = add("report-status", cmd_report_status, "write the report's page of built targets")
    p.epilog = (
        'example: benchlib report-status --spec \'{"built": ["tables/a.tex"], '
        '"missing": []}\' --out status.html'
    )
    p.add_argument("--spec", required=True, help="JSON (or @file): title, built and missing")
    p.add_argument("--out", required=True, help="HTML page to write")
