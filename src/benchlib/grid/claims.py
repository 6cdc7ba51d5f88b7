"""A paper's claims, declared with their quoted words, what they compare and the test that
decides them, before any result: the input of the ``claims`` report kind.

A claim set is a YAML file ``config/claims/<name>.yaml`` (the three papers) or a mapping a plugin
declares with :func:`declare_claims` (claims about its own method). It names the groups of cells
its claims are about (``groups``: what the paper ran there, its scale) and the claims; a claim
either has a ``test`` or says why no config of this project can test it (``untestable``). A
config's ``claims`` report maps each group to its experiments (per reading). Torch- and
pandas-free: Snakemake imports it when it parses the workflow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchlib.declarations.registry import Registry
from benchlib.primitives.errors import BenchlibError, require

CLAIMS_DIR = "config/claims"
SCOPES = ("clients", "oof", "if", "pooled")
TESTS = ("beats", "gap_grows")
COMPARATORS = ("best", "mean")
STATISTICS = ("paired_t", "wilcoxon")

_TEXT = {"type": "string", "minLength": 1}
_NAMES = {"type": "array", "minItems": 1, "uniqueItems": True, "items": _TEXT}
_SCALE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["clients", "rounds", "samples_per_client", "model"],
    "properties": {key: {"type": ["string", "integer"]} for key in
                   ("clients", "rounds", "samples_per_client", "model")},
}  # fmt: skip
_CONDITION = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "malfunctions": _NAMES,
        "k_min": {"type": "integer", "minimum": 0},
        "k_max": {"type": "integer", "minimum": 0},
        "majority": {"type": "boolean", "description": "only k > half the clients"},
    },
}
_TEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["kind", "statistic"],
    "properties": {
        "kind": {"enum": list(TESTS)},
        "comparator": {"enum": list(COMPARATORS)},
        "statistic": {"enum": list(STATISTICS)},
        "reference_group": _TEXT,
        "reference": {
            "type": "object",
            "additionalProperties": False,
            "required": ["k"],
            "properties": {"k": {"type": "integer", "minimum": 0}},
        },
    },
}
_CLAIM = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "quote", "where"],
    "properties": {
        "id": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_.-]*$"},
        "quote": _TEXT,
        "where": _TEXT,
        "group": _TEXT,
        "method": _TEXT,
        "against": _NAMES,
        "metric": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"},
        "direction": {"enum": ["higher", "lower"]},
        "scope": {"enum": list(SCOPES)},
        "pooling": {"enum": ["pooled", "clients"]},
        "cells": _TEXT,
        "condition": _CONDITION,
        "test": _TEST,
        "paper_effect": {
            "type": "object",
            "additionalProperties": False,
            "required": ["value", "from"],
            "properties": {"value": {"type": "number"}, "from": _TEXT},
        },
        "untestable": _TEXT,
    },
}
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["paper", "source", "claims"],
    "properties": {
        "paper": _TEXT,
        "source": _TEXT,
        "alpha": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "power": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "groups": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "required": ["description", "paper_scale"],
                "properties": {"description": _TEXT, "paper_scale": _SCALE},
            },
        },
        "claims": {"type": "array", "minItems": 1, "items": _CLAIM},
    },
}
# what a testable claim must give (an untestable one: id, quote, where and the reason)
TESTED_KEYS = ("group", "method", "against", "metric", "direction", "cells", "test")
DEFAULTS = {"alpha": 0.05, "power": 0.8}

CLAIM_SETS: Registry[dict[str, Any]] = Registry("claim set")


def _where(error: Any) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def validate_claims(data: Any, what: str) -> dict[str, Any]:
    """``data`` checked (schema, then each claim's test) with defaults filled; one clear error
    line naming ``what``, the claim and the fix for the first problem."""
    import jsonschema

    require(isinstance(data, dict), f"{what} must hold a mapping (paper, source, claims)")
    errors = sorted(
        jsonschema.Draft202012Validator(SCHEMA).iter_errors(data),
        key=lambda e: list(map(str, e.absolute_path)),
    )
    if errors:
        error = errors[0]
        raise BenchlibError(f"{what}: at {_where(error)}: {error.message}")
    out = {**DEFAULTS, "groups": {}, **data}
    out["claims"] = [_filled(c) for c in out["claims"]]
    seen: set[str] = set()
    for claim in out["claims"]:
        name = f"{what}: claim {claim['id']}"
        require(claim["id"] not in seen, f"{name} is declared twice; give each claim its own id")
        seen.add(claim["id"])
        if "untestable" in claim:
            extra = [k for k in TESTED_KEYS if k in claim]
            require(
                not extra,
                f"{name} is untestable but declares {', '.join(extra)}; drop them or the reason",
            )
            continue
        missing = [k for k in TESTED_KEYS if k not in claim]
        require(
            not missing,
            f"{name} lacks {', '.join(missing)}; give its test or say why it is untestable "
            "(untestable: <reason>)",
        )
        require(
            claim["group"] in out["groups"],
            f"{name}: group {claim['group']!r} is not declared under groups; declare it "
            f"(one of: {', '.join(out['groups']) or 'none yet'})",
        )
        require(
            claim["method"] not in claim["against"],
            f"{name}: method {claim['method']} is also in against; compare it with others",
        )
        _check_test(name, claim, out["groups"])
        claim["test"] = {"comparator": "best", **claim["test"]}
    return out


def _filled(claim: dict[str, Any]) -> dict[str, Any]:
    """A tested claim with its optional keys filled (scope clients, no condition, no paper
    effect, pooling as the scope's tables); the comparator is checked, then filled (best)."""
    if "test" not in claim:
        return dict(claim)
    defaults = {"scope": "clients", "pooling": None, "condition": {}, "paper_effect": None}
    return {**defaults, **claim}


def _check_test(name: str, claim: dict[str, Any], groups: dict[str, Any]) -> None:
    test = claim["test"]
    if test["kind"] == "gap_grows":
        given = [k for k in ("reference_group", "reference") if k in test]
        require(
            len(given) == 1,
            f"{name}: a gap_grows test needs exactly one of reference_group (other cells) and "
            "reference (k of the same experiment)",
        )
        if "reference_group" in test:
            require(
                test["reference_group"] in groups,
                f"{name}: reference_group {test['reference_group']!r} is not declared under groups",
            )
    else:
        stray = [k for k in ("reference_group", "reference") if k in test]
        require(not stray, f"{name}: a beats test takes no {', '.join(stray)}")
    if len(claim["against"]) > 1:
        require(
            "comparator" in test,
            f"{name}: several methods in against; say how they are combined per block "
            f"(test.comparator: {' or '.join(COMPARATORS)})",
        )
    scope = claim["scope"]
    if "reference" in test:
        require(
            scope == "clients", f"{name}: reference (k) needs scope clients; use reference_group"
        )
    if "reference_group" in test:
        require(
            scope != "clients",
            f"{name}: reference_group needs an experiment scope (oof, if, pooled); use "
            "reference (k)",
        )
    condition = claim["condition"]
    if "k_min" in condition and "k_max" in condition:
        require(condition["k_min"] <= condition["k_max"], f"{name}: condition k_min > k_max")
    require(
        scope == "clients" or not condition,
        f"{name}: a condition on malfunctions and k needs scope clients (the {scope} scope "
        "reads whole experiments: put the condition in the group)",
    )


def load_claims_file(path: str | Path) -> dict[str, Any]:
    """A claims YAML file, validated (:func:`validate_claims`)."""
    from benchlib.primitives.yaml_load import load_yaml_file

    path = Path(path)
    require(path.is_file(), f"claims file {path} not found; give an existing file")
    return validate_claims(load_yaml_file(path, "claims file"), f"claims file {path}")


def declare_claims(name: str, data: dict[str, Any]) -> None:
    """Register the claim set ``name`` (a plugin's claims about its own method), validated now
    so a bad declaration fails when the plugin loads."""
    CLAIM_SETS.add(name, validate_claims(data, f"claim set {name}"))


def claim_set(name: str) -> dict[str, Any]:
    """A declared claim set, else ``config/claims/<name>.yaml`` of the working directory or the
    checkout."""
    if name in CLAIM_SETS:
        return CLAIM_SETS.get(name)
    from benchlib.data.paths import resolve_input_path

    path = resolve_input_path(f"{CLAIMS_DIR}/{name}.yaml", f"claim set {name!r}")
    return load_claims_file(path)


def condition_text(claim: dict[str, Any]) -> str:
    """The claim's condition in words (``SFA, k >= 4``); empty when it has none."""
    condition = claim["condition"]
    parts = []
    if "malfunctions" in condition:
        parts.append("/".join(m.upper() for m in condition["malfunctions"]))
    low, high = condition.get("k_min"), condition.get("k_max")
    if low is not None and high is not None:
        parts.append(f"{low} <= k <= {high}")
    elif low is not None:
        parts.append(f"k >= {low}")
    elif high is not None:
        parts.append(f"k <= {high}")
    if condition.get("majority"):
        parts.append("k > half the clients")
    return ", ".join(parts)
