"""The texts and figure of a ``claims`` report (:mod:`benchlib.report.kinds.common.claims`):
the verdict table (Markdown, and plain text for ``benchlib claims``), the report's Markdown and
CSV, and its one-page figure (claims as rows, verdict colours, standardised effects with CIs).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.primitives.errors import BenchlibError, require
from benchlib.report.kinds.common.paper_tables import SCALES

if TYPE_CHECKING:
    from benchlib.report.claim_verdicts import Verdict

NO_READING = "-"
COLOURS = {
    "supported": "#2e7d32",
    "contradicted": "#c62828",
    "inconclusive": "#f9a825",
    "not tested": "#9e9e9e",
}


def _num(value: Any, digits: int = 2) -> str:
    if value is None or value != value:
        return "-"
    if abs(value) != 0 and abs(value) < 10 ** (-digits):
        return f"{value:.2g}"
    return f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def verdict_text(v: Verdict, scale: str) -> str:
    """The verdict as the tables print it, with the scale where it is not the paper's."""
    from benchlib.report.claim_verdicts import UNTESTABLE

    if "untestable" in v.row:
        return UNTESTABLE
    text = v.verdict
    return text if scale == "paper" or text == "not tested" else f"{text} ({scale} scale)"


def _ours(v: Verdict) -> str:
    scale = v.row["scale"]
    if not scale:
        return "-"
    samples = "-" if v.samples_per_client is None else f"{v.samples_per_client:.0f}"
    return (
        f"{scale['clients']} clients, {scale['rounds']} rounds, {samples} train/client, "
        f"{scale['model']}"
    )


def _paper(v: Verdict) -> str:
    p = v.row.get("paper_scale")
    if not p:
        return "-"
    return (
        f"{p['clients']} clients, {p['rounds']} rounds, {p['samples_per_client']} "
        f"samples/client, {p['model']}"
    )


def _effect_unit(row: dict[str, Any]) -> str:
    from benchlib.report.claim_verdicts import percent

    return "points" if percent(row["metric"]) else row["metric"].upper()


def numbers_frame(spec: dict[str, Any], found: list[Verdict]) -> Any:
    """One row per claim (and reading): the CSV of the report."""
    import pandas as pd

    rows = []
    for v in found:
        r = v.row
        rows.append(
            {
                "paper": spec["paper"],
                "claim": r["id"],
                "reading": r["reading"],
                "where": r["where"],
                "verdict": verdict_text(v, spec["scale"]),
                "scale": spec["scale"],
                "method": r.get("method", ""),
                "against": " ".join(r.get("against", [])),
                "against_not_run": " ".join(r.get("against_absent", [])),
                "metric": r.get("metric", ""),
                "direction": r.get("direction", ""),
                "test": (r.get("test") or {}).get("kind", ""),
                "statistic": (r.get("test") or {}).get("statistic", ""),
                "condition": r.get("condition", ""),
                "blocks": len(v.differences) if not v.missing and not v.diverged else 0,
                "seeds": len(r.get("seeds", [])),
                "effect": v.effect,
                "ci_low": v.ci_low,
                "ci_high": v.ci_high,
                "sd": v.sd,
                "p": v.p,
                "p_holm": v.p_holm,
                "p_against": v.p_against,
                "p_against_holm": v.p_against_holm,
                "detectable_effect": v.detectable,
                "paper_effect": (r.get("paper_effect") or {}).get("value"),
                "seeds_needed": v.seeds_needed,
                "ours": _ours(v),
                "paper_scale": _paper(v),
                "missing": " ".join(v.missing),
                "diverged": " ".join(v.diverged),
                "note": r.get("untestable") or v.note,
            }
        )
    return pd.DataFrame(rows)


