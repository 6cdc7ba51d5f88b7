"""Every argument of the ``benchlib`` command has help text, and every subcommand's epilog shows
an example (a test that walks the argparse tree)."""

from __future__ import annotations

import argparse

import pytest

from benchlib.commands.cli import build_parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def arguments_without_help(parser: argparse.ArgumentParser) -> list[str]:
    """Option strings (or dest) of the parser's arguments with no help text; a deliberately
    hidden argument (help=SUPPRESS) counts as documented."""
    return [
        "/".join(action.option_strings) or action.dest
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not (action.help and action.help.strip())
    ]


def test_the_walk_finds_an_argument_without_help():
    parser = argparse.ArgumentParser()
    parser.add_argument("--with", help="documented")
    parser.add_argument("--without")
    parser.add_argument("positional")
    assert arguments_without_help(parser) == ["--without", "positional"]


def test_the_top_level_arguments_have_help():
    assert arguments_without_help(build_parser()) == []


def all_subcommands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand by its full name, nested ones too (``bench scale``)."""
    found = {}
    pending = list(subcommands(build_parser()).items())
    while pending:
        name, parser = pending.pop()
        found[name] = parser
        if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            pending += [(f"{name} {n}", p) for n, p in subcommands(parser).items()]
    return found


def test_nested_subcommands_are_walked():
    assert {
        "bench overhead",
        "bench stream",
        "bench scale",
        "bench kernels",
        "bench clients",
    } <= set(all_subcommands())


@pytest.mark.parametrize("name", sorted(all_subcommands()))
def test_every_argument_has_help_and_the_epilog_an_example(name):
    parser = all_subcommands()[name]
    assert arguments_without_help(parser) == [], f"benchlib {name}: arguments without help"
    assert parser.epilog and "benchlib " + name in parser.epilog, (
        f"benchlib {name}: add an epilog with an example command line"
    )
    assert parser.format_help()  # the help renders (no bad % in help strings)
