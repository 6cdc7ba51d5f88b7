"""A rendered LaTeX table as a standalone HTML page, for the Snakemake report.

Every table kind writes ``tables/<name>.tex`` through its own template; this module reads that
output back (``\\caption{...}`` and every ``tabular``) so one converter serves all kinds: rows
split on ``\\\\``, cells on ``&``, ``\\multicolumn`` becomes ``colspan``, rules are dropped, the
usual text macros (``\\textbf``, ``$\\pm$``, escapes) become HTML. The page adds the settings of
the cells behind the table (experiment, dataset, model, training) and the LaTeX source.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any

from benchlib.primitives.errors import BenchlibError

_SYMBOLS = {
    "pm": "±",
    "times": "×",
    "tau": "τ",
    "gamma": "γ",
    "alpha": "α",
    "beta": "β",
    "lambda": "λ",
    "mu": "μ",
    "sigma": "σ",
    "leq": "≤",
    "geq": "≥",
    "uparrow": "↑",
    "downarrow": "↓",
    "dagger": "†",
    "textbackslash": "\\",
    "textasciitilde": "~",
    "textasciicircum": "^",
    "ldots": "…",
    "dots": "…",
}
_STYLES = {"textbf": "b", "textit": "i", "emph": "i", "underline": "u", "texttt": "code"}
_RULES = re.compile(
    r"\\(toprule|midrule|bottomrule|hline|addlinespace)(\[[^\]]*\])?|\\(cmidrule|cline)(\([^)]*\))?\{[^}]*\}"
)


@dataclass(frozen=True)
class TableCell:
    html: str
    colspan: int = 1


@dataclass(frozen=True)
class Tabular:
    header: list[list[TableCell]]
    body: list[list[TableCell]]


def _braced(text: str, start: int) -> tuple[str, int]:
    """The content of the brace group opening at ``text[start]`` and the index after it."""
    if start >= len(text) or text[start] != "{":
        raise BenchlibError(f"malformed LaTeX table: expected '{{' at offset {start}")
    depth = 0
    for i in range(start, len(text)):
        char = text[i]
        if char == "\\":
            continue
        if char == "{" and text[i - 1] != "\\":
            depth += 1
        elif char == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    raise BenchlibError("malformed LaTeX table: unbalanced braces")


def _strip_comments(tex: str) -> str:
    return "\n".join(re.sub(r"(?<!\\)%.*", "", line) for line in tex.splitlines())


def _split(text: str, separator: str) -> list[str]:
    """Split on ``separator`` outside brace groups and not escaped with a backslash."""
    parts, depth, current, i = [], 0, [], 0
    while i < len(text):
        if text[i] == "\\" and text.startswith(separator, i + 1) and separator != "\\\\":
            current.append(text[i : i + 1 + len(separator)])
            i += 1 + len(separator)
            continue
        if depth == 0 and text.startswith(separator, i):
            parts.append("".join(current))
            current, i = [], i + len(separator)
            continue
        if text[i] == "\\":  # keep a macro and the character after it together
            current.append(text[i : i + 2])
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        current.append(text[i])
        i += 1
    parts.append("".join(current))
    return parts


def inline(tex: str) -> str:
    """LaTeX text (one cell or a caption) as HTML."""
    out, i = [], 0
    while i < len(tex):
        char = tex[i]
        if char == "\\":
            match = re.match(r"\\([A-Za-z]+)(\{\})?|\\(.)", tex[i:])
            if match is None:
                i += 1
                continue
            name, symbol = match.group(1), match.group(3)
            i += match.end()
            if symbol is not None:  # \% \& \_ \# \$ \{ \} and "\ "
                out.append(html.escape(symbol))
            elif name in _STYLES and tex[i : i + 1] == "{":
                content, i = _braced(tex, i)
                out.append(f"<{_STYLES[name]}>{inline(content)}</{_STYLES[name]}>")
            else:
                out.append(_SYMBOLS.get(name, ""))
        elif char in "{}$":
            i += 1
        elif char == "^" and tex[i + 1 : i + 2] == "{":
            content, i = _braced(tex, i + 1)
            out.append(f"<sup>{inline(content)}</sup>")
        elif char == "_" and tex[i + 1 : i + 2] == "{":
            content, i = _braced(tex, i + 1)
            out.append(f"<sub>{inline(content)}</sub>")
        elif char == "~":
            out.append("&nbsp;")
            i += 1
        else:
            out.append(html.escape(char))
            i += 1
    return re.sub(r"\s+", " ", "".join(out)).strip()


def _cell(tex: str) -> TableCell:
    tex = tex.strip()
    match = re.match(r"\\multicolumn\{(\d+)\}", tex)
    if match:
        _, after_align = _braced(tex, tex.index("}", match.end() - 1) + 1)
        content, _ = _braced(tex, after_align)
        return TableCell(inline(content), int(match.group(1)))
    match = re.match(r"\\multirow\{[^}]*\}\{[^}]*\}", tex)
    if match:
        content, _ = _braced(tex, match.end())
        return TableCell(inline(content))
    return TableCell(inline(tex))


def _rows(body: str) -> list[list[TableCell]]:
    rows = []
    for row in _split(_RULES.sub("", body), "\\\\"):
        if row.strip():
            rows.append([_cell(cell) for cell in _split(row, "&")])
    return rows


def parse_tabulars(tex: str) -> list[Tabular]:
    """Every ``tabular`` of a LaTeX document; the rows above the first ``\\midrule`` are the
    header."""
    tex = _strip_comments(tex)
    tables = []
    pattern = re.compile(r"\\begin\{tabular\*?\}")
    for match in pattern.finditer(tex):
        start = match.end()
        if tex[start : start + 1] == "{":  # the column spec (nested braces, e.g. @{})
            _, start = _braced(tex, start)
        end = tex.find("\\end{tabular", start)
        if end < 0:
            raise BenchlibError("malformed LaTeX table: \\begin{tabular} without \\end{tabular}")
        body = tex[start:end]
        head, sep, rest = body.partition("\\midrule")
        header, rows = (_rows(head), _rows(rest)) if sep else ([], _rows(body))
        tables.append(Tabular(header, rows))
    if not tables:
        raise BenchlibError("no tabular environment in the LaTeX table")
    return tables


def parse_caption(tex: str) -> str:
    """The ``\\caption{...}`` of a LaTeX table as HTML ('' if it has none)."""
    tex = _strip_comments(tex)
    index = tex.find("\\caption")
    if index < 0:
        return ""
    brace = tex.index("{", index)
    content, _ = _braced(tex, brace)
    return inline(content)


def _table_html(table: Tabular) -> str:
    def row(cells: list[TableCell], tag: str) -> str:
        inner = "".join(
            f"<{tag}{f' colspan={c.colspan}' if c.colspan > 1 else ''}>{c.html}</{tag}>"
            for c in cells
        )
        return f"<tr>{inner}</tr>"

    head = "".join(row(r, "th") for r in table.header)
    body = "".join(row(r, "td") for r in table.body)
    return f"<table class=numbers><thead>{head}</thead><tbody>{body}</tbody></table>"


def _settings_html(settings: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, dict | list):
            return f"<code>{html.escape(json.dumps(v, sort_keys=True))}</code>"
        return html.escape(str(v))

    sections = []
    for title, entries in settings.items():
        rows = "".join(
            f"<tr><th>{html.escape(str(k))}</th><td>{value(v)}</td></tr>"
            for k, v in entries.items()
        )
        sections.append(f"<h3>{html.escape(title)}</h3><table class=settings>{rows}</table>")
    return "".join(sections)


_STYLE = (
    "body{font-family:sans-serif;margin:1.5em;max-width:70em}"
    "table{border-collapse:collapse;margin:0.5em 0}"
    "table.numbers th,table.numbers td{border-bottom:1px solid #ccc;padding:0.25em 0.7em;"
    "text-align:center;white-space:nowrap}table.numbers td:first-child{text-align:left}"
    "table.settings th{text-align:left;padding-right:1em;vertical-align:top}"
    "p.caption{max-width:60em}code{font-size:90%}"
)


def table_page(tex: str, title: str, settings: dict[str, dict[str, Any]]) -> str:
    """A standalone HTML page: title, caption, every tabular of ``tex``, the settings (section
    title -> key -> value) and the LaTeX source."""
    tables = "".join(_table_html(t) for t in parse_tabulars(tex))
    caption = parse_caption(tex)
    return (
        "<!DOCTYPE html><html><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h2>{html.escape(title)}</h2>"
        + (f"<p class=caption>{caption}</p>" if caption else "")
        + tables
        + _settings_html(settings)
        + f"<details><summary>LaTeX source</summary><pre>{html.escape(tex)}</pre></details>"
        + "</body></html>\n"
    )
