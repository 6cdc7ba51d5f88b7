"""The claims report kind (benchlib.report.kinds.common.claims) on the demo's golden collected
results: one verdict recomputed by hand with scipy, Holm's correction and the power checked, a
missing or diverged cell making a claim "not tested", the readings, the CLI table, plugin claim
sets and clear errors for bad entries."""

from __future__ import annotations

import copy
import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, benchlib_exe, tool_env
from helpers.paths import GOLDEN
from scipy import stats

from benchlib.configuration.config import Config, load_config, load_config_file
from benchlib.grid.claims import CLAIM_SETS, declare_claims
from benchlib.primitives.errors import BenchlibError
from benchlib.report.base import get_kind
from benchlib.report.claim_outputs import plain_table
from benchlib.report.kinds.common.claims import verdicts
from benchlib.report.statistics.inference import detectable_effect, holm, pairs_needed, t_power

DEMO = REPO / "config" / "demo.yaml"


def golden_inputs(spec: dict) -> list[Path]:
    """The demo's golden collected CSVs for results/collected/mnist5k/<malfunction>.csv."""
    return [GOLDEN / "demo" / f"mnist5k_{Path(p).name}" for p in spec["inputs"]]


@pytest.fixture(scope="module")
def demo_report():
    return load_config(DEMO).reports["mnist5k_claims"]


@pytest.fixture(scope="module")
def rendered(demo_report, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("claims")
    paths = [out / "mnist5k_claims.md", out / "mnist5k_claims.pdf", out / "mnist5k_claims.csv"]
    get_kind("claims").render(demo_report.spec, golden_inputs(demo_report.spec), paths)
    return dict(zip(("md", "pdf", "csv"), paths, strict=True))


def block_values(collected: pd.DataFrame, method: str) -> pd.Series:
    """Per (malfunction, k) the cell's mean client accuracy in percent (as the tables)."""
    rows = collected[collected["method_id"] == method]
    return 100 * rows.groupby(["malfunction", "k"])["test_accuracy"].mean()


def test_targets_and_inputs(demo_report) -> None:
    assert demo_report.targets == [
        "reports/mnist5k_claims.md",
        "reports/mnist5k_claims.pdf",
        "reports/mnist5k_claims.csv",
    ]
    assert list(demo_report.inputs) == [
        f"results/collected/mnist5k/{m}.csv" for m in ("ana", "sfa", "random", "dynamic")
    ]
    status = {r["id"]: r["status"] for r in demo_report.spec["rows"] if "untestable" not in r}
    assert status["L3"] == "this config maps no experiments to group segmentation"
    assert status["L6b"] == "the experiments run none of balance, scclip"
    assert status["L1"] == ""


def test_l1_recomputed_by_hand_with_scipy(rendered) -> None:
    """L1 (LIGHTYEAR beats the best baseline the demo runs, FedAvg, every malfunction and
    k >= 1): the paired one-sided t-test on the 28 block differences, from the collected CSV."""
    malfunctions = ("ana", "sfa", "random", "dynamic")
    collected = pd.concat(
        [pd.read_csv(GOLDEN / "demo" / f"mnist5k_{m}.csv") for m in malfunctions]
    ).drop_duplicates()
    collected = collected[collected["k"] >= 1]
    d = (block_values(collected, "lightyear") - block_values(collected, "fedavg")).to_numpy()
    assert len(d) == 28
    t_test = stats.ttest_1samp(d, 0.0, alternative="greater")
    ci = stats.bootstrap(
        (d,), np.mean, n_resamples=9999, method="percentile", rng=np.random.default_rng(0)
    ).confidence_interval
    numbers = pd.read_csv(rendered["csv"]).set_index("claim")
    row = numbers.loc["L1"]
    assert row["blocks"] == 28 and row["seeds"] == 1
    assert row["effect"] == pytest.approx(d.mean(), rel=1e-9)
    assert row["p"] == pytest.approx(t_test.pvalue, rel=1e-9)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-9)
    # Holm over the claims with a p-value (L1, L2, L4, L5, L6a, L7), by hand
    tested = numbers[numbers["p"].notna()]
    p = tested["p"].to_numpy()
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate([(len(p) - i) * p[j] for i, j in enumerate(order)])
    by_hand = dict(zip(tested.index[order], np.minimum(adjusted, 1.0), strict=True))
    assert row["p_holm"] == pytest.approx(by_hand["L1"], rel=1e-9)
    assert row["verdict"] == "supported (demo scale)" and by_hand["L1"] < 0.05
    # power: at the detectable effect the one-sided t-test has 80 % power with 28 pairs
    sd = d.std(ddof=1)
    assert row["sd"] == pytest.approx(sd)
    assert t_power(row["detectable_effect"], sd, 28, 0.05) == pytest.approx(0.8, abs=1e-6)
    needed = pairs_needed(9.06, sd, 0.05, 0.8)  # the paper's effect; 28 blocks per seed
    assert row["seeds_needed"] == math.ceil(needed / 28)


