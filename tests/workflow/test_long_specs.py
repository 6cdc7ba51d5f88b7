"""A report's spec can outgrow what the kernel allows one command-line argument (128 KiB on
Linux: the decisive TPT-48 readings report's is about 140 KiB, and `benchlib report` failed with
exit status 126 when it was passed inline). The rules that render reports pipe the spec through
bash's builtin printf (no exec, so no limit) into `--spec @-`."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import REPO

from benchlib.grid.spec import parse_spec

BIG = json.dumps({"files": ["results/runs/x/none/tfl/k0/seed0/metrics.json"] * 4000})
REPORT_COMMANDS = re.compile(r"benchlib (report|report-status) ")


def test_the_big_spec_is_over_the_argument_limit(tmp_path) -> None:
    """The failure the rules avoid: an external command refuses a 190 KB argument."""
    assert len(BIG.encode()) > 128 * 1024
    spec = tmp_path / "spec.json"
    spec.write_text(BIG)
    inline = subprocess.run(
        ["bash", "-c", 's=$(cat "$1"); /usr/bin/env true "$s"', "_", str(spec)],
        capture_output=True,
    )
    assert inline.returncode == 126  # E2BIG: "Argument list too long"


def test_a_piped_spec_arrives_whole(tmp_path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(BIG)
    read = "from benchlib.grid.spec import parse_spec; print(len(parse_spec('@-')['files']))"
    script = 's=$(cat "$1"); printf %s "$s" | "$2" -c "$3"'
    piped = subprocess.run(
        ["bash", "-c", script, "_", str(spec), sys.executable, read],
        capture_output=True,
        text=True,
        check=True,
    )
    assert piped.stdout.strip() == "4000"


def test_parse_spec_reads_standard_input(monkeypatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"a": [1, 2]}')))
    assert parse_spec("@-") == {"a": [1, 2]}


def test_every_report_rule_pipes_its_spec() -> None:
    rules = sorted((REPO / "workflow" / "rules").glob("*.smk"))
    shells = [
        line.strip()
        for rule in rules
        for line in rule.read_text().splitlines()
        if REPORT_COMMANDS.search(line)
    ]
    # render_table, render_figure(_numbers), render_markdown(_numbers), report_status
    assert len(shells) >= 6, shells
    for shell in shells:
        assert shell.startswith('"printf %s {params.spec:q} | benchlib report'), shell
        assert "--spec @-" in shell, shell
