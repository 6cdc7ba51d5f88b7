"""Bad input matrix: every case is a distinct failure that must end with exactly one line
``error: ...`` on stderr naming the problem, a non-zero exit, no traceback and no new output files.

Config problems go through ``benchlib check-config`` (and one through ``snakemake -n``), data and
run problems through the ``benchlib`` steps the workflow calls. Separately: NaN/Inf models produced
by a malfunction are survived and recorded.
"""

from __future__ import annotations

import copy
import functools
import gzip
import hashlib
import http.server
import io
import json
import re
import shutil
import subprocess
import tarfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import REPO, benchlib_exe, ops_snakemake_argv, tool_env
from helpers.store_edits import edit_manifest, reseal

SMOKE = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
ROBUSTNESS_SPEC = {
    "experiment": "smoke", "malfunction": "sfa", "title": "t", "methods": [["fedavg", "F"]],
    "ks": [0, 1], "num_clients": 4, "k": [0, 1], "metric": "accuracy", "percent": None,
    "decimals": None, "metric_label": None, "ci": False, "test": "paired_t", "confidence": 0.95,
    "resamples": 9999, "note": "",
}  # fmt: skip


@dataclass
class Ctx:
    """Inputs of one case (under ``inp``) and the area it may write to (``out``)."""

    tmp: Path
    store: Path
    split: Path
    spec: dict[str, Any]
    url: str

    @property
    def inp(self) -> Path:
        return self.tmp / "in"

    @property
    def out(self) -> Path:
        return self.tmp / "out"

    # ------------------------------------------------------------------- command builders
    def check_config(self, edit: Callable[[dict], None]) -> list[str]:
        config = copy.deepcopy(SMOKE)
        edit(config)
        path = self.inp / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        return [benchlib_exe(), "check-config", str(path)]

    def run(self, **changes: Any) -> list[str]:
        args = {
            "spec": json.dumps(self.spec),
            "store": str(self.store),
            "split": str(self.split),
            "out": str(self.out / "metrics.json"),
            "timing": str(self.out / "timing.json"),
            "checkpoints": str(self.out / "checkpoints"),
            "threads": "1",
            **{k: str(v) for k, v in changes.items()},
        }
        return [benchlib_exe(), "run", *[x for k, v in args.items() for x in (f"--{k}", v)]]

    def spec_with(self, **changes: Any) -> str:
        return json.dumps({**self.spec, **changes})

    def split_with(self, edit: Callable[[pd.DataFrame], pd.DataFrame]) -> Path:
        table = pd.read_csv(self.split, dtype=str, keep_default_na=False)
        path = self.inp / "split.csv"
        edit(table).to_csv(path, index=False)
        return path

    def prepare_tff(self, archive: bytes) -> list[str]:
        """`benchlib prepare` of femnist_tff from a cached archive whose sha256 is pinned."""
        downloads = self.inp / "downloads"
        downloads.mkdir()
        (downloads / "fed_emnist.tar.bz2").write_bytes(archive)
        params = {
            "download_dir": str(downloads),
            "sha256": hashlib.sha256(archive).hexdigest(),
            "retries": 0,
        }
        spec = {"dataset": "femnist", "source": "femnist_tff", "params": params}
        return [
            benchlib_exe(),
            "prepare",
            "--spec",
            json.dumps(spec),
            "--out",
            str(self.out / "st"),
        ]

    def download(self, path: str, sha256: str) -> list[str]:
        params = {"url": f"{self.url}/{path}", "sha256": sha256, "retries": 0, "timeout": 20}
        spec = {"dataset": "femnist", "source": "femnist_tff", "params": params}
        out = self.out / "downloads" / "fed_emnist.tar.bz2"
        return [benchlib_exe(), "download", "--spec", json.dumps(spec), "--out", str(out)]


Builder = Callable[[Ctx], list[str]]
CASES: dict[str, tuple[str, Builder]] = {}