def test_every_verdict_follows_its_holm_p(rendered) -> None:
    numbers = pd.read_csv(rendered["csv"])
    for row in numbers.itertuples():
        if row.verdict == "untestable":
            assert isinstance(row.note, str) and row.note
        elif row.p != row.p:  # no test
            assert row.verdict == "not tested"
        elif row.p_holm < 0.05:
            assert row.verdict == "supported (demo scale)"
        elif row.p_against_holm < 0.05:
            assert row.verdict == "contradicted (demo scale)"
        else:
            assert row.verdict == "inconclusive (demo scale)"
    assert set(numbers["claim"]) == {f"L{i}" for i in (1, 2, 3, 4, 5, 7, 8, 9, 10)} | {"L6a", "L6b"}
    assert (numbers["ours"].str.contains("8 clients, 6 rounds")).sum() == 6  # scale per row


def test_markdown_and_figure(rendered) -> None:
    text = rendered["md"].read_text()
    assert text.startswith("# LIGHTYEAR: what the paper claims, tested")
    assert "NOT a reproduction" in text and "(demo scale)" in text
    assert "consistently outperforms both centralized baselines" in text
    assert "- untestable: names neither the case" in text
    assert "None: every cell of every tested claim is present and finite." in text
    assert rendered["pdf"].read_bytes().startswith(b"%PDF")


def test_missing_or_diverged_cell_is_not_tested(demo_report, tmp_path: Path) -> None:
    inputs = golden_inputs(demo_report.spec)
    sfa = pd.read_csv(inputs[1])
    dropped = sfa[~((sfa["method_id"] == "fedavg") & (sfa["k"] == 4))]
    inputs[1] = tmp_path / "sfa.csv"
    dropped.to_csv(inputs[1], index=False)
    found = {(v.row["id"]): v for v in verdicts(demo_report.spec, inputs)}
    assert found["L1"].verdict == "not tested"
    assert found["L1"].missing == ["mnist5k/sfa/fedavg/k4/seed0"]
    assert found["L5"].verdict != "not tested"  # dynamic only: unaffected
    diverged = sfa.assign(nonfinite=0)
    diverged.loc[(diverged["method_id"] == "lightyear") & (diverged["k"] == 2), "nonfinite"] = 3
    diverged.to_csv(inputs[1], index=False)
    found = {(v.row["id"]): v for v in verdicts(demo_report.spec, inputs)}
    assert found["L1"].verdict == "not tested"
    assert found["L1"].diverged == ["mnist5k/sfa/lightyear/k2/seed0"]


def test_cli_table(rendered) -> None:
    result = subprocess.run(
        [benchlib_exe(), "claims", str(rendered["csv"])],
        capture_output=True,
        text=True,
        env=tool_env(),
        check=True,
    )
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["claim", "verdict"]
    assert lines[1].startswith("L1  ") and "supported (demo scale)" in lines[1]
    assert plain_table(rendered["csv"]) == result.stdout.rstrip("\n")


def test_one_verdict_per_reading() -> None:
    raw = load_config_file(DEMO)
    raw["reports"]["mnist5k_claims"] = {
        "kind": "claims",
        "claims": "lightyear",
        "scale": "demo",
        "readings": {"a": {"classification": ["mnist5k"]}, "b": {"classification": ["mnist*"]}},
    }
    rows = Config(raw).reports["mnist5k_claims"].spec["rows"]
    assert [(r["id"], r["reading"]) for r in rows if r["id"] == "L1"] == [("L1", "a"), ("L1", "b")]
    # a claim whose group no reading maps, and an untestable one, are listed once
    assert [r["reading"] for r in rows if r["id"] in ("L3", "L8")] == ["-", "-"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"groups": {"classification": ["nope*"]}}, "no experiment matches 'nope*'"),
        ({"groups": {"a": ["mnist5k"]}, "readings": {"r": {"a": ["mnist5k"]}}}, "exactly one"),
        ({"claims": "nobody", "groups": {"a": ["mnist5k"]}}, "claim set 'nobody'"),
    ],
)
def test_bad_entries(entry: dict, message: str) -> None:
    raw = load_config_file(DEMO)
    raw["reports"]["mnist5k_claims"] = {"kind": "claims", "claims": "lightyear", "scale": "demo"}
    raw["reports"]["mnist5k_claims"].update(entry)
    with pytest.raises(BenchlibError, match=re.escape(message)) as error:
        Config(raw)
    assert "\n" not in str(error.value)
    assert str(error.value).startswith("config error at reports.mnist5k_claims")


