"""The one YAML loader of benchlib: safe, strict about duplicate keys, bounded in size.

PyYAML's safe loader lets the last of two equal keys win silently (``lr: 0.002`` then ``lr: 5.0``
trains at 5.0), and aliases (``&a`` / ``*a``) let a small file stand for an exponentially large
document that hangs whatever walks it. :class:`StrictLoader` refuses both: a duplicate key names
both lines, and a document whose aliases expand to more than :data:`MAX_VALUES` values is refused
before anything walks it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from benchlib.primitives.errors import BenchlibError, require

MAX_VALUES = 1_000_000  # values in a document with every alias expanded


# libyaml's parser where PyYAML has it: the same constructors and resolvers, so the same values,
# about six times faster on the paper configs, which every ``snakemake`` run parses
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(_SAFE_LOADER):  # type: ignore[misc, valid-type]
    """A safe loader that refuses duplicate mapping keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<: *base``: keys given after win
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise DuplicateKeyError(key, seen[key], line)
                seen[key] = line
            except TypeError:  # an unhashable key: the base class reports it
                break
        return super().construct_mapping(node, deep=deep)


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: Any, first: int, second: int) -> None:
        where = f"lines {first} and {second}" if first != second else f"line {first}"
        super().__init__(f"the key {key!r} appears twice, at {where}")
        self.line = second


def expanded_size(node: yaml.Node, limit: int = MAX_VALUES) -> int:
    """How many values ``node`` stands for with its aliases expanded (stops above ``limit``)."""
    sizes: dict[int, int] = {}

    def size(current: yaml.Node) -> int:
        known = sizes.get(id(current))
        if known is not None:
            return known
        sizes[id(current)] = limit + 1  # a node that contains itself is unbounded
        total = 1
        if isinstance(current, yaml.SequenceNode):
            children = current.value
        elif isinstance(current, yaml.MappingNode):
            children = [n for pair in current.value for n in pair]
        else:
            children = []
        for child in children:
            total += size(child)
            if total > limit:
                break
        sizes[id(current)] = min(total, limit + 1)
        return sizes[id(current)]

    return size(node)


def load_yaml(text: str, source: str | Path) -> Any:
    """Parse YAML ``text`` (from ``source``, for messages) with :class:`StrictLoader`."""
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if expanded_size(node) > MAX_VALUES:
            raise BenchlibError(
                f"{source} expands to more than {MAX_VALUES:,} values through its YAML aliases "
                "(&name / *name); write the values out or reuse fewer of them"
            )
        return loader.construct_document(node)
    except DuplicateKeyError as exc:
        raise BenchlibError(f"{source}: {exc}; keep one of them") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise BenchlibError(f"{source} is not valid YAML{where}; fix its syntax") from exc
    except RecursionError as exc:
        raise BenchlibError(f"{source} nests too deeply; flatten it") from exc
    finally:
        loader.dispose()


def load_yaml_file(path: str | Path, what: str = "file") -> Any:
    """Read and parse a UTF-8 YAML file; a missing, non-UTF-8 or bad file is one clear error."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BenchlibError(
            f"{what} {path} is not UTF-8 text (line {line}); save it as UTF-8"
        ) from exc
    return load_yaml(text, f"{what} {path}")


def typed_scalars(value: Any) -> Any:
    """``value`` with every string leaf read as a YAML scalar (``"0"`` -> 0, ``"true"`` -> True,
    ``"0.5"`` -> 0.5); other strings stay. Snakemake's ``--config key={a: [0, 1]}`` reads flow
    collections with YAML's base loader, which leaves every scalar a string."""
    if isinstance(value, dict):
        return {key: typed_scalars(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed_scalars(item) for item in value]
    if isinstance(value, str):
        tag = StrictLoader.resolve(StrictLoader, yaml.ScalarNode, value, (True, False))
        if tag != "tag:yaml.org,2002:str":
            return StrictLoader("").construct_object(yaml.ScalarNode(tag, value))
    return value


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file with clear errors for missing or malformed files."""
    path = Path(path)
    require(path.is_file(), f"config file {path} not found; pass an existing --configfile")
    data = load_yaml_file(path, "config file")
    require(isinstance(data, dict), f"config file {path} must hold a mapping at the top level")
    return data