def case(name: str, phrase: str) -> Callable[[Builder], Builder]:
    """Register a case: its id, the phrase its error line must contain, its command builder."""

    def register(build: Builder) -> Builder:
        assert name not in CASES
        CASES[name] = (phrase, build)
        return build

    return register


def dataset(config: dict) -> dict:
    return config["datasets"]["mnist5k"]


def experiment(config: dict) -> dict:
    return config["experiments"]["smoke"]


# ------------------------------------------------------------------------------ config
@case("unknown_dataset_source", "unknown dataset source 'mnist6k'")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c).update(source="mnist6k"))


@case("unknown_malfunction", "unknown malfunction 'flip'")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: experiment(c).update(malfunctions=["sfa", "flip"]))


@case("unknown_partitioner", "unknown partitioner 'quantity'")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c).update(partition={"name": "quantity"}))


@case("unknown_model", "unknown model 'vgg16'")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c)["model"].update(name="vgg16"))


@case("unknown_optimizer", "training.optimizer: 'adamw' is not one of")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c)["training"].update(optimizer="adamw"))


@case("unknown_precision", "training.precision: 'fp16' is not one of")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c)["training"].update(precision="fp16"))


@case("unknown_precision_in_a_cell_spec", "--spec training: precision: 'fp16' is not one of")
def _(ctx: Ctx) -> list[str]:
    training = {**ctx.spec["training"], "precision": "fp16"}
    return ctx.run(spec=ctx.spec_with(training=training))


@case("unknown_cpu_kernels", "training.cpu_kernels: 'avx512' is not one of")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c)["training"].update(cpu_kernels="avx512"))


@case("unknown_cpu_kernels_in_a_cell_spec", "--spec training: cpu_kernels: 'fast' is not one of")
def _(ctx: Ctx) -> list[str]:
    training = {**ctx.spec["training"], "cpu_kernels": "fast"}
    return ctx.run(spec=ctx.spec_with(training=training))


@case("experiment_names_undefined_method", "method 'fedsgd' is not defined under methods")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: experiment(c)["methods"].append("fedsgd"))


@case("wrong_type_clients", "clients: 'four' is not of type 'integer'")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c).update(clients="four"))


@case("negative_clients", "clients: -3 is less than the minimum of 2")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c).update(clients=-3))


@case("tau_above_one", "(method 'lightyear') params: tau: 1.5 is greater than the maximum of 1")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: c["methods"]["lightyear"]["params"].update(tau=1.5))


@case("k_not_below_clients", "k=4 malfunctioning clients must be in 0..3")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: experiment(c).update(k=[0, 4]))


@case("zero_rounds", "training.rounds: 0 is less than the minimum of 1")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c)["training"].update(rounds=0))


@case(
    "absurd_rounds",
    "training.rounds: 1000000000000 is greater than the maximum of 100000; set rounds <= 100000",
)
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c)["training"].update(rounds=10**12))


@case("absurd_local_epochs", "local_epochs: 1000000 is greater than the maximum of 1000; set")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c)["training"].update(local_epochs=10**6))


@case("absurd_seed", "seeds.1: 1000000000000 is greater than the maximum of 2147483647; set")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: experiment(c).update(seeds=[0, 10**12]))


@case("dirichlet_alpha_not_positive", "alpha: 0 is less than or equal to the minimum of 0")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(
        lambda c: dataset(c).update(partition={"name": "dirichlet", "alpha": 0})
    )


@case("val_plus_test_not_below_one", "leaves no training data")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c)["split"].update(val=0.5, test=0.5))


@case("nan_in_config", "training.lr: NaN/Inf is not allowed")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c)["training"].update(lr=float("nan")))


@case("malformed_yaml", "is not valid YAML at line")
def _(ctx: Ctx) -> list[str]:
    (ctx.inp / "config.yaml").write_text("datasets: {mnist5k: [1,\nmethods: {}\n")
    return [benchlib_exe(), "check-config", str(ctx.inp / "config.yaml")]