def test_plugin_claims_on_its_own_method(tmp_path: Path) -> None:
    """A plugin declares claims about its method the same way (declare_claims in its
    declarations module); a config's claims report names the set."""
    scale = {"clients": 8, "rounds": 6, "samples_per_client": "-", "model": "CNN"}
    declare_claims(
        "test_plugin_p2p",
        {
            "paper": "My P2P FedAvg",
            "source": "the plugin's README",
            "groups": {"grid": {"description": "the demo grid", "paper_scale": scale}},
            "claims": [
                {
                    "id": "P1",
                    "quote": "mine beats FedAvg under SFA",
                    "where": "README",
                    "group": "grid",
                    "cells": "SFA, k >= 4",
                    "method": "p2p_fedavg",
                    "against": ["fedavg"],
                    "metric": "accuracy",
                    "direction": "higher",
                    "condition": {"malfunctions": ["sfa"], "k_min": 4},
                    "test": {"kind": "beats", "statistic": "wilcoxon"},
                }
            ],
        },
    )
    try:
        raw = load_config_file(DEMO)
        raw["reports"]["mine_claims"] = copy.deepcopy(
            {"kind": "claims", "claims": "test_plugin_p2p", "scale": "demo",
             "groups": {"grid": ["mnist5k"]}}
        )  # fmt: skip
        spec = Config(raw).reports["mine_claims"].spec
        inputs = [GOLDEN / "demo" / f"mnist5k_{Path(p).name}" for p in spec["inputs"]]
        (found,) = verdicts(spec, inputs)
        assert len(found.differences) == 4  # SFA, k = 4..7
        assert found.note.startswith("n too small")  # Wilcoxon needs 6 untied pairs
        assert found.verdict == "inconclusive"
    finally:
        CLAIM_SETS._entries.pop("test_plugin_p2p", None)


def test_statistics_helpers() -> None:
    assert holm([0.01, None, 0.04, 0.03]) == pytest.approx([0.03, None, 0.06, 0.06])
    assert detectable_effect(1.0, 1, 0.05, 0.8) is None
    assert pairs_needed(-1.0, 1.0, 0.05, 0.8) is None
    # the textbook case: effect = sd (dz = 1), one-sided alpha 0.05, 80 % power -> 8 pairs
    assert pairs_needed(1.0, 1.0, 0.05, 0.8) == 8
    assert t_power(1.0, 1.0, 7, 0.05) < 0.8 <= t_power(1.0, 1.0, 8, 0.05)


def test_oof_scope_on_the_pacs_sample(tmp_path: Path) -> None:
    """Scope oof (TFL): each cell scored by its held-out clients' pooled accuracy; T1's blocks
    are (held-out domain, seed), TFL against the best of FedAvg, DRFA and FedSR."""
    import json

    spec = (
        load_config(REPO / "config" / "tfl_pacs_sample.yaml").reports["tfl_pacs_sample_claims"].spec
    )
    lead = {"tfl_f2": 0.04, "drfa": 0.01, "tfl_fedsr_small": 0.0, "fedavg": -0.01}
    values: dict[tuple, float] = {}
    inputs = []
    for index, name in enumerate(spec["inputs"]):
        experiment, _, method, _, seed = name.split("/")[2:7]
        value = 0.5 + lead[method] + 0.003 * ((index * 7) % 5) + 0.002 * int(seed[4:])
        values[(experiment, seed, method)] = 100 * value
        metrics = {
            "pooled": {"oof": {"accuracy": value}},
            "held_out_clients": [{"client": 0, "test_accuracy": value}],
            "clients": [{"client": 1, "test_accuracy": 0.6, "n_train": 33}],
            "history": {},
        }
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(metrics))
        inputs.append(path)
    found = {v.row["id"]: v for v in verdicts(spec, inputs)}
    t1 = found["T1"]
    blocks = sorted({(e, s) for e, s, _ in values})
    d = np.array(
        [values[(e, s, "tfl_f2")] - max(values[(e, s, m)] for m in ("fedavg", "drfa",
         "tfl_fedsr_small")) for e, s in blocks]
    )  # fmt: skip
    assert len(d) == 12 and sorted(t1.differences) == pytest.approx(sorted(d))
    assert t1.p == pytest.approx(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)
    assert t1.verdict == "supported" and t1.samples_per_client == 33
    assert t1.row["against_absent"] == ["fedprox"]
    assert found["T2"].verdict == "not tested"  # no TPT-48 experiments in this config


