"""Docs that cannot rot: every `benchlib`, `snakemake` and `make` command in README.md and docs/
(fenced blocks and inline code) still works, the README stays a short front door, and the config
page names every key of the config schema.

- `benchlib`: every subcommand and flag named exists (the `--help` form of each subcommand
  renders), every complete command parses, and the inspect-only ones run;
- `snakemake`: every command parses with Snakemake's own parser, and every complete one is
  dry-run (`-n`), commands with the same options in one run with all their targets;
- `make`: every target is planned (`make -n`).
A few commands cannot run here; ALLOWED names them, each with its reason (their flags are still
checked). A few are documented as wrong on purpose; EXPECTED_ERRORS holds the error they give.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, tool_env

from benchlib.commands.cli import build_parser, main

# generated pages last: a command only they show (from a docstring) is checked as a mention
GENERATED = (
    "docs/develop/modules.md",
    "docs/guide/components.md",
    "docs/guide/parameters.md",
    "docs/papers/readings.md",
    "config/README.md",
)
DOCS = [
    REPO / "README.md",
    *sorted(
        p for p in (REPO / "docs").rglob("*.md") if p.relative_to(REPO).as_posix() not in GENERATED
    ),
    *(REPO / page for page in GENERATED),
]
PROGRAMS = ("benchlib", "snakemake", "make")
FENCE = re.compile(r"^[ \t]*```([^\n]*)\n(.*?)^[ \t]*```", re.M | re.S)
NOT_SHELL = ("python", "yaml", "toml", "json")  # code, not commands: a docstring is not a command
INLINE = re.compile(r"`([^`\n]+(?:\n[^`\n]+)*)`")
# benchlib subcommands that only read and print (never write, train or download)
INSPECT_ONLY = {"check-config", "targets", "params", "plugins", "status"}

ALLOWED = {
    "snakemake": "the paper grids' whole DAG (rule all, ~25 s to plan): tests/configs/"
    "test_paper_targets.py::test_rule_all_is_the_target_list dry-runs it",
    "snakemake -n": "as `snakemake`: the paper grids' whole DAG, planned by test_paper_targets.py",
    "snakemake --cores 2": "as `snakemake`: the paper grids' whole DAG, planned by "
    "test_paper_targets.py",
    "snakemake -n lightyear_all fedagain_all tfl_all": "the three papers' whole DAG (3,421 jobs): "
    "tests/configs/test_paper_targets.py plans every paper target",
    "snakemake --report": "renders the report of finished results; `benchlib html-report` runs "
    "it in tests/report/",
    "snakemake --allowed-rules table_html report_status report_pages": "a fragment of what "
    "`benchlib html-report` runs, with its target; tests/report/ run it",
    "snakemake --lint": "lints rather than plans; `make lint` runs it (planned here by make -n)",
    "snakemake --profile slurm --unlock": "removes the lock a killed driver left; nothing to plan",
}

EXPECTED_ERRORS = {
    # configs.md: a config file given as a target
    "snakemake config/demo.yaml": "pass it as --configfile=config/demo.yaml",
    # configs.md: --configfile without '=' swallows the target as a second config file
    "snakemake --configfile config/demo.yaml tables/x.tex": "tables/x.tex",
}


# ------------------------------------------------------------------------------ extraction
def commands_in(text: str) -> list[str]:
    """The commands of one Markdown text that start with benchlib, snakemake or make: each line
    (or `&&` / `;` part) of a fenced block, comments dropped, and each inline code span."""
    found = []
    for language, block in FENCE.findall(text):
        if language.strip() in NOT_SHELL:
            continue
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip().removeprefix("$ ")
            found += [" ".join(p.split()) for p in re.split(r"&&|;", line)]
    found += [" ".join(code.split()) for code in INLINE.findall(FENCE.sub("", text))]
    # a wrapper's command is a command too: `benchlib forkserver -- snakemake ...`
    found += [c.split(" -- ", 1)[1] for c in found if c.startswith("benchlib ") and " -- " in c]
    return [c for c in found if c.split(" ")[0] in PROGRAMS]


def doc_commands() -> dict[str, str]:
    """Every command of README.md and docs/ -> the first file that shows it."""
    found: dict[str, str] = {}
    for path in DOCS:
        for command in commands_in(path.read_text()):
            found.setdefault(command, path.relative_to(REPO).as_posix())
    return found


def test_commands_are_found_in_fences_inline_code_and_continuations():
    text = (
        "Run `make demo` or `benchlib targets\nconfig/demo.yaml`, not `pip install .`.\n\n"
        "  ```bash\n  snakemake -n \\\n    tables/a.tex   # plan\n  make venv && make test\n"
        "  ```\n`benchlib forkserver -- snakemake -n x.tex`\n"
    )
    assert commands_in(text) == [
        "snakemake -n tables/a.tex",
        "make venv",
        "make test",
        "make demo",
        "benchlib targets config/demo.yaml",
        "benchlib forkserver -- snakemake -n x.tex",
        "snakemake -n x.tex",
    ]


COMMANDS = doc_commands()


def by_program(program: str) -> list[str]:
    return sorted(c for c in COMMANDS if c.split(" ")[0] == program)


def is_placeholder(token: str) -> bool:
    """CONFIG, <dataset>, [TARGET...], {a,b}: a word the reader replaces."""
    value = token.split("=")[-1]  # --configfile=CONFIG
    return bool(re.search(r"[<>\[\]{}]|\.\.\.", token) or re.fullmatch(r"[A-Z][A-Z_]*", value))


def test_placeholders():
    words = [
        "CONFIG",
        "[--config",
        "<d>",
        "CSV...",
        "--configfile=CONFIG",
        "x.tex",
        "-n",
        "CONFIG=",
    ]
    assert [is_placeholder(w) for w in words] == [True] * 5 + [False] * 3


# -------------------------------------------------------------------------------- benchlib
def subparsers(parser) -> dict:
    import argparse

    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def options(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def check_benchlib(command: str, capsys, generated: bool = False) -> str | None:
    """None when the command is sound, else what is wrong."""
    argv = shlex.split(command)[1:]
    parser, path = build_parser(), []
    for token in argv:
        if token not in subparsers(parser):
            break
        parser, path = subparsers(parser)[token], [*path, token]
    rest = argv[len(path) :]
    if rest and not rest[0].startswith("-") and subparsers(parser) and not is_placeholder(rest[0]):
        return f"benchlib {' '.join(path)}: no subcommand {rest[0]!r}"
    help_text = parser.format_help()  # the --help form renders
    assert help_text
    own = rest[: rest.index("--")] if "--" in rest else rest  # after --: a wrapped command's
    flags = {t.strip("[]").split("=")[0] for t in own if t.strip("[").startswith("-")}
    unknown = sorted(flags - options(parser))
    if unknown:
        return f"benchlib {' '.join(path)} has no option {', '.join(unknown)}"
    if not rest or any(is_placeholder(t) for t in rest):
        return None  # a mention of the subcommand, or a synopsis with placeholders
    if generated:
        return None  # docstring text: its subcommands and flags are checked above
    try:
        build_parser().parse_args(argv)
    except SystemExit as exit_:
        if exit_.code:
            return f"does not parse: {capsys.readouterr().err.strip()}"
        return None  # --help, --version
    if path and path[0] in INSPECT_ONLY and "--out" not in rest:
        code = main(argv)
        err = capsys.readouterr().err
        if code != 0:
            return f"exit {code}: {err.strip()[-500:]}"
    return None


@pytest.mark.parametrize("command", by_program("benchlib"))
def test_benchlib_command(command, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    problem = check_benchlib(command, capsys, COMMANDS[command] in GENERATED)
    assert problem is None, f"{command} ({COMMANDS[command]}): {problem}"


# ------------------------------------------------------------------------------------ make
def make_env() -> dict[str, str]:
    env = {k: v for k, v in tool_env().items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return env


def makefile_targets() -> set[str]:
    """The targets the Makefile defines (a word like `tests` could also be a folder, which
    `make -n` would accept as up to date)."""
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([\w.-]+)\s*:(?!=)", text, re.M))


@pytest.mark.parametrize("command", by_program("make"))
def test_make_command_is_a_target_of_the_makefile(command):
    words = [w for w in shlex.split(command)[1:] if not is_placeholder(w)]
    targets = [w for w in words if "=" not in w and not w.startswith("-")]
    unknown = sorted(set(targets) - makefile_targets())
    assert not unknown, f"{command} ({COMMANDS[command]}): the Makefile has no target {unknown}"
    done = subprocess.run(
        ["make", "-n", "-C", str(REPO), *words],
        capture_output=True,
        text=True,
        env=make_env(),
        timeout=60,
    )
    assert done.returncode == 0, f"{command} ({COMMANDS[command]}): {done.stderr.strip()}"


# ------------------------------------------------------------------------------- snakemake
def snakemake_args(command: str):
    from snakemake.cli import get_argument_parser

    return get_argument_parser().parse_args(shlex.split(command)[1:])


@pytest.mark.parametrize("command", by_program("snakemake"))
def test_snakemake_command_parses(command, capsys):
    try:
        snakemake_args(command)
    except (SystemExit, ValueError) as exc:  # resource values are parsed while parsing
        err = capsys.readouterr().err.strip()
        pytest.fail(f"{command} ({COMMANDS[command]}) does not parse: {err or exc}")


def dry_run_groups() -> dict[tuple[str, ...], list[str]]:
    """Complete snakemake commands grouped by their options (targets, --cores and
    --rerun-incomplete aside) -> the union of their targets, in order."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for command in by_program("snakemake"):
        words = shlex.split(command)[1:]
        if command in ALLOWED or command in EXPECTED_ERRORS or any(map(is_placeholder, words)):
            continue
        try:
            targets = snakemake_args(command).targets
        except (SystemExit, ValueError):
            continue  # test_snakemake_command_parses names it
        key, skip = [], False
        for word in words:
            if skip or word in targets or word in ("-n", "--rerun-incomplete"):
                skip = False
                continue
            skip = word in ("--cores", "-c", "-j", "--jobs")
            if not skip:
                key.append(word)
        known = groups.setdefault(tuple(key), [])
        known += [t for t in targets if t not in known]
    return groups