@case("missing_config_file", "not found; pass an existing --configfile")
def _(ctx: Ctx) -> list[str]:
    return [benchlib_exe(), "check-config", str(ctx.inp / "nope.yaml")]


@case("snakemake_undefined_dataset", "experiment smoke: dataset 'mnist6k' is not defined")
def _(ctx: Ctx) -> list[str]:
    config = copy.deepcopy(SMOKE)
    config["experiments"]["smoke"]["dataset"] = "mnist6k"
    path = ctx.inp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return ops_snakemake_argv(ctx.out, path, "-n")


SMOKE_TEXT = (REPO / "config" / "smoke.yaml").read_text()
LR_LINE = "      lr: 0.002\n"
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(9)
)  # 10^10 leaves in 12 lines


def _config_text(ctx: Ctx, data: str | bytes) -> Path:
    path = ctx.inp / "config.yaml"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@case("config_duplicate_key", "the key 'lr' appears twice, at lines 15 and 16; keep one")
def _(ctx: Ctx) -> list[str]:
    text = SMOKE_TEXT.replace(LR_LINE, LR_LINE + "      lr: 5.0\n")
    return [benchlib_exe(), "check-config", str(_config_text(ctx, text))]


@case("config_duplicate_method_id", "the key 'fedavg' appears twice")
def _(ctx: Ctx) -> list[str]:
    text = SMOKE_TEXT.replace("  fedavg: {label: FedAvg}\n", "  fedavg: {label: FedAvg}\n" * 2)
    return [benchlib_exe(), "check-config", str(_config_text(ctx, text))]


@case("snakemake_duplicate_key", "the key 'lr' appears twice, at lines 15 and 16")
def _(ctx: Ctx) -> list[str]:
    text = SMOKE_TEXT.replace(LR_LINE, LR_LINE + "      lr: 5.0\n")
    return ops_snakemake_argv(ctx.out, _config_text(ctx, text), "-n")


@case("config_not_utf8", "is not UTF-8 text (line 1); save it as UTF-8")
def _(ctx: Ctx) -> list[str]:
    data = b"description: smoke \xe9t\xe9\n" + SMOKE_TEXT.encode()
    return [benchlib_exe(), "check-config", str(_config_text(ctx, data))]


@case("config_alias_bomb", "expands to more than 1,000,000 values through its YAML aliases")
def _(ctx: Ctx) -> list[str]:
    return [benchlib_exe(), "check-config", str(_config_text(ctx, ALIAS_BOMB))]


@case("snakemake_alias_bomb", "expands to more than 1,000,000 values through its YAML aliases")
def _(ctx: Ctx) -> list[str]:
    return ops_snakemake_argv(ctx.out, _config_text(ctx, SMOKE_TEXT + ALIAS_BOMB), "-n")


def _long_experiment_id(config: dict) -> None:
    config["experiments"]["e" * 300] = config["experiments"].pop("smoke")


@case("config_long_experiment_id", "has 300 characters; ids become file names, so use at most 64")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(_long_experiment_id)


@case("snakemake_long_dataset_id", "has 300 characters; ids become file names, so use at most 64")
def _(ctx: Ctx) -> list[str]:
    def edit(config: dict) -> None:
        config["datasets"]["d" * 300] = config["datasets"].pop("mnist5k")
        config["experiments"]["smoke"]["dataset"] = "d" * 300

    return _dry_run_with(ctx, edit)


@case("config_absurd_model", "has 403,000,000,922 parameters for inputs (1, 28, 28)")
def _(ctx: Ctx) -> list[str]:
    return ctx.check_config(lambda c: dataset(c)["model"]["params"].update(hidden=10**9))


def _dry_run_with(ctx: Ctx, edit: Callable[[dict], None]) -> list[str]:
    config = copy.deepcopy(SMOKE)
    edit(config)
    path = ctx.inp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return ops_snakemake_argv(ctx.out, path, "-n")


def _dataset(config: dict) -> dict:
    return config["datasets"]["mnist5k"]


