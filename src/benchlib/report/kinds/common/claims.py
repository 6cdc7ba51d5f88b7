"""What the papers claim, tested (``reports/<name>.md``, ``.pdf`` and ``.csv``): per claim of a
claim set (:mod:`benchlib.grid.claims`) the verdict (supported, contradicted, inconclusive, or not
tested when a cell is missing or diverged), the effect with its bootstrap CI, the one-sided p
before and after Holm's correction, the blocks, and the power of this design: the smallest
effect it detects at the claim set's power, and the seeds the paper's own effect would need.
Each row states our scale next to the paper's; a run that is not at paper scale says so in the
row. One verdict per reading where the config maps the claim's group per reading. Config entry::

    reports:
      mnist5k_claims:
        kind: claims
        claims: lightyear          # config/claims/lightyear.yaml, or a plugin's claim set
        scale: demo
        scale_note: mnist5k, 8 clients, 6 rounds, one seed
        groups: {classification: [mnist5k], topology: [mnist5k]}

``readings: {<label>: {<group>: [experiments]}}`` instead of ``groups`` gives one verdict per
reading (LIGHTYEAR: the baselines as the authors' code ran them, and as their papers define
them). Experiment names may be fnmatch patterns. ``methods`` maps a claim's method name to the
config method that runs it where the names alone are ambiguous.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives import layout
from benchlib.primitives.errors import require
from benchlib.report.base import ReportKind, check_outputs, register_kind, required_param
from benchlib.report.claim_outputs import NO_READING, markdown, numbers_frame, plot_claims
from benchlib.report.claim_verdicts import block_cells
from benchlib.report.kinds.common.paper_tables import SCALES, matching_experiments
from benchlib.report.statistics.inference import CONFIDENCE, RESAMPLES, SEED

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig
    from benchlib.report.claim_verdicts import Verdict

PATTERNS = {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}
GROUPS = {"type": "object", "minProperties": 1, "additionalProperties": PATTERNS}


# ------------------------------------------------------------------------------- the spec
def _method_ids(
    config: ReportConfig, experiment: str, names: list[str], chosen: dict[str, str]
) -> dict[str, str]:
    """claim method name -> the config method of ``experiment`` that runs it (where any); a
    method added with ``add_methods`` stands for a paper method only when a claim names it."""
    from benchlib.grid.paper_configs import added_methods
    from benchlib.report.kinds.common.paper_tables import match_methods

    run = list(config.experiments[experiment]["methods"])
    fixed = {n: chosen[n] for n in names if n in chosen and chosen[n] in run}
    added = set(added_methods(config.raw, config.experiments[experiment]["base"]))
    papers = [m for m in run if m not in added]
    return fixed | match_methods(config, [n for n in names if n not in fixed], papers)


def _scale(config: ReportConfig, experiments: list[str]) -> dict[str, str]:
    """Our clients, rounds and model over the experiments (several values joined by /)."""

    def joined(values: list[Any]) -> str:
        return " / ".join(str(v) for v in dict.fromkeys(values))

    datasets = [config.datasets[config.experiments[e]["dataset"]] for e in experiments]
    return {
        "clients": joined([d["clients"] for d in datasets]),
        "rounds": joined([d["training"]["rounds"] for d in datasets]),
        "model": joined([d["model"]["name"] for d in datasets]),
    }


def _keep(claim: dict[str, Any], malfunction: str, k: int, clients: int) -> bool:
    condition = claim["condition"]
    if "malfunctions" in condition and malfunction not in condition["malfunctions"]:
        return False
    if k < condition.get("k_min", 0) or k > condition.get("k_max", k):
        return False
    return not (condition.get("majority") and 2 * k <= clients)


def _client_blocks(
    config: ReportConfig, claim: dict[str, Any], experiments: list[str], ids: dict, names: list
) -> tuple[list[list[Any]], dict[str, dict[str, str]]]:
    """Scope clients: one block ``[experiment, malfunction, k, seed, reference]`` per cell of
    the claimed method that meets the condition, and ``source``: the other experiment of the
    group that gives a compared method on the same dataset (Figures 5-6: P2P FedAvg)."""
    index: dict[tuple, dict[str, str]] = {}  # (dataset, malfunction, k, seed) -> name -> exp
    for experiment in experiments:
        dataset = config.experiments[experiment]["dataset"]
        by_id = {v: n for n, v in ids[experiment].items()}
        for cell in config.cells(experiment):
            if cell.method not in by_id:
                continue
            slot = index.setdefault((dataset, cell.malfunction, cell.k, cell.seed), {})
            name = by_id[cell.method]
            require(
                name not in slot,
                f"claim {claim['id']}: {slot.get(name)} and {experiment} both give {name} at "
                f"{cell.malfunction} k = {cell.k} seed {cell.seed}; map the group to one of them",
            )
            slot[name] = experiment
    blocks: list[list[Any]] = []
    source: dict[str, dict[str, str]] = {}
    reference = claim["test"].get("reference")
    for (dataset, malfunction, k, seed), slot in sorted(index.items(), key=str):
        if claim["method"] not in slot:
            continue
        if not _keep(claim, malfunction, k, config.datasets[dataset]["clients"]):
            continue
        home = slot[claim["method"]]
        for name in names:
            if name in slot and slot[name] != home:
                known = source.setdefault(home, {}).setdefault(name, slot[name])
                require(
                    known == slot[name],
                    f"claim {claim['id']}: {name} comes from {known} and {slot[name]}; map the "
                    "group to one of them",
                )
        ref = None
        if reference is not None:
            ref_k = reference["k"]
            ref = [home, "none" if ref_k == 0 else malfunction, ref_k, seed]
        blocks.append([home, malfunction, k, seed, ref])
    return blocks, source


def _experiment_blocks(
    config: ReportConfig,
    claim: dict[str, Any],
    experiments: list[str],
    references: list[str] | None,
) -> list[list[Any]]:
    """Scopes oof / if / pooled: one block per (experiment, seed); gap_grows pairs the i-th
    experiment with the reference group's i-th at the same seed."""

    def where(experiment: str, seed: int) -> list[Any]:
        exp = config.experiments[experiment]
        k = exp["k"][0]
        return [experiment, exp["malfunctions"][0] if k > 0 else "none", k, seed]

    if references is not None:
        require(
            len(references) == len(experiments),
            f"claim {claim['id']}: group and reference group must list as many experiments "
            f"({len(experiments)} vs. {len(references)}), paired in order",
        )
    blocks = []
    for position, experiment in enumerate(experiments):
        for seed in config.experiments[experiment]["seeds"]:
            ref = None if references is None else where(references[position], seed)
            blocks.append([*where(experiment, seed), ref])
    return blocks


