"""The generated pages of docs/: the module map (from the module docstrings), the lists of
methods, models, dataset sources and report kinds (from their registries) and the parameter
reference (from the declarations). ``benchlib docs`` (``make docs``) writes them and
``benchlib docs --check`` names the stale ones. Torch-free: docstrings are read with ``ast``.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

from benchlib.errors import BenchlibError

PACKAGE = Path(__file__).resolve().parent
REGENERATE = "make docs"

# A period ends a sentence unless it ends one of these words ("et al.", "Sec. 3").
_ABBREVIATIONS = ("al", "Sec", "Eq", "Eqs", "Fig", "Figs", "e.g", "i.e", "vs", "cf", "etc")
_ROLE = re.compile(r":(?:mod|class|func|data|meth|attr):`~?\.?([^`]+)`")


def _clean(text: str) -> str:
    """Docstring markup as Markdown: ``x`` and :mod:`x` become `x`; one line."""
    text = _ROLE.sub(r"`\1`", text).replace("``", "`")
    return " ".join(text.split()).replace("|", "\\|")


def first_sentence(docstring: str) -> str:
    """The first sentence of a docstring's first paragraph (abbreviations do not end it)."""
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    for match in re.finditer(r"[.!?](?=\s|$)", paragraph):
        words = paragraph[: match.start()].split()
        if not words or words[-1].lstrip("(\"'") not in _ABBREVIATIONS:
            return _clean(paragraph[: match.end()])
    return _clean(paragraph)


def docstring_summary(path: Path) -> str:
    """The first sentence of the module docstring of ``path``; a module without one is an error."""
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    if not docstring:
        raise BenchlibError(f"{path} has no module docstring; add one that says its job")
    return first_sentence(docstring)


def module_file(module: str, package: str) -> Path:
    """The source file of ``module``: a bare name lives in ``benchlib.<package>``, a dotted path
    anywhere importable (found without importing the module itself)."""
    if "." not in module:
        return PACKAGE / package / f"{module}.py"
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise BenchlibError(f"module {module} not found")
    return Path(spec.origin)


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return [*lines, *("| " + " | ".join(row) + " |" for row in rows), ""]


def _generated_note(what: str) -> str:
    return (
        f"Written by `{REGENERATE}` (`benchlib docs`) from {what}; do not edit it by hand: a "
        "test fails when it is out of date."
    )


def module_map(package: Path = PACKAGE) -> str:
    """docs/develop/modules.md: one row per module of ``package``, its docstring's first
    sentence."""
    rows = [
        (f"`{path.relative_to(package).as_posix()}`", docstring_summary(path))
        for path in sorted(package.rglob("*.py"), key=lambda p: p.relative_to(package).parts)
    ]
    return "\n".join(
        [
            "# Module map",
            "",
            f"One row per module of `src/{package.name}`: the first sentence of its docstring. "
            + _generated_note("the module docstrings"),
            "",
            *_table(("module", "job"), rows),
        ]
    )


def _implementation_module(implementation: str) -> str:
    """``"package.module:attribute"`` -> ``"package.module"``."""
    return implementation.partition(":")[0]


def _methods() -> list[str]:
    from benchlib.methods.catalog import METHODS

    rows = [
        (
            f"`{name}`",
            entry.topology,
            ", ".join(f"`{v}`" for v in entry.variants) or "-",
            docstring_summary(module_file(_implementation_module(entry.implementation), "")),
        )
        for name, entry in METHODS.items()
    ]
    return ["## Methods", "", *_table(("method", "topology", "variants", "what"), rows)]


def _models() -> list[str]:
    from benchlib.models.catalog import MODELS

    rows = []
    for name, entry in MODELS.items():
        module = _implementation_module(entry.implementation)
        short = module.removeprefix("benchlib.models.")
        rows.append((f"`{name}`", f"`{short}`", docstring_summary(module_file(module, ""))))
    return ["## Models", "", *_table(("model", "module", "what"), rows)]


def _sources() -> list[str]:
    from benchlib.data.registry import dataset_names, get_dataset

    rows = []
    for name in dataset_names():
        source = get_dataset(name)
        shape = "x".join(str(n) for n in source.image_shape) or "-"
        rows.append(
            (
                f"`{name}`",
                source.task,
                str(source.num_classes),
                shape,
                "yes" if source.access_page else "no",
                _clean(source.description),
            )
        )
    header = ("source", "task", "classes", "shape", "bring your own", "what")
    return ["## Dataset sources", "", *_table(header, rows)]


def _report_kinds() -> list[str]:
    from benchlib.report.base import KINDS

    rows = []
    for name, kind in KINDS.items():
        module = type(kind).__module__
        group = module.split(".")[-2]
        rows.append((f"`{name}`", kind.output, group, docstring_summary(module_file(module, ""))))
    return ["## Report kinds", "", *_table(("kind", "output", "group", "what"), rows)]