# A typo in any params block stops the dry run, naming the key and (when close) the intended one.
PARAMS_TYPOS: dict[str, tuple[str, Callable[[dict], None]]] = {
    "method_name": (
        "methods.fedavg: unknown method 'fedavgg' (did you mean 'fedavg'?)",
        lambda c: c["methods"]["fedavg"].update(method="fedavgg"),
    ),
    "method": (
        "methods.fedavg (method 'fedavg') params: unknown parameter 'weighing' (did you mean "
        "'weighting'?)",
        lambda c: c["methods"]["fedavg"].update(params={"weighing": "samples"}),
    ),
    "method_type": (
        "params: f: 'two' is not of type 'integer', 'null'",
        lambda c: c["methods"].update(krum={"params": {"f": "two"}}),
    ),
    "model": (
        "model 'femnist_cnn' params: unknown parameter 'convv1' (did you mean 'conv1'?)",
        lambda c: _dataset(c)["model"]["params"].update(convv1=8),
    ),
    "model_type": (
        "model 'femnist_cnn' params: conv1: -3 is less than the minimum of 1",
        lambda c: _dataset(c)["model"]["params"].update(conv1=-3),
    ),
    "source": (
        "source 'mnist5k' params: unknown parameter 'sha265' (did you mean 'sha256'?)",
        lambda c: _dataset(c).update(params={"sha265": "0" * 64}),
    ),
    "partition": (
        "partitioner 'iid' params: unknown parameter 'min_sise' (did you mean 'min_size'?)",
        lambda c: _dataset(c).update(partition={"name": "iid", "min_sise": 5}),
    ),
    "partition_required": (
        "partitioner 'writers' params: writers_per_client must be given",
        lambda c: _dataset(c).update(partition={"name": "writers"}),
    ),
    "malfunction": (
        "malfunction.ana: unknown key 'scal' (did you mean 'scale'?)",
        lambda c: _dataset(c)["malfunction"].update(ana={"scal": 50}),
    ),
    "malfunction_section": (
        "malfunction: unknown key 'placment' (did you mean 'placement'?)",
        lambda c: _dataset(c)["malfunction"].update(placment="last"),
    ),
    "loss": (
        "loss 'focal' params: unknown parameter 'gama' (did you mean 'gamma'?)",
        lambda c: _dataset(c)["training"].update(loss="focal", loss_params={"gama": 2.0}),
    ),
    "training": (
        "datasets.mnist5k.training: unknown key 'local_epoch' (did you mean 'local_epochs'?)",
        lambda c: _dataset(c)["training"].update(local_epoch=2),
    ),
    "split": (  # the typo also leaves test missing: the unknown key is named first
        "datasets.mnist5k.split: unknown key 'tset' (did you mean 'test'?); it takes: mode, seed, "
        "test, val, val_from_test, val_from_train",
        lambda c: _dataset(c).update(split={"val": 0.2, "tset": 0.2, "seed": 0}),
    ),
    "transforms": (
        "datasets.mnist5k.transforms: unknown key 'input_sise' (did you mean 'input_size'?); it "
        "takes: eval_crop, input_size, normalize, train",
        lambda c: _dataset(c).update(transforms={"input_sise": 28}),
    ),
    "corruption": (
        "datasets.mnist5k.corruption: unknown key 'severty' (did you mean 'severity'?); it takes: "
        "image_fraction, ratio, severity, subsets",
        lambda c: _dataset(c).update(corruption={"ratio": 0.3, "severty": 4}),
    ),
    "report": (
        "reports.extra (report kind robustness_table): unknown parameter 'metrik' (did you mean "
        "'metric'?)",
        lambda c: c.update(
            reports={"extra": {"kind": "robustness_table", "experiment": "smoke", "metrik": "x"}}
        ),
    ),
}
for _key, (_phrase, _edit) in PARAMS_TYPOS.items():
    CASES[f"snakemake_params_{_key}"] = (
        _phrase,
        functools.partial(_dry_run_with, edit=_edit),
    )