def test_the_grouping_keeps_options_and_merges_targets():
    groups = dry_run_groups()
    demo = groups[("--configfile=config/demo.yaml",)]
    assert "tables/mnist5k_sfa.tex" in demo and "lightyear_tables" in demo
    assert all("--cores" not in key for key in groups)


@pytest.fixture(scope="module")
def snakemake_home(tmp_path_factory) -> dict[str, str]:
    """An environment in which `--profile slurm` is this clone's profile (what `make
    slurm-profile` links), and SLURM account and partition are set as the docs say."""
    home = tmp_path_factory.mktemp("xdg")
    (home / "snakemake").mkdir()
    (home / "snakemake" / "slurm").symlink_to(REPO / "profiles" / "slurm")
    return {
        **tool_env(),
        "XDG_CONFIG_HOME": str(home),
        "BENCHLIB_SLURM_ACCOUNT": "myacct",
        "BENCHLIB_SLURM_PARTITION": "batch",
    }


def run_snakemake(args: list[str], env: dict[str, str], workdir: Path):
    return subprocess.run(
        ["snakemake", "-d", str(workdir), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.mark.workflow
@pytest.mark.parametrize("key", sorted(dry_run_groups()), ids=lambda k: " ".join(k) or "paper")
def test_snakemake_commands_dry_run(key, snakemake_home, tmp_path):
    targets = dry_run_groups()[key]
    # targets first: options such as --default-resources take every word that follows them
    done = run_snakemake(["-n", *targets, *key], snakemake_home, tmp_path)
    shown = [c for c in by_program("snakemake") if c not in ALLOWED and c not in EXPECTED_ERRORS]
    assert done.returncode == 0, (
        f"snakemake -n {' '.join(key)} {' '.join(targets)} failed (the docs show: "
        f"{[c for c in shown if all(w in c.split() for w in key)]}):\n{done.stderr[-3000:]}"
    )


@pytest.mark.workflow
@pytest.mark.parametrize("command", sorted(EXPECTED_ERRORS))
def test_commands_documented_as_wrong_fail_as_documented(command, snakemake_home, tmp_path):
    assert command in COMMANDS, f"{command} is no longer in the docs: drop it here"
    done = run_snakemake(["-n", *shlex.split(command)[1:]], snakemake_home, tmp_path)
    assert done.returncode != 0 and EXPECTED_ERRORS[command] in done.stdout + done.stderr


def test_every_allowed_command_is_still_in_the_docs():
    assert not sorted(set(ALLOWED) - set(COMMANDS)), "drop these from ALLOWED"


def test_every_program_is_found():
    counts = {p: len(by_program(p)) for p in PROGRAMS}
    assert min(counts.values()) >= 5, counts


# ----------------------------------------------------------------------- the front door
def paragraphs(markdown: str) -> Iterator[str]:
    """Prose paragraphs: no fenced blocks, tables, headings, images or list items."""
    for block in re.split(r"\n\s*\n", FENCE.sub("", markdown)):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if lines and not lines[0].lstrip().startswith(("|", "#", "!", "-", "*")):
            yield " ".join(lines)


def test_the_readme_is_a_short_front_door():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    longest = max(paragraphs(text), key=lambda p: len(p.split()))
    assert len(longest.split()) <= 120, f"split this README paragraph: {longest[:80]}..."


def test_the_readme_gives_the_command_ci_runs():
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)
    assert "make test" in COMMANDS and "make demo" in COMMANDS
    assert COMMANDS["make test"] == "README.md"


def test_no_history_references_in_the_docs():
    for path in DOCS:
        found = re.findall(r"\bissues? #?\d+|\breview\b", path.read_text(), re.I)
        assert not found, f"{path.relative_to(REPO)}: {found} (history belongs in git log)"


def schema_keys(schema: dict, prefix: str = "") -> set[str]:
    """Every property name of the config schema with its section (datasets.<id>.model, ...)."""
    keys = set()
    for name, sub in schema.get("properties", {}).items():
        keys.add(prefix + name)
        if prefix.count(".") < 1:  # the top level and one section level
            keys |= schema_keys(sub, f"{prefix}{name}.")
        if isinstance(sub.get("additionalProperties"), dict) and not prefix:
            keys |= schema_keys(sub["additionalProperties"], f"{name}.<id>.")
    return keys


def test_the_config_page_names_every_key_of_the_schema():
    from benchlib.configuration.config import schema

    page = (REPO / "docs" / "guide" / "configs.md").read_text()
    keys = schema_keys(schema())
    assert "datasets.<id>.model" in keys and "experiments.<id>.axes" in keys
    named = set(re.findall(r"^\| `(\w+)` \|", page, re.M))
    missing = sorted(k for k in keys if k.count(".") <= 2 and k.split(".")[-1] not in named)
    assert not missing, f"docs/guide/configs.md, 'Every key of a config file': add {missing}"


def test_the_docs_links_resolve():
    for path in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if "://" in target:
                continue
            assert (path.parent / target).exists(), f"{path.relative_to(REPO)}: {target}"


# A path written in the docs (inline code or a fence) that starts at one of these folders of
# the repository names a file or folder that must exist; placeholders and globs are skipped.
REPO_FOLDERS = ("config", "docs", "envs", "examples", "profiles", "src", "tests", "workflow")
PATH_TOKEN = re.compile(r"(?<![\w./-])((?:" + "|".join(REPO_FOLDERS) + r")/[\w./-]*[\w/])")


def written_paths(text: str) -> set[str]:
    """Repository paths written in a page's code (inline or fenced)."""
    fences = [
        block
        for language, block in FENCE.findall(text)
        # a folder tree or a snippet of another project (a plugin's Snakefile) has its own root
        if language.strip() in ("", "bash", "sh", "console", "yaml")
        and not block.split("\n", 1)[0].rstrip().endswith("/")
    ]
    code = fences + INLINE.findall(FENCE.sub("", text))
    found = set()
    for snippet in code:
        for token in PATH_TOKEN.findall(snippet):
            end = snippet[snippet.index(token) + len(token) :][:1]
            if end in ("<", "{", "*", "$") or "..." in token:
                continue  # a placeholder or a glob: not one path
            found.add(token.rstrip("/."))
    return found


def test_the_paths_written_in_the_docs_exist():
    assert "config/demo.yaml" in written_paths("`snakemake --configfile=config/demo.yaml`")
    assert not written_paths("`config/paper/<name>.yaml` `results/runs/x` `src/{a,b}.py`")
    missing = [
        f"{path.relative_to(REPO)}: {target}"
        for path in DOCS
        for target in sorted(written_paths(path.read_text()))
        if not (REPO / target).exists()
    ]
    assert not missing, missing


def test_no_change_log_in_the_docs():
    """Docs describe what is: no numbered items of a change list and no commit hashes of this
    repository (a pinned commit of another project, ``owner/name commit abc1234``, is a source)."""
    for path in DOCS:
        text = path.read_text()
        items = re.findall(r"\bitem \d+\b", text, re.I)
        commits = [
            m.group(0)
            for m in re.finditer(r"(\S+ )?\bcommit ([0-9a-f]{7,40})\b", text)
            if not re.match(r"\(?([\w.-]+/|[A-Z])", m.group(1) or "")
        ]
        assert not items + commits, f"{path.relative_to(REPO)}: {items + commits}"