def table_lines(spec: dict[str, Any], found: list[Verdict]) -> list[str]:
    """The verdict table (Markdown): one line per claim and reading."""
    readings = any(v.row["reading"] != NO_READING for v in found)
    head = (
        "| claim | "
        + ("reading | " if readings else "")
        + (
            "verdict | effect [95 % CI] | p (Holm) | blocks | detectable at 80 % | paper effect: "
            "seeds needed | ours / paper |"
        )
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for v in found:
        if "untestable" in v.row:
            continue
        r = v.row
        unit = _effect_unit(r) if r.get("metric") else ""
        effect = "-"
        if v.effect is not None:
            effect = f"{_num(v.effect)} [{_num(v.ci_low)}, {_num(v.ci_high)}] {unit}"
        paper = r.get("paper_effect")
        needed = "-"
        if paper is not None:
            seeds = "-" if v.seeds_needed is None else str(v.seeds_needed)
            needed = f"{_num(paper['value'])}: {seeds}"
        blocks = "-" if v.effect is None else str(len(v.differences))
        p = "-" if v.p is None else f"{_p(v.p)} ({_p(v.p_holm)})"
        if v.verdict == "contradicted":
            p = f"against: {_p(v.p_against)} ({_p(v.p_against_holm)})"
        reading = f"{r['reading']} | " if readings else ""
        scale = f"{_ours(v)} / {_paper(v)}" if r["scale"] else f"not run here: {v.note}"
        lines.append(
            f"| {r['id']} | {reading}{verdict_text(v, spec['scale'])} | {effect} | {p} | {blocks} "
            f"| {_num(v.detectable)} | {needed} | {scale} |"
        )
    return lines


def markdown(spec: dict[str, Any], found: list[Verdict], figure: str) -> str:
    """The report text."""
    confidence = round(100 * spec["confidence"])
    lines = [
        f"# {spec['title']}",
        "",
        f"Claims: `{spec['claims']}` ({spec['paper']}; {spec['source']}), declared with their "
        "tests before any result. Scale of this run: "
        f"**{SCALES[spec['scale']]}**"
        + (f"; {spec['scale_note']}" if spec["scale_note"] else "")
        + ".",
        "",
        "Each claim is tested over its blocks (one cell of the grid: experiment, malfunction, k, "
        "seed, where every compared method ran): the difference per block is signed so that a "
        "positive value is the claimed direction. Test: one-sided paired (t-test or Wilcoxon, as "
        f"declared) at alpha = {spec['alpha']}, Holm-corrected across this paper's claims (per "
        "reading). Verdict: *supported* (significant in the claimed direction), *contradicted* "
        "(significant against it), *inconclusive* (neither), *not tested* (a cell missing or "
        f"diverged, or no cell of this config). Effect: mean difference with a {confidence} % "
        f"percentile-bootstrap CI (seeded); in points for metrics in [0, 1]. Detectable: the "
        f"smallest mean difference this design detects with {round(100 * spec['power'])} % power "
        "(one-sided t-test, the observed spread). Seeds needed: seeds at this grid's blocks per "
        "seed for the paper's own effect to be detected with that power.",
        "",
        *table_lines(spec, found),
        "",
        f"![claims]({figure})",
        "",
        "## The claims",
        "",
    ]
    for v in found:
        r = v.row
        reading = "" if r["reading"] == NO_READING else f"; reading: {r['reading']}"
        lines.append(f'**{r["id"]}** ({r["where"]}{reading}): "{r["quote"]}"')
        lines.append("")
        if "untestable" in r:
            lines += [f"- untestable: {r['untestable']}", ""]
            continue
        against = ", ".join(r["against"])
        if r["against_absent"]:
            against += f" (not run here: {', '.join(r['against_absent'])})"
        comparator = r["test"]["comparator"]
        reference = r["test"].get("reference_group") or (
            f"k = {r['test']['reference']['k']}" if "reference" in r["test"] else ""
        )
        lines += [
            f"- compares: {r['method']} vs. {against} ({comparator} per block), "
            f"{r['metric']} ({r['direction']} is better), scope {r['scope']}; cells: {r['cells']}"
            + (f"; condition: {r['condition']}" if r["condition"] else ""),
            f"- test: {r['test']['kind']}"
            + (f" (reference: {reference})" if reference else "")
            + f", {r['test']['statistic']}, one-sided",
            f"- verdict: {verdict_text(v, spec['scale'])}" + (f"; {v.note}" if v.note else ""),
            f"- scale: ours {_ours(v)}; paper {_paper(v)}",
            "",
        ]
    problems = [v for v in found if v.missing or v.diverged]
    lines += ["## Missing or diverged cells", ""]
    if not problems:
        lines += ["None: every cell of every tested claim is present and finite.", ""]
    for v in problems:
        for label, cells in (("missing", v.missing), ("diverged", v.diverged)):
            if cells:
                lines.append(f"- {v.row['id']} ({label}): {', '.join(dict.fromkeys(cells))}")
    lines.append("")
    return "\n".join(lines)


def plot_claims(spec: dict[str, Any], found: list[Verdict], pdf: Path) -> None:
    """One page: claims as rows, the standardised effect (mean difference / sd of the block
    differences) with its CI, coloured by verdict; the effect in its units written beside."""
    from matplotlib.patches import Patch

    from benchlib.report.figures import pyplot, save_figure

    plt = pyplot()
    shown = [v for v in found if "untestable" not in v.row]
    height = min(10.5, 1.6 + 0.32 * len(shown))
    figure, ax = plt.subplots(figsize=(8.3, height))
    for y, v in enumerate(shown):
        colour = COLOURS.get(v.verdict, COLOURS["not tested"])
        if v.effect is not None and v.sd:
            point = v.effect / v.sd
            low = (v.ci_low if v.ci_low is not None else v.effect) / v.sd
            high = (v.ci_high if v.ci_high is not None else v.effect) / v.sd
            ax.errorbar(
                point, y, xerr=[[point - low], [high - point]], fmt="o", color=colour, capsize=3
            )
            text = f"{_num(v.effect)} [{_num(v.ci_low)}, {_num(v.ci_high)}] {_effect_unit(v.row)}"
        else:
            ax.plot(0, y, marker="s", color=colour)
            text = (
                v.verdict
                if v.effect is None
                else f"{_num(v.effect)} {_effect_unit(v.row)} (no spread)"
            )
        ax.annotate(text, (1.01, y), xycoords=("axes fraction", "data"), va="center", fontsize=7)
    labels = [
        v.row["id"] + ("" if v.row["reading"] == NO_READING else f" ({v.row['reading']})")
        for v in shown
    ]
    ax.set_yticks(range(len(shown)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel(
        "standardised effect: mean difference / sd of the block differences "
        "(claimed direction > 0)",
        fontsize=8,
    )
    scale = SCALES[spec["scale"]].split(":")[0]
    ax.set_title(f"{spec['title']}\nscale: {scale}", fontsize=9)
    handles = [Patch(color=c, label=k) for k, c in COLOURS.items()]
    ax.legend(
        handles=handles,
        fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.15),
        ncol=4,
        frameon=False,
    )
    figure.subplots_adjust(right=0.68)
    save_figure(figure, pdf)


def plain_table(path: Path) -> str:
    """The verdict table of a claims report's CSV as plain text (``benchlib claims``)."""
    import pandas as pd

    require(Path(path).is_file(), f"claims CSV {path} not found; build the claims report first")
    try:
        frame = pd.read_csv(path, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise BenchlibError(f"{path} is not a claims report CSV; rebuild it") from exc
    needed = ["claim", "reading", "verdict", "effect", "ci_low", "ci_high", "p", "p_holm"]
    needed += ["blocks", "detectable_effect", "seeds_needed"]
    missing = [c for c in needed if c not in frame]
    require(not missing, f"{path} lacks the columns {', '.join(missing)}; is it a claims CSV?")

    def number(value: Any, digits: int = 2) -> str:
        return _num(float(value), digits) if value != "" else "-"

    def p_value(value: Any) -> str:
        return _p(float(value)) if value != "" else "-"

    rows = [("claim", "verdict", "effect [95 % CI]", "p (Holm)", "blocks", "detectable", "seeds")]
    for r in frame.itertuples(index=False):
        if r.verdict == "untestable":
            continue
        name = r.claim if r.reading in ("", NO_READING) else f"{r.claim} ({r.reading})"
        effect = "-"
        if r.effect != "":
            effect = f"{number(r.effect)} [{number(r.ci_low)}, {number(r.ci_high)}]"
        p = "-" if r.p == "" else f"{p_value(r.p)} ({p_value(r.p_holm)})"
        seeds = "-" if r.seeds_needed == "" else str(int(float(r.seeds_needed)))
        blocks = str(r.blocks) if r.effect != "" else "-"
        rows.append((name, r.verdict, effect, p, blocks, number(r.detectable_effect), seeds))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    untestable = int((frame["verdict"] == "untestable").sum())
    lines.append(
        f"({len(rows) - 1} claims tested or not tested here; {untestable} untestable "
        f"by any config: {path.with_suffix('.md')})"
    )
    return "\n".join(lines)