def components() -> str:
    """docs/guide/components.md: every method, model, dataset source and report kind."""
    return "\n".join(
        [
            "# Components",
            "",
            "Every method, model, dataset source and report kind a config may name. "
            + _generated_note("their registries")
            + " Their parameters, types and defaults: [parameters.md](parameters.md).",
            "",
            *_methods(),
            *_models(),
            *_sources(),
            *_report_kinds(),
        ]
    )


def parameters() -> str:
    """docs/guide/parameters.md: the parameter reference (``benchlib params``)."""
    from benchlib.reference import parameter_reference

    return parameter_reference()


def _settings_text(alternative) -> str:
    """An alternative's settings: ``tfl: lr_lambda = 0.01``; dataset settings likewise."""
    import json

    parts = [
        f"`{method}`: " + ", ".join(f"`{k} = {json.dumps(v)}`" for k, v in params.items())
        for method, params in alternative.methods.items()
    ]
    parts += [
        f"dataset `{key}`: `{json.dumps(value)}`" for key, value in alternative.dataset.items()
    ]
    return "; ".join(parts) or "none: the code's default"


def readings() -> str:
    """docs/papers/readings.md: every declared reading, its alternatives and its default."""
    from benchlib.readings import READINGS

    lines = [
        "# Readings: the choices the papers leave open",
        "",
        "A reading is one choice a paper does not state (or states ambiguously), declared with "
        "the alternatives a reproduction may take, the default this project runs and why, and "
        "the paper's own words. A config sweeps readings like any grid axis "
        "(`axes: {reading.<name>: [<alternative>, ...]}`); the default alternative is left out "
        "of a variant's name, and the methods a reading does not concern are not run again. "
        "The `readings` report kind puts one table's reading combinations side by side with "
        "Kendall's tau against the paper's order. Paper configs run the defaults. "
        + _generated_note("the declarations in `src/benchlib/readings.py`"),
        "",
        *_table(
            ("reading", "paper", "alternatives", "default"),
            [
                (
                    f"[`{name}`](#{name.replace('_', '-')})",
                    _clean(r.paper),
                    ", ".join(f"`{a.name}`" for a in r.alternatives),
                    f"`{r.default}`",
                )
                for name, r in READINGS.items()
            ],
        ),
    ]
    for name, r in READINGS.items():
        lines += [
            f"## {name}",
            "",
            f"{_clean(r.question)} ({_clean(r.paper)})",
            "",
            "The paper's words:",
            "",
            *(f"- {_clean(q)}" for q in r.quotes),
            "",
            *_table(
                ("alternative", "meaning", "settings"),
                [
                    (
                        f"`{a.name}`" + (" (default)" if a.name == r.default else ""),
                        _clean(a.meaning),
                        _settings_text(a),
                    )
                    for a in r.alternatives
                ],
            ),
            f"Default `{r.default}`: {_clean(r.why)}.",
            "",
            f"Affects: {_clean(r.affects)}.",
            "",
        ]
        if r.not_offered:
            lines += ["Not offered:", "", *(f"- {_clean(t)}" for t in r.not_offered), ""]
    return "\n".join(lines)


PAGES: dict[str, Callable[[], str]] = {
    "docs/develop/modules.md": module_map,
    "docs/guide/components.md": components,
    "docs/guide/parameters.md": parameters,
    "docs/papers/readings.md": readings,
}


def stale_pages(root: Path) -> list[str]:
    """The generated pages under ``root`` whose text differs from what the code gives now."""
    stale = []
    for page, render in PAGES.items():
        path = root / page
        if not path.is_file() or path.read_text() != render():
            stale.append(page)
    return stale


def write_pages(root: Path) -> list[str]:
    """Write every generated page under ``root`` (atomically); returns the pages written."""
    from benchlib.io import write_text_atomic

    for page, render in PAGES.items():
        write_text_atomic(root / page, render())
    return list(PAGES)


def cmd_docs(args: argparse.Namespace) -> None:
    root = Path(args.root)
    if args.check:
        stale = stale_pages(root)
        if stale:
            raise BenchlibError(f"out of date: {', '.join(stale)}; run {REGENERATE}")
        print(f"{len(PAGES)} generated pages are current")
        return
    for page in write_pages(root):
        print(f"wrote {page}")


def register(add) -> None:
    """Add ``benchlib docs`` to the ``benchlib`` parser (``add(name, func, help)``)."""
    p = add(
        "docs",
        cmd_docs,
        "write the generated pages of docs/ (module map, components, parameter reference, "
        "readings)",
    )
    p.epilog = "example: benchlib docs --check   (what make docs writes, compared, nothing written)"
    p.add_argument("--root", default=".", help="the clone whose docs/ to write (default .)")
    p.add_argument(
        "--check", action="store_true", help="write nothing; fail naming the stale pages"
    )