def claim_row(
    config: ReportConfig,
    claims: dict[str, Any],
    claim: dict[str, Any],
    reading: str,
    groups: dict[str, list[str]],
    chosen: dict[str, str],
) -> dict[str, Any]:
    """One claim under one reading: what it compares, its test and its blocks (or the reason
    it is not tested here in ``status``)."""
    from benchlib.grid.claims import condition_text

    row = {
        "id": claim["id"],
        "reading": reading,
        "quote": " ".join(claim["quote"].split()),
        "where": claim["where"],
        "status": "",
        "blocks": [],
        "seeds": [],
        "scale": {},
    }
    if "untestable" in claim:
        return row | {"untestable": " ".join(claim["untestable"].split())}
    group = claim["group"]
    row |= {
        "group": group,
        "group_description": claims["groups"][group]["description"],
        "paper_scale": claims["groups"][group]["paper_scale"],
        "cells": claim["cells"],
        "condition": condition_text(claim),
        "method": claim["method"],
        "against": list(claim["against"]),
        "against_absent": [],
        "metric": claim["metric"],
        "direction": claim["direction"],
        "scope": claim["scope"],
        "pooling": claim["pooling"],
        "test": dict(claim["test"]),
        "paper_effect": claim["paper_effect"],
    }
    where = f"claim {claim['id']}"
    reference_group = claim["test"].get("reference_group")
    missing_group = [g for g in (group, reference_group) if g and g not in groups]
    if missing_group:
        return row | {"status": f"this config maps no experiments to group {missing_group[0]}"}
    experiments = matching_experiments(config, groups[group], where)
    references = (
        matching_experiments(config, groups[reference_group], where) if reference_group else None
    )
    names = [claim["method"], *claim["against"]]
    every = experiments + (references or [])
    ids = {e: _method_ids(config, e, names, chosen) for e in every}
    if not any(claim["method"] in ids[e] for e in experiments):
        return row | {"status": f"the experiments do not run {claim['method']}"}
    present = [n for n in claim["against"] if any(n in ids[e] for e in every)]
    row["against_absent"] = [n for n in claim["against"] if n not in present]
    if not present:
        return row | {"status": f"the experiments run none of {', '.join(claim['against'])}"}
    kept = [claim["method"], *present]
    source: dict[str, dict[str, str]] = {}
    if row["scope"] == "clients":
        blocks, source = _client_blocks(config, claim, experiments, ids, kept)
    else:
        blocks = _experiment_blocks(config, claim, experiments, references)
        if row["pooling"] is None and row["scope"] != "pooled":
            tasks = {config.datasets[config.experiments[e]["dataset"]]["task"] for e in every}
            row["pooling"] = "clients" if "segmentation" in tasks else "pooled"
    if not blocks:
        condition = row["condition"]
        return row | {"status": f"no cell of the experiments meets the condition ({condition})"}
    absent = _not_in_grid(config, every, kept, ids, source, blocks)
    if absent:
        return row | {
            "status": f"the grid has no cell for {len(absent)} of the cells this claim compares "
            f"(e.g. {absent[0]}); add them to the config to test it"
        }
    row |= {
        "names": kept,
        "ids": {e: {n: ids[e][n] for n in kept if n in ids[e]} for e in every},
        "source": source,
        "blocks": blocks,
        "seeds": sorted({b[3] for b in blocks}),
        "scale": _scale(config, every),
        "homes": _homes(config, every),
    }
    row["inputs"] = _inputs(config, row, every)
    return row


