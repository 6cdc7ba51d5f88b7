"""``benchlib bench <benchmark>``: one subcommand per benchmark, each with its own arguments.

Torch is imported only when a benchmark runs (``benchlib --help`` stays fast); every benchmark
sets its own CPU kernels, so the CLI leaves them alone for these commands.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from benchlib.commands.cli_args import check_output_dir, set_threads
from benchlib.primitives.errors import BenchlibError

Add = Callable[..., argparse.ArgumentParser]
HELP = (
    "benchmarks, one per subcommand: overhead (engine vs bare loop), flower (engine vs Flower), "
    "stream (streamed vs resident data), scale (paper-scale cells on a device), kernels (native "
    "vs portable CPU kernels), clients (round cost at growing federation sizes); each prints "
    "ratios or times measured in one process"
)
EXAMPLES = {
    "overhead": "benchlib bench overhead --rounds 3 --clients 8",
    "flower": "benchlib bench flower --rounds 6   (needs: pip install 'benchlib[bench]')",
    "stream": "benchlib bench stream --gb 8 --device cuda",
    "scale": "benchlib bench scale --device cuda --pack 1 2 4",
    "kernels": "benchlib bench kernels config/demo.yaml --cell mnist5k/sfa/fedavg/k1/seed0",
    "clients": "benchlib bench clients --clients 8 32 128",
}


def cmd_bench_overhead(args: argparse.Namespace) -> None:
    from benchlib.commands.bench.overhead import run_benchmark

    set_threads(args.threads)
    run_benchmark(
        rounds=args.rounds, clients=args.clients, samples=args.samples, repeats=args.repeats
    )


def cmd_bench_flower(args: argparse.Namespace) -> None:
    from benchlib.commands.bench.flower import run_flower_comparison

    set_threads(args.threads)
    run_flower_comparison(rounds=args.rounds, clients=args.clients, samples=args.samples)


def cmd_bench_stream(args: argparse.Namespace) -> None:
    from benchlib.commands.bench.stream import run_stream_benchmark
    from benchlib.fl.device import select_device

    set_threads(args.threads)
    if args.dir:
        check_output_dir(Path(args.dir))
    run_stream_benchmark(
        size_gib=args.gb,
        steps=args.steps,
        batch_size=args.batch_size,
        store_dir=Path(args.dir) if args.dir else None,
        device=select_device(args.device),
    )


def cmd_bench_scale(args: argparse.Namespace) -> None:
    from benchlib.commands.bench.scale import WORKLOADS, run_scale_benchmark
    from benchlib.fl.device import select_device

    set_threads(args.threads)
    unknown = sorted(set(args.workloads or ()) - set(WORKLOADS))
    if unknown:
        raise BenchlibError(f"unknown workloads {unknown}; choose from {sorted(WORKLOADS)}")
    run_scale_benchmark(
        select_device(args.device),
        workloads=tuple(args.workloads or WORKLOADS),
        train=args.samples,
        repeats=args.repeats,
        packing=tuple(args.pack) if args.pack is not None else None,
        precisions=tuple(args.precisions) if args.precisions is not None else None,
    )


def cmd_bench_kernels(args: argparse.Namespace) -> None:
    from benchlib.commands.bench.kernels import run_kernel_benchmark
    from benchlib.grid.spec import Cell

    config = Path(args.config)
    if args.cell:
        cell = Cell.parse(args.cell)
    else:
        from benchlib.configuration.config import load_config

        loaded = load_config(config)
        cell = loaded.cells(next(iter(loaded.experiments)))[0]
    run_kernel_benchmark(config, cell, repeats=args.repeats, threads=args.threads or 1)


def cmd_bench_clients(args: argparse.Namespace) -> None:
    if min(args.clients) < 2 or args.train < 1 or args.eval < 1:
        raise BenchlibError("--clients needs at least 2 clients, --train and --eval at least 1 row")
    from benchlib.commands.bench.clients import run_client_scaling

    set_threads(args.threads or 1)
    run_client_scaling(tuple(args.clients), train=args.train, evaluate=args.eval)


def _threads(p: argparse.ArgumentParser, default: str = "torch's") -> None:
    p.add_argument("--threads", type=int, default=None, help=f"torch threads (default {default})")


def _workload(p: argparse.ArgumentParser, rounds: int) -> None:
    p.add_argument(
        "--rounds", type=int, default=rounds, help=f"FL rounds per timed run (default {rounds})"
    )
    p.add_argument("--clients", type=int, default=8, help="clients per cell (default 8)")
    p.add_argument(
        "--samples", type=int, default=400, help="training samples per client (default 400)"
    )
    _threads(p)


def register(add: Add) -> None:
    """Add ``benchlib bench`` and its subcommands (``add(name, func, help)`` of cli.py)."""
    bench = add("bench", None, HELP)
    bench.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES.values())
    bench.formatter_class = argparse.RawDescriptionHelpFormatter
    inner = bench.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")

    def sub(name: str, func: Callable[[argparse.Namespace], None], text: str):
        p = inner.add_parser(name, help=text, description=text)
        p.epilog = f"example: {EXAMPLES[name]}"
        p.set_defaults(func=func)
        return p

    p = sub(
        "overhead",
        cmd_bench_overhead,
        "engine rounds of fedavg (star) and lightyear (P2P) against the bare training loop on "
        "mnist5k in the same process; prints engine / bare per phase",
    )
    _workload(p, rounds=3)
    p.add_argument("--repeats", type=int, default=3, help="timed runs per variant (default 3)")

    p = sub(
        "flower",
        cmd_bench_flower,
        "a FedAvg cell in the engine and in Flower's simulation engine on the same workload "
        "(the bench extra: pip install 'benchlib[bench]')",
    )
    _workload(p, rounds=6)

    p = sub(
        "stream",
        cmd_bench_stream,
        "training streamed from a generated large store against resident training: samples/s, "
        "peak memory, bytes read (and GPU busy on a GPU)",
    )
    p.add_argument("--gb", type=float, default=8.0, help="size of the generated store (GiB)")
    p.add_argument("--steps", type=int, default=400, help="training steps per mode (default 400)")
    p.add_argument("--batch-size", type=int, default=32, help="batch size (default 32)")
    p.add_argument(
        "--dir",
        default=None,
        help="folder for the generated store, kept and reused (default: a temporary folder)",
    )
    p.add_argument("--device", default="cpu", help="device to train on (default cpu)")
    _threads(p)

    p = sub(
        "scale",
        cmd_bench_scale,
        "paper-scale cells on a device: bare loop vs engine sequential vs engine batched, every "
        "method, several cells at once, and the projected device-hours of each paper grid",
    )
    p.add_argument("--device", required=True, help="the device to measure (cpu, cuda)")
    p.add_argument(
        "--workloads",
        nargs="+",
        default=None,
        help="which workloads (femnist_cnn, densenet121_camelyon17; default both)",
    )
    p.add_argument(
        "--samples",
        type=int,
        default=None,
        help="training samples per client (default: the paper's on a GPU, fewer on CPU)",
    )
    p.add_argument("--repeats", type=int, default=3, help="timed runs per variant (default 3)")
    p.add_argument(
        "--pack",
        nargs="*",
        type=int,
        default=None,
        help="also time this many cells at once, e.g. --pack 1 2 4 (default 1 2 4 on a GPU, "
        "none on CPU; --pack with no number: none)",
    )
    p.add_argument(
        "--precisions",
        nargs="*",
        choices=("fp32", "tf32", "bf16"),
        default=None,
        help="reduced training.precision values also timed on the engine's fastest path "
        "(default tf32 bf16 on a GPU, none on CPU; with no value: none)",
    )
    _threads(p)

    p = sub(
        "kernels",
        cmd_bench_kernels,
        "one cell with native and with portable CPU kernels (alternating fresh processes) and "
        "the ratio; its store and split must be prepared",
    )
    p.add_argument("config", help="config file, e.g. config/demo.yaml")
    p.add_argument("--cell", help="experiment/malfunction/method/kK/seedS (default: the first)")
    p.add_argument("--repeats", type=int, default=3, help="runs per setting (default 3)")
    _threads(p, default="1")

    p = sub(
        "clients",
        cmd_bench_clients,
        "one FedAvg and one LIGHTYEAR round on CPU at each federation size, the same rows per "
        "client at every size: time per client and per peer evaluation (flat = linear / n^2)",
    )
    p.add_argument(
        "--clients", nargs="+", type=int, default=[8, 32, 128], help="sizes (default 8 32 128)"
    )
    p.add_argument("--train", type=int, default=16, help="training rows per client (default 16)")
    p.add_argument(
        "--eval", type=int, default=10, help="validation (and test) rows per client (default 10)"
    )
    _threads(p, default="1")