# -------------------------------------------------------------------------- data
@case("missing_prepared_data", "prepared data not found")
def _(ctx: Ctx) -> list[str]:
    return ctx.run(store=ctx.inp / "no_store")


@case("truncated_pixels", "bytes but its manifest records")
def _(ctx: Ctx) -> list[str]:
    store = shutil.copytree(ctx.store, ctx.inp / "store")
    with open(store / "pixels.npy", "r+b") as handle:
        handle.truncate((store / "pixels.npy").stat().st_size - 100)
    return ctx.run(store=store)


@case("tampered_pixels_verify_store", "pixels.npy does not match its manifest checksum")
def _(ctx: Ctx) -> list[str]:
    store = shutil.copytree(ctx.store, ctx.inp / "store")
    pixels = np.load(store / "pixels.npy")
    pixels[0, 0, 0] ^= 1
    np.save(store / "pixels.npy", pixels)
    return [benchlib_exe(), "verify-store", str(store)]


@case("store_header_shape_edited", "pixels.npy has rows of shape [28, 27] but the manifest")
def _(ctx: Ctx) -> list[str]:
    store = shutil.copytree(ctx.store, ctx.inp / "store")
    raw = (store / "pixels.npy").read_bytes()  # same byte size: the size check passes
    (store / "pixels.npy").write_bytes(raw.replace(b"(5000, 28, 28)", b"(5000, 28, 27)", 1))
    return ctx.run(store=store)


@case("store_labels_zeroed", "index.csv does not match its manifest checksum")
def _(ctx: Ctx) -> list[str]:
    store = shutil.copytree(ctx.store, ctx.inp / "store")
    index = pd.read_csv(store / "index.csv", dtype=str, keep_default_na=False)
    index.assign(label="0").to_csv(store / "index.csv", index=False)  # same byte size
    return ctx.run(store=store)


@case("store_num_classes_edited", "manifest.json was changed after the store was written")
def _(ctx: Ctx) -> list[str]:
    store = shutil.copytree(ctx.store, ctx.inp / "store")
    edit_manifest(store, lambda m: m.__setitem__("num_classes", 100))
    return ctx.run(store=store)


@case("store_duplicate_sample_id", "index.csv lists the sample id 'mnist5k-00003' twice")
def _(ctx: Ctx) -> list[str]:
    store = shutil.copytree(ctx.store, ctx.inp / "store")
    index = pd.read_csv(store / "index.csv", dtype=str, keep_default_na=False)
    index.loc[7, "sample_id"] = index.loc[3, "sample_id"]
    index.to_csv(store / "index.csv", index=False)
    reseal(store)
    return ctx.run(store=store)


@case("verify_store_label_range", "index.csv has the label 5, outside 0..4")
def _(ctx: Ctx) -> list[str]:
    store = shutil.copytree(ctx.store, ctx.inp / "store")
    edit_manifest(store, lambda m: m.__setitem__("num_classes", 5))
    reseal(store)
    return [benchlib_exe(), "verify-store", str(store)]


@case("nan_in_source_data", "contains NaN or Inf pixel values")
def _(ctx: Ctx) -> list[str]:
    rows = [",".join(["0"] * 784 + ["3"]) for _ in range(20)]
    rows[4] = ",".join(["0"] * 100 + ["nan"] + ["0"] * 683 + ["3"])
    source = ctx.inp / "mnist.csv.gz"
    source.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
    params = {"source_file": str(source), "sha256": hashlib.sha256(source.read_bytes()).hexdigest()}
    spec = {"dataset": "mnist5k", "source": "mnist5k", "params": params}
    return [benchlib_exe(), "prepare", "--spec", json.dumps(spec), "--out", str(ctx.out / "st")]


@case("split_duplicate_sample", "more than once (overlapping subsets)")
def _(ctx: Ctx) -> list[str]:
    return ctx.run(split=ctx.split_with(lambda t: pd.concat([t, t.iloc[[5]]])))