def _not_in_grid(
    config: ReportConfig,
    experiments: list[str],
    names: list[str],
    ids: dict[str, dict[str, str]],
    source: dict[str, dict[str, str]],
    blocks: list[list[Any]],
) -> list[str]:
    """The cells the blocks compare that the config's grid does not have (e.g. the k = 0
    reference of a grid without k = 0), as cell ids."""
    from benchlib.report.claim_verdicts import key_text

    grid = {(e, c.malfunction, c.method, c.k, c.seed) for e in experiments for c in config.cells(e)}
    row = {"names": names, "ids": ids, "source": source}
    absent = []
    for block in blocks:
        expanded = block_cells(row, block)
        for part in (expanded["cells"], expanded["reference"] or {}):
            absent += [key_text(tuple(c)) for c in part.values() if tuple(c) not in grid]
    return list(dict.fromkeys(absent))


def _homes(config: ReportConfig, experiments: list[str]) -> dict[str, dict[str, str]]:
    """experiment -> method id -> the experiment whose run it shares (a reading variant reads
    its home experiment's cells for the methods the reading does not concern); only those."""
    homes: dict[str, dict[str, str]] = {}
    for experiment in experiments:
        for cell in config.cells(experiment):
            if cell.experiment != experiment:
                homes.setdefault(experiment, {})[cell.method] = cell.experiment
    return homes


def metrics_file(row: dict[str, Any], cell: list[Any]) -> str:
    """The metrics.json of a cell as the spec names it (its home experiment's run)."""
    from benchlib.grid.spec import Cell

    experiment, malfunction, method, k, seed = cell
    home = row["homes"].get(experiment, {}).get(method, experiment)
    return Cell(home, malfunction, method, int(k), int(seed)).metrics_path


def _inputs(config: ReportConfig, row: dict[str, Any], experiments: list[str]) -> list[str]:
    """The files a row reads: collected CSVs (scopes clients, pooled) or the metrics.json of
    every cell of its blocks that the grid has."""
    if row["scope"] in ("clients", "pooled"):
        return [
            layout.collected_csv(e, m)
            for e in experiments
            for m in config.experiments[e]["malfunctions"]
        ]
    grid = {
        metrics_file(row, [e, c.malfunction, c.method, c.k, c.seed])
        for e in experiments
        for c in config.cells(e)
    }
    paths = []
    for block in row["blocks"]:
        expanded = block_cells(row, block)
        for part in (expanded["cells"], expanded["reference"] or {}):
            paths += [p for p in (metrics_file(row, c) for c in part.values()) if p in grid]
    return list(dict.fromkeys(paths))


def spec_rows(
    config: ReportConfig, claims: dict[str, Any], params: dict[str, Any]
) -> list[dict[str, Any]]:
    """Every claim under every reading; untestable claims, and claims whose groups no reading
    maps to experiments, once."""
    if params["readings"] is not None:
        readings = dict(params["readings"])
    else:
        readings = {NO_READING: params["groups"]}
    chosen = dict(params["methods"])
    mapped = {group for groups in readings.values() for group in groups}
    rows = []
    for index, (label, groups) in enumerate(readings.items()):
        for claim in claims["claims"]:
            needs = [claim.get("group"), claim.get("test", {}).get("reference_group")]
            once = "untestable" in claim or any(g and g not in mapped for g in needs)
            if once and index > 0:
                continue
            reading = NO_READING if once else label
            rows.append(claim_row(config, claims, claim, reading, groups, chosen))
    return rows


