"""One way to declare a parameter: its type, default and description, in one place.

Every pluggable thing a config names - methods, models, dataset sources, partitioners,
malfunctions, losses - declares its parameters as a :class:`Params` of :class:`Param` entries.
The same declaration

- checks a config's ``params`` block when the config loads (so a typo stops ``snakemake -n`` with
  one line naming the key and the accepted ones),
- fills in the defaults there (the code that runs a cell reads complete settings, never a
  fallback), and
- writes the parameter reference (``benchlib params``, docs/guide/parameters.md).

Torch-free: Snakemake imports it when it parses the workflow.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchlib.primitives.errors import BenchlibError

# JSON-schema fragments that many declarations share
UNIT = {"type": "number", "minimum": 0, "maximum": 1}
NON_NEGATIVE = {"type": "number", "minimum": 0}
POSITIVE = {"type": "number", "exclusiveMinimum": 0}
COUNT = {"type": "integer", "minimum": 0}
OPTIONAL_COUNT = {"type": ["integer", "null"], "minimum": 0}
BOOLEAN = {"type": "boolean"}


class _Unset:
    """The default of an optional parameter that is absent unless the config gives it."""

    def __repr__(self) -> str:
        return "unset"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Param:
    """One parameter: ``schema`` is a JSON-schema fragment for its value.

    ``default`` is filled in when the config omits the parameter; :data:`UNSET` leaves it out
    (an optional setting whose absence the code handles, e.g. a URL override), and
    ``required=True`` makes the config give it. ``by_variant`` declares a default per variant of
    the owner instead (the resolved ``variant`` parameter picks it).
    """

    schema: Mapping[str, Any]
    default: Any = UNSET
    description: str = ""
    required: bool = False
    # a default per value of the owner's ``variant`` parameter (e.g. LIGHTYEAR's tau: 0.75 for
    # ``paper``, 0.6 for ``authors``): filled in after the variant is known
    by_variant: Mapping[str, Any] | None = None

    def json_schema(self) -> dict[str, Any]:
        """The value's schema with the description and default (JSON-schema annotations)."""
        result = dict(self.schema)
        if self.description:
            result["description"] = self.description
        if self.default is not UNSET:
            result["default"] = _jsonable(self.default)
        return result


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Params(Mapping[str, Param]):
    """The parameters of one pluggable thing, by name (an immutable mapping)."""

    entries: Mapping[str, Param] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Param:
        return self.entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def defaults(self) -> dict[str, Any]:
        """Every parameter that has a default -> a fresh copy of it."""
        return {
            name: copy.deepcopy(_jsonable(p.default))
            for name, p in self.entries.items()
            if p.default is not UNSET
        }

    def schema(self) -> dict[str, Any]:
        """The JSON schema of a ``params`` mapping (unknown keys are errors)."""
        return {
            "type": "object",
            "additionalProperties": False,
            "required": [name for name, p in self.entries.items() if p.required],
            "properties": {name: p.json_schema() for name, p in self.entries.items()},
        }

    def filled_schema(self) -> dict[str, Any]:
        """The schema of a resolved ``params`` mapping: every parameter that resolving always
        fills (a default, a per-variant default, or required) must be present."""
        schema = self.schema()
        schema["required"] = [
            name
            for name, p in self.entries.items()
            if p.required or p.default is not UNSET or p.by_variant is not None
        ]
        return schema

    def resolve(self, what: str, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """Check ``given`` and return it with the defaults filled in.

        ``what`` names the owner in the one-line error, e.g. ``model 'femnist_cnn' params``.
        """
        given = dict(given or {})
        for key in sorted(given):
            if key not in self.entries:
                raise BenchlibError(f"{what}: unknown parameter {key!r}{self._suggest(key)}")
        missing = [name for name, p in self.entries.items() if p.required and name not in given]
        if missing:
            raise BenchlibError(f"{what}: {', '.join(missing)} must be given")
        if given:
            _validate(what, self.schema(), given)
        return self.fill(what, given)

    def fill(self, what: str, checked: Mapping[str, Any]) -> dict[str, Any]:
        """``checked`` (a mapping :meth:`schema` has validated, e.g. as part of the config's
        schema) with the defaults filled in; nothing is validated again."""
        given = dict(checked)
        resolved = {**self.defaults(), **given}
        variant = resolved.get("variant", "paper")
        for name, p in self.entries.items():
            if p.by_variant is not None and name not in given:
                if variant not in p.by_variant:
                    raise BenchlibError(
                        f"{what}: {name} has no default for variant {variant!r}; give it"
                    )
                resolved[name] = copy.deepcopy(p.by_variant[variant])
        return resolved

    def _suggest(self, key: str) -> str:
        accepted = sorted(self.entries)
        if not accepted:
            return "; it takes no parameters"
        close = difflib.get_close_matches(key, accepted, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{hint}; it takes: {', '.join(accepted)}"

    def reference_rows(self) -> list[tuple[str, str, str, str]]:
        """(name, type, default, description) per parameter, for the docs."""
        rows = []
        for name, p in self.entries.items():
            if p.by_variant is not None:
                shown = ", ".join(f"{_show(v)} ({k})" for k, v in p.by_variant.items())
            else:
                default = "required" if p.required else ("-" if p.default is UNSET else p.default)
                shown = _show(default)
            rows.append((name, describe_type(p.schema), shown, p.description))
        return rows


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value if value in ("required", "-") else repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(_jsonable(value))


def describe_type(schema: Mapping[str, Any]) -> str:
    """A short human reading of a JSON-schema fragment (``number >= 0``, ``one of a, b``)."""
    if "enum" in schema:
        return "one of " + ", ".join(_show(v) for v in schema["enum"])
    if "const" in schema:
        return _show(schema["const"])
    if "oneOf" in schema:
        return " or ".join(describe_type(s) for s in schema["oneOf"])
    kind = schema.get("type", "any")
    text = " or ".join(kind) if isinstance(kind, list) else str(kind)
    bounds = [
        (key, symbol)
        for key, symbol in (
            ("minimum", ">="),
            ("exclusiveMinimum", ">"),
            ("maximum", "<="),
            ("exclusiveMaximum", "<"),
        )
        if key in schema
    ]
    if bounds:
        text += " " + ", ".join(f"{symbol} {schema[key]}" for key, symbol in bounds)
    if "items" in schema and isinstance(schema["items"], Mapping):
        text += f" of {describe_type(schema['items'])}"
    return text


def _validate(what: str, schema: dict[str, Any], values: dict[str, Any]) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(values), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        error = errors[0]
        where = ".".join(str(p) for p in error.absolute_path)
        raise BenchlibError(f"{what}: {where}: {error.message}{bound_fix(error)}")


def bound_fix(error: Any) -> str:
    """For a value over its schema's maximum (a bound of benchlib.primitives.limits or a
    parameter's): the fix, ``; set <key> <= <bound>``; else nothing."""
    if error.validator != "maximum" or not error.path:
        return ""
    from benchlib.primitives.limits import COSTS

    key = next((str(p) for p in reversed(error.path) if not isinstance(p, int)), "it")
    cost = COSTS.get(key)
    why = f" ({cost(error.instance)})" if cost is not None and type(error.instance) is int else ""
    return f"{why}; set {key} <= {error.validator_value}"


NO_PARAMS = Params()