@case("split_unknown_sample", "samples absent from the prepared data (e.g. ghost-1)")
def _(ctx: Ctx) -> list[str]:
    def edit(table: pd.DataFrame) -> pd.DataFrame:
        table.loc[3, "sample_id"] = "ghost-1"
        return table

    return ctx.run(split=ctx.split_with(edit))


@case("split_missing_subset", "client 2 has no ['test'] samples")
def _(ctx: Ctx) -> list[str]:
    return ctx.run(split=ctx.split_with(lambda t: t[~((t.client == "2") & (t.subset == "test"))]))


@case("split_wrong_client_count", "expected 0..3; recreate it with the configured number")
def _(ctx: Ctx) -> list[str]:
    return ctx.run(split=ctx.split_with(lambda t: t[t.client != "3"]))


@case("corrupted_archive", "is not a readable tar archive")
def _(ctx: Ctx) -> list[str]:
    return ctx.prepare_tff(b"BZh91AY&SY" + bytes(range(256)) * 40)


@case("truncated_archive", "is not a readable tar archive")
def _(ctx: Ctx) -> list[str]:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:bz2") as tar:
        payload = np.random.default_rng(0).bytes(200_000)
        info = tarfile.TarInfo("fed_emnist/fed_emnist_train.h5")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    data = buffer.getvalue()
    return ctx.prepare_tff(data[: len(data) // 2])


@case("download_checksum_mismatch", "checksum mismatch for")
def _(ctx: Ctx) -> list[str]:
    return ctx.download("archive.bin", "1" * 64)


@case("download_truncated_transfer", "/truncated/archive.bin failed (")
def _(ctx: Ctx) -> list[str]:
    return ctx.download("truncated/archive.bin", hashlib.sha256(ARCHIVE).hexdigest())


# ---------------------------------------------------------------------------- run
@case("malformed_spec_json", "--spec is not valid JSON")
def _(ctx: Ctx) -> list[str]:
    return ctx.run(spec='{"seed": 0,')


@case("spec_missing_keys", "--spec lacks method_id, method")
def _(ctx: Ctx) -> list[str]:
    return ctx.run(spec=json.dumps({k: v for k, v in ctx.spec.items() if "method" not in k}))


@case("unknown_method", "unknown method 'fedfoo'")
def _(ctx: Ctx) -> list[str]:
    return ctx.run(spec=ctx.spec_with(method="fedfoo"))


@case("corrupted_checkpoint", "is corrupted (UnpicklingError); delete it")
def _(ctx: Ctx) -> list[str]:
    (ctx.out / "checkpoints").mkdir()
    (ctx.out / "checkpoints" / "round_0000.pt").write_bytes(b"not a checkpoint")
    return ctx.run()


@case("foreign_checkpoint", "is not a benchlib checkpoint; delete it")
def _(ctx: Ctx) -> list[str]:
    (ctx.out / "checkpoints").mkdir()
    torch.save({"weights": torch.zeros(3)}, ctx.out / "checkpoints" / "round_0001.pt")
    return ctx.run()


def _checkpoint_of_this_cell(ctx: Ctx, **state: Any) -> None:
    """A checkpoint with the cell's own config hash but another version's layout."""
    from benchlib.grid.spec import CellSpec

    (ctx.out / "checkpoints").mkdir()
    state["config_hash"] = CellSpec.from_json(ctx.spec).config_hash()
    torch.save(state, ctx.out / "checkpoints" / "round_0000.pt")


@case("checkpoint_missing_key", "does not fit this cell (KeyError: 'models'")
def _(ctx: Ctx) -> list[str]:
    _checkpoint_of_this_cell(ctx, completed_round=0)
    return ctx.run()


@case(
    "checkpoint_fewer_client_models",
    "(ValueError: it holds 1 client models, the cell has 4; written by another",
)
def _(ctx: Ctx) -> list[str]:
    _checkpoint_of_this_cell(ctx, completed_round=0, models=[{}], optimizers=[])
    return ctx.run()


@case("absurd_model_size", "parameters for inputs (1, 28, 28): its 4 client copies and optimizer")
def _(ctx: Ctx) -> list[str]:
    model = {**ctx.spec["model"], "params": {**ctx.spec["model"]["params"], "hidden": 10**9}}
    return ctx.run(spec=ctx.spec_with(model=model))


@case("split_spec_lacks_partition", "--spec lacks partition, split")
def _(ctx: Ctx) -> list[str]:
    spec = json.dumps({"dataset": "mnist5k", "clients": 4})
    out = str(ctx.out / "s.csv")
    return [benchlib_exe(), "split", "--spec", spec, "--store", str(ctx.store), "--out", out]


@case("report_collected_not_utf8", "is not a readable CSV (UnicodeDecodeError); delete it")
def _(ctx: Ctx) -> list[str]:
    (ctx.inp / "c.csv").write_bytes(b"\xff\xfe\x00 not a csv")
    spec = json.dumps(ROBUSTNESS_SPEC)
    return [
        benchlib_exe(), "report", "--kind", "robustness_table", "--spec", spec,
        "--collected", str(ctx.inp / "c.csv"), "--out", str(ctx.out / "t.tex"),
    ]  # fmt: skip


@case("selections_of_a_star_cell", "holds no peer selections of a P2P cell (KeyError")
def _(ctx: Ctx) -> list[str]:
    (ctx.inp / "m.json").write_text(json.dumps({"history": {"selections": []}}))
    return [benchlib_exe(), "selections", str(ctx.inp / "m.json")]


@case("prepare_pixel_beyond_a_byte", "contains pixel values that are not integers in 0..255")
def _(ctx: Ctx) -> list[str]:
    rows = [",".join(["0"] * 784 + ["3"]) for _ in range(20)]
    rows[4] = ",".join(["300"] * 784 + ["3"])  # was clipped to 255 without a word
    source = ctx.inp / "mnist.csv.gz"
    source.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
    params = {"source_file": str(source), "sha256": hashlib.sha256(source.read_bytes()).hexdigest()}
    spec = {"dataset": "mnist5k", "source": "mnist5k", "params": params}
    return [benchlib_exe(), "prepare", "--spec", json.dumps(spec), "--out", str(ctx.out / "st")]


@case("run_negative_seed", "--spec seed: -1 is less than the minimum of 0")
def _(ctx: Ctx) -> list[str]:
    return ctx.run(spec=ctx.spec_with(seed=-1))


@case("run_spec_file_not_utf8", "is not UTF-8 JSON; regenerate it")
def _(ctx: Ctx) -> list[str]:
    (ctx.inp / "spec.json").write_bytes(b"\xff{")
    return ctx.run(spec=f"@{ctx.inp / 'spec.json'}")


@case("results_path_is_directory", "metrics.json is a directory; remove it")
def _(ctx: Ctx) -> list[str]:
    (ctx.out / "metrics.json").mkdir()
    return ctx.run()


@case("results_folder_is_file", "is an existing file; remove it")
def _(ctx: Ctx) -> list[str]:
    (ctx.out / "cell").write_text("a file where a folder should be\n")
    return ctx.run(out=ctx.out / "cell" / "metrics.json", timing=ctx.out / "timing.json")


@case("prepare_target_is_file", "st is an existing file; remove it")
def _(ctx: Ctx) -> list[str]:
    (ctx.out / "st").write_text("a file where the store should be\n")
    spec = {"dataset": "mnist5k", "source": "mnist5k"}
    return [benchlib_exe(), "prepare", "--spec", json.dumps(spec), "--out", str(ctx.out / "st")]


@case("zero_threads", "--threads must be at least 1, got 0")
def _(ctx: Ctx) -> list[str]:
    return ctx.run(threads=0)


@case("absurd_threads", "--threads 100000 is more than 1024; set --threads <= 1024")
def _(ctx: Ctx) -> list[str]:
    return ctx.run(threads=100_000)


@case("negative_stop_after", "--stop-after must be at least 1, got -1")
def _(ctx: Ctx) -> list[str]:
    return [*ctx.run(), "--stop-after", "-1"]


# ------------------------------------------------------------------------- server
ARCHIVE = bytes(range(256)) * 400


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves ``ARCHIVE`` at any path; under ``/truncated/`` it announces it all, sends half."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(ARCHIVE)))
        self.end_headers()
        cut = len(ARCHIVE) // 2 if self.path.startswith("/truncated/") else len(ARCHIVE)
        self.wfile.write(ARCHIVE[:cut])
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# -------------------------------------------------------------------------- tests
def files_under(root: Path) -> dict[str, int]:
    """Relative path -> size of every file below ``root`` (Snakemake's own metadata aside)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.stat().st_size
        for p in root.rglob("*")
        if p.is_file() and ".snakemake" not in p.parts
    }


def test_the_matrix_is_big_enough():
    assert len(CASES) >= 25
    assert len(PARAMS_TYPOS) >= 10


@pytest.mark.slow  # one subprocess (benchlib or snakemake) per case
@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_gives_one_clean_error_line(
    name, mnist_store, smoke_split, smoke_cell_spec, server_url, tmp_path
):
    phrase, build = CASES[name]
    ctx = Ctx(tmp_path, mnist_store, smoke_split, smoke_cell_spec("fedavg", "sfa", k=1), server_url)
    ctx.inp.mkdir()
    ctx.out.mkdir()
    argv = build(ctx)
    before = files_under(ctx.out)
    env = {**tool_env(), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    result = subprocess.run(argv, env=env, cwd=ctx.out, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0, result.stderr
    lines = result.stderr.rstrip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert lines[-1] == errors[0], "the error must be the last line"
    assert phrase in errors[0], errors[0]
    assert "Traceback" not in result.stderr
    assert files_under(ctx.out) == before, "a failed step left files behind"


@pytest.mark.slow  # spawns `benchlib run`
@pytest.mark.parametrize("method", ["fedavg", "p2p_fedavg"])
def test_nonfinite_models_from_a_malfunction_are_survived_and_recorded(
    method, mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    from benchlib.methods.catalog import METHODS

    spec = smoke_cell_spec("fedavg", "ana", k=1)
    spec["method"] = spec["method_id"] = method
    # the config filled in fedavg's; this method's are its declared defaults (a spec has all)
    spec["method_params"] = METHODS.get(method).params.resolve(method, {})
    spec["malfunction_params"]["ana"] = {"scale": 1e40}  # noise overflows float32 to Inf
    result = subprocess.run(
        Ctx(tmp_path, mnist_store, smoke_split, spec, "").run(),
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    nonfinite = metrics["history"]["nonfinite"]
    assert nonfinite, "the Inf/NaN models were not recorded"
    assert {entry["round"] for entry in nonfinite} == {0, 1}
    if method == "fedavg":
        assert {entry["model"] for entry in nonfinite} == {"global"}
    else:
        assert {entry["model"] for entry in nonfinite} <= {0, 1, 2, 3}
    assert metrics["history"]["schedule"][0] == {"0": "ana"}


@pytest.mark.slow  # runs snakemake -n
def test_config_flow_lists_on_the_command_line_keep_their_types(tmp_path):
    """`--config experiments={smoke: {k: [0, 1]}}`: Snakemake reads the flow list's numbers as
    strings; the workflow reads them as YAML would, so the grid has k = 0 and 1 only."""
    argv = ops_snakemake_argv(
        tmp_path,
        REPO / "config" / "smoke.yaml",
        "-n",
        "--config",
        "experiments={smoke: {k: [0, 1]}}",
    )
    result = subprocess.run(argv, env=tool_env(), cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout + result.stderr
    assert re.search(r"run_cell\s+9\b", out), out[-2000:]  # 3 methods x (k0, sfa k1, ana k1)
    assert "/k2/" not in out and "/k1/seed0" in out
