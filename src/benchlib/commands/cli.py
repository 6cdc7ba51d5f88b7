"""The ``benchlib`` command: one thin subcommand per pipeline step.

Every step takes explicit input and output paths; Snakemake passes each step's resolved settings
as a JSON ``--spec`` (a literal JSON object, or ``@file.json``). Bad input ends with one line
``error: ...`` on stderr and exit status 2, and no output file is created.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib.commands.cli_args import (
    check_output_dir,
    check_output_file,
    require_keys,
    set_threads,
)
from benchlib.primitives.errors import BenchlibError, missing_extra, os_fault
from benchlib.primitives.io import loads_json

LOG = logging.getLogger("benchlib")


# ---------------------------------------------------------------------------- commands
def cmd_prepare(args: argparse.Namespace) -> None:
    from benchlib.configuration.config import DEFAULT_TASK
    from benchlib.data.registry import check_local_copy, get_dataset
    from benchlib.grid.spec import parse_spec

    spec = parse_spec(args.spec)
    require_keys(spec, ("dataset", "source"), "--spec")
    check_output_dir(Path(args.out))
    source = get_dataset(spec["source"])
    params = source.resolve(spec.get("params"))
    check_local_copy(source, spec["dataset"], params)
    LOG.info("preparing dataset %s from source %s -> %s", spec["dataset"], source.name, args.out)
    source.prepare(Path(args.out), params, task=spec.get("task", DEFAULT_TASK))


def cmd_download(args: argparse.Namespace) -> None:
    from benchlib.data.download import fetch, remote_file
    from benchlib.data.registry import get_dataset
    from benchlib.grid.spec import parse_spec

    spec = parse_spec(args.spec)
    require_keys(spec, ("dataset", "source"), "--spec")
    params = get_dataset(spec["source"]).resolve(spec.get("params"))
    out = Path(args.out)
    check_output_file(out)
    remote = remote_file(spec["source"], out.name, params)
    fetch(
        remote,
        out.parent,
        retries=params["retries"],
        timeout=params["timeout"],
        context=f"datasets.{spec['dataset']}.params",
    )
    LOG.info("%s is in place (sha256 %s)", out, remote.sha256 or "not pinned: checked at prepare")


def cmd_fetch_weights(args: argparse.Namespace) -> None:
    from benchlib.models.pretrained import fetch_weights

    out = Path(args.out)
    check_output_file(out)
    fetch_weights(args.url, out)
    LOG.info("%s is in place (sha256 prefix checked)", out)


def cmd_split(args: argparse.Namespace) -> None:
    from benchlib.data.split import SplitSpec, make_split, write_split
    from benchlib.data.store import load_store
    from benchlib.grid.spec import parse_spec

    spec = parse_spec(args.spec)
    require_keys(spec, ("dataset", "clients", "partition", "split"), "--spec")
    check_output_file(Path(args.out))
    data = load_store(args.store)
    table = make_split(data, SplitSpec.from_config(spec))
    write_split(table, args.out)
    counts = table.groupby(["client", "subset"]).size().unstack(fill_value=0)
    LOG.info("split %s into %d clients:\n%s", spec["dataset"], spec["clients"], counts)


def cmd_run(args: argparse.Namespace) -> None:
    from benchlib.declarations import plugins
    from benchlib.grid.plugin_use import require_planned_plugins
    from benchlib.grid.spec import CellSpec

    spec = CellSpec.from_text(args.spec)
    plugins.require_loadable()  # one that failed part-way may have registered half of its parts
    require_planned_plugins(spec.plugins)
    _run_spec(
        spec,
        Path(args.store),
        Path(args.split),
        Path(args.out),
        Path(args.timing) if args.timing else None,
        Path(args.checkpoints),
        args.threads,
        args.stop_after,
    )


def run_forked(args: argparse.Namespace, argv: list[str]) -> int | None:
    """A ``benchlib run`` under ``benchlib forkserver``: the cell's exit status from a child of
    the warm server, or None to run it in this process (no server, or it refused)."""
    from benchlib.commands.forkserver import ENV_SOCKET

    if not os.environ.get(ENV_SOCKET):
        return None
    from benchlib.commands.forkserver.client import delegate, spec_kernels

    setting = spec_kernels(args.spec)
    return None if setting is None else delegate(argv, setting)


def cmd_forkserver(args: argparse.Namespace) -> None:
    from benchlib.commands.forkserver.wrapper import run_with_server

    command = args.wrapped[1:] if args.wrapped[:1] == ["--"] else args.wrapped
    if args.threads < 1:
        raise BenchlibError(f"--threads must be at least 1, got {args.threads}")
    raise SystemExit(run_with_server(command, args.kernels, args.threads))


def cmd_run_cell(args: argparse.Namespace) -> None:
    from benchlib.configuration.config import load_config
    from benchlib.grid.spec import Cell

    config = load_config(args.config)
    cell = Cell.parse(args.cell)
    grid = config.cells(cell.experiment) if cell.experiment in config.experiments else []
    if cell not in grid:
        raise BenchlibError(
            f"cell {cell.id} is not in the grid of {args.config}; list the grid with "
            f"snakemake -n --configfile={args.config}"
        )
    spec = config.cell_spec(cell)
    store, split = config.cell_inputs(spec.dataset)
    for path in (Path(store) / "manifest.json", Path(split)):
        if not path.exists():
            raise BenchlibError(
                f"{path} is missing; prepare it first: snakemake --configfile={args.config} "
                f"--cores 1 {split}"
            )
    out = Path(args.out_dir) if args.out_dir else Path(cell.run_dir)
    checkpoints = Path(args.out_dir) / "checkpoints" if args.out_dir else Path(cell.checkpoint_dir)
    from benchlib.primitives import cpu_kernels

    if cpu_kernels.apply(spec.training.cpu_kernels):  # native: nothing to set before imports
        _run_spec(spec, Path(store), Path(split), out / "metrics.json", out / "timing.json",
                  checkpoints, args.threads, None)  # fmt: skip
        return
    # Loading the config imported numpy, so this process can no longer cap its CPU kernels:
    # the cell runs as `benchlib run` in a fresh process (the same bytes as the workflow's).
    command = [
        sys.executable,
        "-m",
        "benchlib.commands.cli",
        *(["-q"] if args.quiet else []),
        "run",
    ]
    command += ["--spec", spec.to_json(), "--store", str(store)]
    command += ["--split", str(split), "--out", str(out / "metrics.json")]
    command += ["--timing", str(out / "timing.json"), "--checkpoints", str(checkpoints)]
    command += ["--threads", str(args.threads)]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, command)


def _run_spec(
    spec: Any,
    store: Path,
    split: Path,
    out: Path,
    timing: Path | None,
    checkpoints: Path,
    threads: int | None,
    stop_after: int | None,
) -> None:
    """Run one resolved cell: its CPU kernels are set before torch loads. With
    ``BENCHLIB_SHARED_CELLS`` set, a cell published there is copied instead of trained, and a
    cell trained here is published (``benchlib.fl.shared_cells``)."""
    from benchlib.primitives import cpu_kernels

    cpu_kernels.apply(spec.training.cpu_kernels)
    from benchlib.fl import shared_cells
    from benchlib.fl.engine import run_cell

    set_threads(threads)
    if stop_after is not None and stop_after < 1:
        raise BenchlibError(f"--stop-after must be at least 1, got {stop_after}")
    for path in (out, timing) if timing else (out,):
        check_output_file(path)
    check_output_dir(checkpoints)
    folder = shared_cells.shared_folder()
    if folder is None or stop_after is not None:
        run_cell(spec, store, split, out, checkpoints, timing, stop_after=stop_after)
        return
    shared_cells.train_or_reuse(
        folder,
        (spec, store, split),
        (out, timing, checkpoints),
        lambda: run_cell(spec, store, split, out, checkpoints, timing),
    )


def cmd_verify_store(args: argparse.Namespace) -> None:
    from benchlib.data.store import load_store

    data = load_store(args.store, verify="full")
    print(
        f"{args.store}: every file matches its manifest and the store is valid "
        f"({len(data.index)} samples, {data.num_classes} classes)"
    )


def cmd_collect(args: argparse.Namespace) -> None:
    from benchlib.report.collect import write_collected

    check_output_file(Path(args.out))
    frame = write_collected([Path(p) for p in args.metrics], Path(args.out), args.experiment)
    LOG.info(
        "collected %d client results from %d cells -> %s", len(frame), len(args.metrics), args.out
    )


def cmd_report(args: argparse.Namespace) -> None:
    from benchlib.grid.spec import parse_spec
    from benchlib.report.base import get_kind

    kind = get_kind(args.kind)
    spec = parse_spec(args.spec)
    outputs = [Path(p) for p in args.out]
    for path in outputs:
        check_output_file(path)
    import pandas as pd

    try:
        kind.render(spec, [Path(p) for p in args.collected], outputs)
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise BenchlibError(
            f"an input of report {args.kind} ({' '.join(args.collected)}) is not a readable CSV "
            f"({type(exc).__name__}); delete it and run its collect step again"
        ) from exc
    LOG.info("wrote %s", " and ".join(args.out))


def cmd_digest(args: argparse.Namespace) -> None:
    from benchlib.facts.digest import read_run, write_digest

    out = Path(args.out)
    check_output_file(out)
    run = read_run([Path(p) for p in args.results])
    write_digest(run, out, args.description)
    print(f"{out}: digest of {len(run.digests)} cells")


def cmd_verify(args: argparse.Namespace) -> None:
    from benchlib.facts.digest import compare, read_digest, read_run
    from benchlib.primitives.home import resolve_path

    digest = resolve_path(args.digest, "--digest")  # the user's folder first, then benchlib's
    comparison = compare(read_run([Path(p) for p in args.results]), read_digest(digest))
    print(comparison.summary_line())
    for line in comparison.details():
        print(line)
    if not comparison.all_match:
        sys.exit(1)


def cmd_claims(args: argparse.Namespace) -> None:
    from benchlib.report.claim_outputs import plain_table

    print(plain_table(Path(args.csv)))


def cmd_check_method(args: argparse.Namespace) -> None:
    from benchlib.commands.method_check import check_method

    check_method(args.name)


def cmd_check_config(args: argparse.Namespace) -> None:
    from benchlib.configuration.config import load_config
    from benchlib.configuration.model_size import check_model_sizes
    from benchlib.methods.base import build_method

    config = load_config(args.config)
    for entry in config.methods.values():  # the full check: build every method
        build_method(entry.method, entry.params)
    for exp in config.experiments.values():  # and with the parameters its readings set
        for method_id, params in exp["method_params"].items():
            build_method(config.methods[method_id].method, params)
    # reading variants share the cells of the methods a reading does not concern
    cells = len({cell for e in config.experiments for cell in config.cells(e)})
    check_model_sizes(config.datasets)  # and count every model's parameters
    print(f"{args.config}: valid; {len(config.experiments)} experiments, {cells} cells")
    for method_id, reason in sorted(config.skipped_methods.items()):
        print(f"  not implemented, left out: {method_id} ({reason})")


def cmd_params(args: argparse.Namespace) -> None:
    from benchlib.commands.reference import parameter_reference
    from benchlib.primitives.io import write_text_atomic

    text = parameter_reference()
    if args.out:
        write_text_atomic(Path(args.out), text)
    else:
        print(text, end="")


def cmd_targets(args: argparse.Namespace) -> None:
    from benchlib.configuration.config import Config
    from benchlib.configuration.targets import all_targets
    from benchlib.grid.paper_configs import load_raw_config

    config = Config(load_raw_config(args.config))
    if args.specs:
        for report in config.reports.values():
            spec = json.dumps(report.spec, sort_keys=True)
            print(f"{' '.join(report.targets)}\t{report.kind}\t{' '.join(report.inputs)}\t{spec}")
        return
    for target in all_targets(config):
        print(target)


def cmd_selections(args: argparse.Namespace) -> None:
    from benchlib.report.selections import selection_shares

    for path in args.metrics:
        try:
            metrics = loads_json(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise BenchlibError(
                f"cannot read metrics file {path} ({exc}); run its cell first"
            ) from exc
        try:
            shares = selection_shares(metrics, from_round=args.from_round)
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise BenchlibError(
                f"{path} holds no peer selections of a P2P cell ({type(exc).__name__}: {exc}); "
                "pass the metrics.json of a P2P method's cell"
            ) from exc
        print(
            f"{path}: rounds {args.from_round}+ ({shares['rounds']}): benign clients selected "
            f"{shares['malicious_selected']}/{shares['malicious_possible']} malfunctioning "
            f"({100 * shares['malicious_share']:.1f}%) and {shares['benign_selected']}/"
            f"{shares['benign_possible']} benign ({100 * shares['benign_share']:.1f}%)"
            " possible peers"
        )


# ------------------------------------------------------------------------------ parser
class _PrintVersion(argparse.Action):
    """``--version``: the version and git commit (git runs only when it is asked for)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from benchlib.facts.provenance import version_line

        print(version_line())
        parser.exit()


