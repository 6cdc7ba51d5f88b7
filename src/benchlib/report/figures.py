"""Figure helpers shared by the report kinds: pyplot on the Agg backend and byte-stable saving.

matplotlib is imported inside the functions, never at import time (Snakemake imports the kinds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure: Any, pdf: Path, png: Path | None = None, *, tight: bool = True) -> None:
    """Write PDF (no creation date: byte-stable) and PNG (150 dpi) atomically; close the figure.

    ``png``: None writes the PDF only; ``tight``: crop to the content (``bbox_inches="tight"``).
    """
    import matplotlib.pyplot as plt

    from benchlib.primitives.io import write_with_atomic

    bbox: dict[str, Any] = {"bbox_inches": "tight"} if tight else {}
    write_with_atomic(
        pdf,
        lambda tmp: figure.savefig(tmp, format="pdf", metadata={"CreationDate": None}, **bbox),
    )
    if png is not None:
        write_with_atomic(png, lambda tmp: figure.savefig(tmp, format="png", dpi=150, **bbox))
    plt.close(figure)


def mark_diverged(ax: Any, frame: Any, x: str, y: str) -> None:
    """A dagger beside every point whose value includes diverged cells (``diverged`` > 0) and
    a note under the axes counting them."""
    from benchlib.report.statistics.table import DIVERGED_SIGN

    if "diverged" not in frame or not (frame["diverged"] > 0).any():
        return
    marked = frame[frame["diverged"] > 0]
    for point in marked.itertuples():
        ax.annotate(DIVERGED_SIGN, (getattr(point, x), getattr(point, y)), fontsize=8)
    points = "point includes" if len(marked) == 1 else "points include"
    ax.text(
        0.0,
        -0.2,
        f"{DIVERGED_SIGN} {len(marked)} {points} diverged cells (non-finite models)",
        transform=ax.transAxes,
        fontsize=7,
        va="top",
    )
