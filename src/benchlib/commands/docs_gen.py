"""The generated pages of docs/: the module map (from the module docstrings), the lists of
methods, models, dataset sources and report kinds (from their registries), the parameter
reference (from the declarations) and config/README.md (from the config schema). ``benchlib
docs`` (``make docs``) writes them and ``benchlib docs --check`` names the stale ones.
Torch-free: docstrings are read with ``ast``.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

from benchlib.primitives.errors import BenchlibError

PACKAGE = Path(__file__).resolve().parents[1]  # benchlib's package folder
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
    sentence, grouped by the package's subpackages (one section each, headed by the first
    sentence of the subpackage's own docstring)."""
    paths = sorted(package.rglob("*.py"), key=lambda p: p.relative_to(package).parts)
    groups: dict[str, list[tuple[str, str]]] = {}
    for path in paths:
        relative = path.relative_to(package)
        group = relative.parts[0] if len(relative.parts) > 1 else ""
        groups.setdefault(group, []).append((f"`{relative.as_posix()}`", docstring_summary(path)))
    sections = [*_table(("module", "job"), groups.pop("", []))] if "" in groups else []
    for group, rows in groups.items():
        title = docstring_summary(package / group / "__init__.py")
        sections += [f"## `{group}/`: {title}", "", *_table(("module", "job"), rows)]
    return "\n".join(
        [
            "# Module map",
            "",
            f"One row per module of `src/{package.name}`, grouped by its packages: the first "
            "sentence of its docstring. " + _generated_note("the module docstrings"),
            "",
            *sections,
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
    from benchlib.commands.reference import parameter_reference

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
    from benchlib.grid.readings import READINGS

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
        + _generated_note("the declarations in `src/benchlib/grid/readings.py`"),
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


# config/README.md: the catalog's "Configuration" page; every key comes from the config schema's
# file, whose descriptions are written for users (implementation notes are YAML comments there).
CONFIG_SECTIONS = (
    ("Top level", ()),
    ("`datasets.<id>`", ("datasets",)),
    ("`methods.<id>`", ("methods",)),
    ("`experiments.<id>`", ("experiments",)),
    ("`reports.<name>`", ("reports",)),
)


def config_schema_file() -> dict:
    """The config schema as written in ``schemas/config.schema.yaml`` (before the code fills in
    the sections it declares): the descriptions of every key."""
    from importlib import resources

    import yaml

    return yaml.safe_load(
        resources.files("benchlib").joinpath("schemas/config.schema.yaml").read_text()
    )


def config_key_tables(schema: dict) -> list[str]:
    """One table per config section: key, required, what (the key's schema description)."""
    lines = []
    for title, path in CONFIG_SECTIONS:
        section = schema
        for name in path:
            section = section["properties"][name]["additionalProperties"]
        required = set(section.get("required", ()))
        rows = []
        for key, entry in section["properties"].items():
            if "description" not in entry:
                where = ".".join([*path, key])
                raise BenchlibError(f"config schema: {where} has no description; add one")
            rows.append(
                (f"`{key}`", "yes" if key in required else "no", _clean(entry["description"]))
            )
        lines += [f"{title}:", "", *_table(("key", "required", "what"), rows)]
    return lines


def config_readme() -> str:
    """config/README.md: what the default config is, how to pass another, and every key."""
    return "\n".join(
        [
            "# Configuration",
            "",
            "`config/config.yaml` is the default config of `workflow/Snakefile`, the workflow's "
            "entry in the Snakemake workflow catalog's layout, and the config a deployment made "
            "with `snakedeploy deploy-workflow` starts from. It is benchlib's laptop demo "
            "(`config/demo.yaml`): 4 methods x 4 malfunctions x k = 0..7 on the embedded mnist5k "
            "dataset, offline, 116 cells, so a bare `snakemake -n` plans something small. Edit "
            "it, or run another config with `--configfile=FILE`; every config is standalone and "
            "complete. In a deployment, whose own Snakefile reads `config/config.yaml`, add "
            "`--replace-workflow-config`, or Snakemake merges the two files.",
            "",
            "A config without `experiments` is the three papers' grids (`config/paper/*.yaml` "
            "merged), so that every paper target resolves by name; that is what benchlib's "
            "top-level `Snakefile` plans with no `--configfile` (`snakemake -n "
            "tables/femnist_ana.tex` in a checkout). The shipped configs, the targets and the "
            "reports: [docs/guide/configs.md](../docs/guide/configs.md).",
            "",
            "## Every key of a config file",
            "",
            "A config is one YAML file, checked when it loads: an unknown key stops `snakemake "
            "-n` with one line naming it and the closest accepted one. The parameters of "
            "sources, partitioners, models, methods, malfunctions, losses, report kinds and a "
            "dataset's `training`, `split`, `transforms` and `corruption` sections, with their "
            "types and defaults: [docs/guide/parameters.md](../docs/guide/parameters.md). "
            + _generated_note("`src/benchlib/schemas/config.schema.yaml`"),
            "",
            *config_key_tables(config_schema_file()),
        ]
    )


PAGES: dict[str, Callable[[], str]] = {
    "docs/develop/modules.md": module_map,
    "docs/guide/components.md": components,
    "docs/guide/parameters.md": parameters,
    "docs/papers/readings.md": readings,
    "config/README.md": config_readme,
}


# The demo's numbers the README quotes: from the collected CSVs of a `make demo` run kept in
# tests/golden/demo (`make demo-golden` copies them there; `make demo` fails when they differ
# from its own).
DEMO_GOLDEN = Path("tests", "golden", "demo")
DEMO_MALFUNCTIONS = ("ana", "sfa", "random", "dynamic")


def demo_ranking(root: Path) -> str:
    """The README's demo ranking: Friedman test, Nemenyi CD, mean ranks and IQM with its CI,
    computed by the ranking kind from the golden collected CSVs of the demo."""
    import pandas as pd

    from benchlib.configuration.config import Config, load_config_file
    from benchlib.report.kinds.common.ranking import compute

    report = Config(load_config_file(root / "config" / "demo.yaml")).reports["mnist5k_ranking"]
    paths = [root / DEMO_GOLDEN / f"mnist5k_{m}.csv" for m in DEMO_MALFUNCTIONS]
    frame = pd.concat([pd.read_csv(p) for p in paths]).drop_duplicates(ignore_index=True)
    ranking = compute(report.spec, frame)
    labels = dict(tuple(m) for m in report.spec["methods"])
    seeds = sorted(frame["seed"].unique())
    blocks = "one seed: malfunction x k only" if len(seeds) == 1 else f"{len(seeds)} seeds"
    test, aggregate = ranking.friedman, ranking.aggregate
    rows = [
        (
            labels[method],
            f"{ranking.mean_ranks[method]:.2f}",
            f"{100 * aggregate.point[method]:.1f} [{100 * aggregate.low[method]:.1f}, "
            f"{100 * aggregate.high[method]:.1f}]",
        )
        for method in ranking.order
    ]
    return "\n".join(
        [
            f"The demo's, `figures/mnist5k_ranking.pdf` ({len(ranking.blocks.scores)} blocks, "
            f"{blocks}): Friedman chi2({len(labels) - 1}) = {test.statistic:.1f}, "
            f"p = {test.p_value:.2g}, Nemenyi CD = {ranking.cd:.2f}.",
            "",
            *_table(("method", "mean rank", "IQM accuracy (%) [95 % CI]"), rows),
        ]
    )


# Hand-written pages with one generated part, between these two lines: name -> (page, render)
REGION_START = "<!-- generated by make docs: {name}; do not edit by hand -->"
REGION_END = "<!-- end of generated: {name} -->"
REGIONS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "config keys": (
        "docs/guide/configs.md",
        lambda root: "\n".join(config_key_tables(config_schema_file())),
    ),
    "demo ranking": ("README.md", lambda root: demo_ranking(root)),
}


def with_region(text: str, name: str, body: str, page: str) -> str:
    """``text`` with the generated region ``name`` replaced by ``body``."""
    start, end = REGION_START.format(name=name), REGION_END.format(name=name)
    if text.count(start) != 1 or text.count(end) != 1:
        raise BenchlibError(f"{page}: needs one line '{start}' and one '{end}'")
    before, rest = text.split(start + "\n", 1)
    _, after = rest.split(end, 1)
    return f"{before}{start}\n{body.rstrip()}\n{end}{after}"


def rendered(root: Path) -> dict[str, str]:
    """Every generated page's text, and every page with a generated region, as the code gives
    them now (pages relative to ``root``)."""
    texts = {page: render() for page, render in PAGES.items()}
    for name, (page, render) in REGIONS.items():
        if (root / page).is_file():  # the hand-written rest cannot be generated
            texts[page] = with_region((root / page).read_text(), name, render(root), page)
    return texts


def stale_pages(root: Path) -> list[str]:
    """The generated pages under ``root`` whose text differs from what the code gives now."""
    return [
        page
        for page, text in rendered(root).items()
        if not (root / page).is_file() or (root / page).read_text() != text
    ]


def write_pages(root: Path) -> list[str]:
    """Write every generated page and region under ``root`` (atomically); returns the pages."""
    from benchlib.primitives.io import write_text_atomic

    texts = rendered(root)
    for page, text in texts.items():
        write_text_atomic(root / page, text)
    return list(texts)


def cmd_docs(args: argparse.Namespace) -> None:
    root = Path(args.root)
    if args.check:
        stale = stale_pages(root)
        if stale:
            raise BenchlibError(f"out of date: {', '.join(stale)}; run {REGENERATE}")
        print(f"{len(PAGES) + len(REGIONS)} generated pages are current")
        return
    for page in write_pages(root):
        print(f"wrote {page}")


def register(add) -> None:
    """Add ``benchlib docs`` to the ``benchlib`` parser (``add(name, func, help)``)."""
    p = add(
        "docs",
        cmd_docs,
        "write the generated pages of docs/ (module map, components, parameter reference, "
        "readings) and config/README.md",
    )
    p.epilog = "example: benchlib docs --check   (what make docs writes, compared, nothing written)"
    p.add_argument("--root", default=".", help="the clone whose docs/ to write (default .)")
    p.add_argument(
        "--check", action="store_true", help="write nothing; fail naming the stale pages"
    )