# Steps whose kernels are chosen elsewhere: a cell by its training.cpu_kernels, the benchmarks by
# the caller's environment (they measure speed). Every other step computes with portable kernels.
# These set their own CPU kernels (every cmd_bench_* too); the fork-server wrapper sets none,
# so that the environment it passes to its command is the user's.
_OWN_KERNELS = ("cmd_run", "cmd_run_cell", "cmd_forkserver")


# One example command line per subcommand, shown at the end of its --help (the Snakemake rules
# run the spec-taking steps; `benchlib targets --specs` prints the specs they pass).
EXAMPLES = {
    "claims": "benchlib claims reports/mnist5k_claims.csv",
    "prepare": 'benchlib prepare --spec \'{"dataset": "mnist5k", "source": "mnist5k", '
    '"params": {}}\' --out results/data/mnist5k',
    "download": "benchlib download --spec @dataset.json "
    "--out results/downloads/femnist/by_class.zip",
    "fetch-weights": "benchlib fetch-weights --url https://download.pytorch.org/models/"
    "densenet121-a639ec97.pth --out results/weights/densenet121-a639ec97.pth",
    "split": "benchlib split --spec @dataset.json --store results/data/mnist5k "
    "--out results/splits/mnist5k.csv",
    "run": "benchlib run --spec @cell.json --store results/data/mnist5k "
    "--split results/splits/mnist5k.csv --out results/runs/x/metrics.json "
    "--checkpoints results/checkpoints/x --threads 1",
    "verify-store": "benchlib verify-store results/data/mnist5k",
    "collect": "benchlib collect --out results/collected/mnist5k/sfa.csv "
    "results/runs/mnist5k/*/*/k*/seed0/metrics.json",
    "report": "benchlib report --kind robustness_table --spec @spec.json "
    "--collected results/collected/mnist5k/sfa.csv --out tables/mnist5k_sfa.tex",
    "digest": "benchlib digest results/runs/mnist5k --out my_digest.json "
    "--description 'make demo on our cluster'",
    "verify": "benchlib verify results/runs/mnist5k   (the demo against its reference digest)",
    "check-config": "benchlib check-config config/demo.yaml",
    "check-method": "benchlib check-method fedavgm   (a plugin's method, where it is installed)",
    "targets": "benchlib targets config/demo.yaml   (or: benchlib targets --specs)",
    "selections": "benchlib selections --from-round 3 results/runs/mnist5k/sfa/lightyear/k3/"
    "seed0/metrics.json",
    "status": "benchlib status --config config/demo.yaml tables/mnist5k_sfa.tex",
    "plugins": "benchlib plugins --plugins-only   (what installed plugin packages add)",
    "forkserver": "benchlib forkserver -- snakemake --configfile=config/demo.yaml --cores 2",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchlib", description=__doc__.splitlines()[0])
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    parser.add_argument(
        "--version", nargs=0, action=_PrintVersion, help="print the version and git commit"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], None], help_text: str):
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name in EXAMPLES:
            p.epilog = f"example: {EXAMPLES[name]}"
        p.set_defaults(func=func)
        return p

    p = add("prepare", cmd_prepare, "prepare a dataset into the standard store")
    p.add_argument("--spec", required=True, help="dataset spec JSON (or @file)")
    p.add_argument("--out", required=True, help="store directory to create")

    p = add("download", cmd_download, "fetch one raw file of a dataset (pinned sha256)")
    p.add_argument("--spec", required=True, help="dataset spec JSON (or @file)")
    p.add_argument("--out", required=True, help="file to create; its name picks the remote file")

    p = add("fetch-weights", cmd_fetch_weights, "fetch pretrained model weights (hash-checked)")
    p.add_argument("--url", required=True, help="torchvision-style URL (name-<sha256 prefix>.pth)")
    p.add_argument("--out", required=True, help="file to create")

    p = add("split", cmd_split, "partition a prepared dataset into clients and subsets")
    p.add_argument("--spec", required=True, help="dataset spec JSON (or @file)")
    p.add_argument("--store", required=True, help="the prepared store (results/data/<dataset>)")
    p.add_argument("--out", required=True, help="split CSV to write")

    p = add("run", cmd_run, "run (or resume) one federated cell and write metrics.json")
    p.add_argument("--spec", required=True, help="resolved cell spec JSON (or @file)")
    p.add_argument("--store", required=True, help="the prepared store (results/data/<dataset>)")
    p.add_argument("--split", required=True, help="the split CSV (results/splits/<dataset>.csv)")
    p.add_argument("--out", required=True, help="metrics.json to write")
    p.add_argument("--timing", help="timing.json to write (wall time, host, device)")
    p.add_argument("--checkpoints", required=True, help="round checkpoint directory")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--stop-after", type=int, default=None, help=argparse.SUPPRESS)

    p = add(
        "forkserver",
        cmd_forkserver,
        "run a command (e.g. snakemake) with a warm fork server: each `benchlib run` it starts "
        "forks from a process that has already imported torch and the engine",
    )
    p.add_argument(
        "--kernels",
        default="portable",
        choices=("portable", "native"),
        help="the CPU kernels the server loads torch with; cells that need the other setting "
        "run in their own process (default portable, as training.cpu_kernels)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="the threads of the cells it serves (the run_cell rule's `threads`, default 1); "
        "cells run with another count run in their own process",
    )
    p.add_argument(
        "wrapped", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command to run"
    )

    p = add(
        "run-cell",
        cmd_run_cell,
        "run (or resume) one cell of a config by its id, for debugging: no spec JSON needed; "
        "its store and split must be prepared",
    )
    p.epilog = (
        "example: benchlib run-cell config/demo.yaml mnist5k/sfa/lightyear/k3/seed0 "
        "(writes results/runs/mnist5k/sfa/lightyear/k3/seed0/metrics.json)"
    )
    p.add_argument("config", help="config file, e.g. config/demo.yaml")
    p.add_argument("cell", help="experiment/malfunction/method/kK/seedS")
    p.add_argument(
        "--out-dir",
        help="folder for metrics.json, timing.json and checkpoints (default: the "
        "workflow's results/runs/<cell>, checkpoints under results/checkpoints/<cell>)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")

    p = add(
        "verify-store",
        cmd_verify_store,
        "re-hash a prepared store against its manifest and check that it is valid",
    )
    p.add_argument("store", help="store directory (results/data/<dataset>)")

    p = add("collect", cmd_collect, "gather metrics.json files into a tidy CSV")
    p.add_argument("--out", required=True, help="tidy CSV to write (one row per cell x client)")
    p.add_argument(
        "--experiment",
        default=None,
        help="list every row under this experiment (a reading variant's shared cells)",
    )
    p.add_argument("metrics", nargs="+", help="metrics.json files of the cells")

    p = add("report", cmd_report, "render one table or figure (a report kind) from its spec")
    p.add_argument("--kind", required=True, help="report kind, e.g. robustness_table")
    p.add_argument("--spec", required=True, help="the report's spec JSON (or @file)")
    p.add_argument("--collected", nargs="*", default=[], help="collected CSVs the kind reads")
    p.add_argument("--out", nargs="+", required=True, help="file(s) to write: .tex, or .pdf .png")

    p = add("digest", cmd_digest, "write the digest of a finished run's numbers (to publish)")
    p.add_argument("results", nargs="+", help="results folder(s) or metrics.json files")
    p.add_argument("--out", required=True, help="digest JSON to write")
    p.add_argument("--description", default="", help="what the run was (config, scale)")

    p = add(
        "verify",
        cmd_verify,
        "check a finished run's numbers against a digest: which cells match, which differ, and "
        "which provenance fields (torch, CPU kernels...) differ; exit 1 unless all match",
    )
    p.add_argument("results", nargs="+", help="results folder(s) or metrics.json files")
    p.add_argument(
        "--digest",
        default="config/reference/demo_digest.json",
        help="reference digest (default: the demo's, config/reference/demo_digest.json)",
    )

    p = add(
        "claims",
        cmd_claims,
        "print the verdict table of a claims report (its CSV): one line per claim and reading",
    )
    p.add_argument("csv", help="the report's CSV, e.g. reports/mnist5k_claims.csv")

    p = add(
        "check-method",
        cmd_check_method,
        "train a method's tiny cell in each of its variants and check that a stopped run "
        "resumes to the same bytes (the checks every built-in method passes)",
    )
    p.add_argument("name", help="a registered method, built-in or a plugin's, e.g. fedavgm")

    p = add("check-config", cmd_check_config, "validate a config file")
    p.add_argument("config", help="config file, e.g. config/demo.yaml")

    p = add(
        "params",
        cmd_params,
        "print the parameter reference: every parameter of the training settings, methods, "
        "models, dataset sources, partitioners, malfunctions, losses, report kinds and axes",
    )
    p.epilog = "example: benchlib params --out docs/guide/parameters.md   (make docs writes it)"
    p.add_argument("--out", help="write the Markdown here (default: standard output)")

    p = add("targets", cmd_targets, "list the table and figure targets of a config")
    p.add_argument(
        "config", nargs="?", help="config file or folder (default config/paper: the paper grids)"
    )
    p.add_argument(
        "--specs",
        action="store_true",
        help="per report: targets, kind, inputs and spec JSON (tab-separated)",
    )

    p = add("selections", cmd_selections, "summarise P2P peer selections of metrics.json files")
    p.add_argument("--from-round", type=int, default=1, help="first round counted (default 1)")
    p.add_argument("metrics", nargs="+", help="metrics.json files of P2P cells")

    from benchlib.commands.bench import commands as bench  # torch-free until a benchmark runs

    bench.register(add)

    from benchlib.commands import (
        status,  # torch-free; its module holds the command and its arguments
    )

    status.add_arguments(add("status", status.cmd_status, status.HELP))

    from benchlib.commands import components  # torch-free: `benchlib plugins`

    components.add_arguments(add("plugins", components.cmd_plugins, components.HELP))

    from benchlib.commands import html_report  # torch-free: html-report, table-html, report-status

    html_report.register(add)

    from benchlib.commands import docs_gen  # torch-free: the generated pages of docs/

    docs_gen.register(add)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    try:
        own = args.func.__name__ in _OWN_KERNELS or args.func.__name__.startswith("cmd_bench")
        if not own:
            from benchlib.primitives import cpu_kernels

            cpu_kernels.apply("portable")
        if args.func is cmd_run and (status := run_forked(args, argv)) is not None:
            return status
        args.func(args)
    except BenchlibError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        error = missing_extra(exc)
        if error is None:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as exc:  # full disk, read-only folder, no permission: for every subcommand
        fault = os_fault(exc)
        if fault is None:
            raise
        print(f"error: {fault}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