# ------------------------------------------------------------------------- reading results
def cell_values(spec: dict[str, Any], inputs: list[Path]) -> list[dict]:
    """Per row the values of its cells: key -> CellValue."""
    import pandas as pd

    from benchlib.report.claim_verdicts import as_key, client_values, pooled_values, scope_value

    names = spec["inputs"]
    require(len(inputs) == len(names), f"expected {len(names)} input files, got {len(inputs)}")
    files = dict(zip(names, inputs, strict=True))
    csvs = [p for n, p in files.items() if n.endswith(".csv")]
    collected = (
        pd.concat([pd.read_csv(p) for p in csvs], ignore_index=True).drop_duplicates(
            subset=["experiment", "malfunction", "method_id", "k", "seed", "client"]
        )
        if csvs
        else pd.DataFrame()
    )
    cache: dict[tuple, dict] = {}
    out: list[dict] = []
    for row in spec["rows"]:
        if row["status"] or "untestable" in row:
            out.append({})
            continue
        scope, metric = row["scope"], row["metric"]
        if scope in ("clients", "pooled"):
            key = (scope, metric)
            if key not in cache:
                read = client_values if scope == "clients" else pooled_values
                cache[key] = read(collected, metric) if len(collected) else {}
            out.append(cache[key])
            continue
        values = {}
        for block in row["blocks"]:
            expanded = block_cells(row, block)
            for part in (expanded["cells"], expanded["reference"] or {}):
                for cell in part.values():
                    name = metrics_file(row, cell)
                    if name in files:
                        value = scope_value(files[name], scope, metric, row["pooling"])
                        values[as_key(cell)] = value
        out.append(values)
    return out


def verdicts(spec: dict[str, Any], inputs: list[Path]) -> list[Verdict]:
    """The verdict of every row of ``spec`` from its input files."""
    from benchlib.report.claim_verdicts import judge_all

    options = {k: spec[k] for k in ("alpha", "power", "confidence", "resamples", "seed")}
    return judge_all(spec["rows"], cell_values(spec, inputs), options)


@register_kind
class ClaimsReport(ReportKind):
    name = "claims"
    output = "markdown_numbers"
    params = Params(
        {
            "claims": required_param(
                {"type": "string", "minLength": 1},
                "claim set: config/claims/<name>.yaml or a plugin's declare_claims name",
            ),
            "scale": required_param({"enum": sorted(SCALES)}, "how far this run is from the paper"),
            "scale_note": Param({"type": "string"}, "", "one line on the run's data and grid"),
            "groups": Param(
                {"type": ["object", "null"], "minProperties": 1, "additionalProperties": PATTERNS},
                None,
                "claim group -> experiments (fnmatch patterns); give this or readings",
            ),
            "readings": Param(
                {"type": ["object", "null"], "minProperties": 1, "additionalProperties": GROUPS},
                None,
                "reading label -> {claim group -> experiments}: one verdict per reading",
            ),
            "methods": Param(
                {"type": "object", "additionalProperties": {"type": "string"}},
                {},
                "claim method name -> config method id, where the names are ambiguous",
            ),
            "title": Param({"type": ["string", "null"]}, None, "heading; null = the paper's"),
            "confidence": Param(
                {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                CONFIDENCE,
                "confidence level of the effect's bootstrap interval",
            ),
            "resamples": Param(
                {"type": "integer", "minimum": 100}, RESAMPLES, "bootstrap resamples"
            ),
            "seed": Param({"type": "integer", "minimum": 0}, SEED, "seed of the bootstrap"),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        from benchlib.grid.claims import claim_set

        given = [k for k in ("groups", "readings") if params[k] is not None]
        require(len(given) == 1, "give exactly one of groups and readings")
        claims = claim_set(params["claims"])
        rows = spec_rows(config, claims, params)
        inputs = list(dict.fromkeys(p for r in rows for p in r.pop("inputs", [])))
        title = params["title"] or f"{claims['paper']}: what the paper claims, tested"
        return {
            "name": name,
            "title": title,
            "claims": params["claims"],
            "paper": claims["paper"],
            "source": claims["source"],
            "alpha": claims["alpha"],
            "power": claims["power"],
            "scale": params["scale"],
            "scale_note": params["scale_note"],
            "rows": rows,
            "inputs": inputs,
            **{k: params[k] for k in ("confidence", "resamples", "seed")},
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return list(spec["inputs"])

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        from benchlib.primitives.io import write_text_atomic, write_with_atomic

        check_outputs(self, outputs)
        found = verdicts(spec, [Path(p) for p in inputs])
        plot_claims(spec, found, Path(outputs[1]))
        numbers = numbers_frame(spec, found)
        write_with_atomic(
            outputs[2], lambda tmp: numbers.to_csv(tmp, index=False, float_format="%.10g")
        )
        write_text_atomic(outputs[0], markdown(spec, found, Path(outputs[1]).name) + "\n")