def test_pooled_scope_on_the_fedagain_demo(tmp_path: Path) -> None:
    """Scope pooled (FedAgain): the global model's accuracy on the pooled test sets, sum of
    accuracy x n_test over sum of n_test; F6 pairs 20 clients with 5 (one block: too few)."""
    spec = load_config(REPO / "config" / "fedagain_demo.yaml").reports["fedagain_demo_claims"].spec
    inputs, pooled = [], {}
    for position, name in enumerate(spec["inputs"]):
        experiment = name.split("/")[2]
        rows = []
        for method, base in (("fedagain", 0.8), ("fedavg", 0.75)):
            for client in range(4):
                accuracy = base + 0.01 * client + 0.004 * position
                rows.append(
                    {"experiment": experiment, "dataset": "mnist5k_ls", "malfunction": "none",
                     "method_id": method, "method": method, "k": 0, "seed": 0,
                     "client": client, "malicious": False, "test_accuracy": accuracy,
                     "test_precision_macro": accuracy, "n_train": 100, "n_val": 10,
                     "n_test": 10 + client}
                )  # fmt: skip
        frame = pd.DataFrame(rows)
        for method, part in frame.groupby("method_id"):
            pooled[(experiment, method)] = 100 * float(
                (part["test_accuracy"] * part["n_test"]).sum() / part["n_test"].sum()
            )
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)
        inputs.append(path)
    found = {v.row["id"]: v for v in verdicts(spec, inputs)}
    corruption = [e for e, _ in pooled if e.startswith("demo_corruption")]
    d = [pooled[(e, "fedagain")] - pooled[(e, "fedavg")] for e in dict.fromkeys(corruption)]
    assert found["F2"].differences == pytest.approx(d) and len(d) == 3
    assert found["F2"].effect == pytest.approx(5.0)
    assert found["F6"].differences == pytest.approx([0.0], abs=1e-9)
    assert found["F6"].verdict == "inconclusive" and found["F6"].note.startswith("n too small")
    assert found["F4"].verdict == "not tested"


@pytest.mark.parametrize(
    ("config", "name"),
    [
        ("paper/lightyear.yaml", "lightyear_claims"),
        ("paper/fedagain.yaml", "fedagain_claims"),
        ("paper/tfl.yaml", "tfl_claims"),
        ("tfl_tpt48.yaml", "tpt48_claims"),
    ],
)
def test_spec_fits_one_command_line_argument(config: str, name: str) -> None:
    """The rule passes the spec as one argument (Linux: at most 128 KiB): blocks are compact."""
    import json

    report = load_config(REPO / "config" / config).reports[name]
    text = json.dumps(report.spec, sort_keys=True, separators=(",", ":"))
    assert len(text.encode()) < 100_000
    tested = [r for r in report.spec["rows"] if r["blocks"]]
    assert tested and all(r["status"] == "" for r in tested)


def test_reading_takes_comparators_from_their_home_experiment(tmp_path: Path) -> None:
    """TPT-48, reading "dual step gamma_0.01, prior normalised": its experiments hold only TFL's
    cells; T2 compares them with FedAvg and FedProx from tpt48_ew / tpt48_ns (no reading of
    theirs differs) and DRFA from the gamma_0.01 variant (the prior does not concern DRFA)."""
    import json

    spec = load_config(REPO / "config" / "tfl_tpt48.yaml").reports["tpt48_claims"].spec
    reading = "dual step gamma_0.01, prior normalised"
    row = next(r for r in spec["rows"] if r["id"] == "T2" and r["reading"] == reading)
    assert row["status"] == "" and len(row["blocks"]) == 10  # 2 experiments x 5 seeds
    home = {
        "tfl": "{}__reading_dual_step_gamma0p01__reading_prior_normalised",
        "drfa": "{}__reading_dual_step_gamma0p01",
        "fedavg": "{}",
        "fedprox": "{}",
    }
    mse = {"tfl": 0.30, "drfa": 0.34, "fedavg": 0.40, "fedprox": 0.41}

    def write(name: str, value: float) -> None:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        scores = {"mse": value}
        path.write_text(json.dumps({"pooled": {"oof": scores, "if": scores},
                                    "held_out_clients": [{"client": 1}]}))  # fmt: skip

    for name in spec["inputs"]:  # the default reading's TFL and DRFA: another value
        write(name, 9.0)
    expected = []
    for base in ("tpt48_ew", "tpt48_ns"):
        for seed in range(5):
            values = {m: v + 0.01 * seed + (0.2 if base == "tpt48_ns" else 0.0)
                      for m, v in mse.items()}  # fmt: skip
            values["tfl"] += 0.005 * (seed % 2)
            expected.append(min(values[m] for m in ("drfa", "fedavg", "fedprox")) - values["tfl"])
            for method, value in values.items():
                cell = f"{home[method].format(base)}/none/{method}/k0/seed{seed}"
                assert f"results/runs/{cell}/metrics.json" in spec["inputs"]
                write(f"results/runs/{cell}/metrics.json", value)
    inputs = [tmp_path / name for name in spec["inputs"]]
    found = next(v for v in verdicts(spec, inputs) if v.row is row)
    assert not found.missing and sorted(found.differences) == pytest.approx(sorted(expected))
    d = np.array(expected)
    assert found.p == pytest.approx(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)
