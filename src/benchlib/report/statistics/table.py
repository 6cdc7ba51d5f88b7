"""The table statistic: per-client final test metric, seeds averaged per client first, then mean
and population std (ddof 0) across all clients, malfunctioning ones included; and how a metric is
shown (label, percent or plain, decimals)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchlib.declarations.malfunctions import NO_MALFUNCTION
from benchlib.declarations.params import Param
from benchlib.primitives.errors import require

if TYPE_CHECKING:  # pandas is imported where it is used: Snakemake imports this module at parse
    import pandas as pd

# metric -> its name in captions and axis labels (default: the name with spaces for underscores)
METRIC_LABELS = {
    "accuracy": "accuracy",
    "balanced_accuracy": "balanced accuracy",
    "f1_macro": "macro F1",
    "dice": "Dice",
    "mse": "MSE",
    "mae": "MAE",
    "auc": "ROC-AUC",
    "roc_auc": "ROC-AUC",
    "ece": "ECE",
}
# metrics in [0, 1] shown in percent by default; every other metric is shown as is
PERCENT_METRICS = frozenset({"accuracy", "balanced_accuracy", "f1_macro", "dice", "auc", "roc_auc"})
METRIC_PATTERN = "^[a-z][a-z0-9]*(_[a-z0-9]+)*$"


@dataclass(frozen=True)
class MetricDisplay:
    """How a metric is shown: ``percent`` multiplies by 100; ``decimals`` after the point."""

    metric: str
    label: str
    percent: bool
    decimals: int

    @classmethod
    def resolve(
        cls,
        metric: str = "accuracy",
        percent: bool | None = None,
        decimals: int | None = None,
        label: str | None = None,
    ) -> MetricDisplay:
        """Defaults: percent with 1 decimal for [0, 1] metrics, else plain with 3 decimals."""
        percent = metric in PERCENT_METRICS if percent is None else percent
        decimals = (1 if percent else 3) if decimals is None else decimals
        label = METRIC_LABELS.get(metric, metric.replace("_", " ")) if label is None else label
        return cls(metric, label, percent, decimals)

    def as_spec(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "metric_label": self.label,
            "percent": self.percent,
            "decimals": self.decimals,
        }

    @classmethod
    def from_spec(cls, spec: dict) -> MetricDisplay:
        """From a spec written by :meth:`as_spec` (every field resolved there)."""
        return cls(spec["metric"], spec["metric_label"], spec["percent"], spec["decimals"])

    @property
    def column(self) -> str:
        return metric_column(self.metric)

    def scale(self, value: float) -> float:
        return 100 * value if self.percent else value

    def mean_std(self, mean: float, std: float) -> str:
        """``mean $\\pm$ std`` as the tables print it."""
        d = self.decimals
        return f"{self.scale(mean):.{d}f} $\\pm$ {self.scale(std):.{d}f}"

    @property
    def axis_label(self) -> str:
        return f"mean client {self.label}{' (%)' if self.percent else ''}"


def metric_column(metric: str) -> str:
    """The collected CSV's column of a per-client test metric."""
    return f"test_{metric}"


def check_metric(collected: pd.DataFrame, metric: str, what: str) -> None:
    """A clear error when the collected results lack ``metric``."""
    available = sorted(c.removeprefix("test_") for c in collected.columns if c.startswith("test_"))
    require(
        metric_column(metric) in collected.columns,
        f"{what}: the collected results have no test metric {metric!r} (they have: "
        f"{', '.join(available) or 'none'}); choose one of those as the report's metric",
    )


def read_collected(paths: list[Path] | list[str]) -> pd.DataFrame:
    """The collected CSVs ``paths`` as one frame, each k = 0 row once.

    Every malfunction's CSV of an experiment repeats the experiment's k = 0 cells (malfunction
    ``none``, shared by all its malfunctions), so concatenating two of them would count those
    rows twice; this keeps one copy of each (same experiment, method, k, seed and client)."""
    import pandas as pd

    require(bool(paths), "no collected CSV given; pass --collected with the report's inputs")
    frame = pd.concat([pd.read_csv(path) for path in paths], ignore_index=True)
    shared = frame["k"] == 0
    keys = ["experiment", "method_id", "k", "seed", "client"]
    repeated = shared & frame.duplicated(subset=keys)
    return frame[~repeated].reset_index(drop=True)


def table_rows(collected: pd.DataFrame, experiment: str, malfunction: str) -> pd.DataFrame:
    """The collected rows one table uses: its malfunction's cells plus the shared k = 0 cells."""
    frame = collected[collected["experiment"] == experiment]
    keep = (frame["malfunction"] == malfunction) | (
        (frame["malfunction"] == NO_MALFUNCTION) & (frame["k"] == 0)
    )
    return frame[keep]


def summarise(
    rows: pd.DataFrame, benign_only: bool = False, metric: str = "accuracy"
) -> pd.DataFrame:
    """Per (method_id, k): mean and population std across clients of ``test_<metric>``."""
    import pandas as pd

    if benign_only:
        rows = rows[~rows["malicious"].astype(bool)]
    column = metric_column(metric)
    per_client = rows.groupby(["method_id", "k", "client"], as_index=False)[column].mean()
    grouped = per_client.groupby(["method_id", "k"])[column]
    return pd.DataFrame(
        {
            "mean": grouped.mean(),
            "std": grouped.std(ddof=0),
            "clients": grouped.size(),
            "diverged": diverged_cells(rows, ["method_id", "k"]),
        }
    ).reset_index()


def per_round_stats(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean and population std (ddof 0) over clients (seeds averaged per client first)."""
    per_client = frame.groupby([*by, "round", "client"], as_index=False)["value"].mean()
    grouped = per_client.groupby([*by, "round"])["value"]
    return grouped.agg(mean="mean", std=lambda v: float(v.std(ddof=0))).reset_index()


# A table value averaged over diverged cells (non-finite models) carries this mark and the
# caption a note counting them: it must never read as an ordinary number.
DIVERGED_MARK = "$^{\\dagger}$"


def diverged_cells(rows: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Per ``keys`` group: how many of its cells (seeds) diverged (collected ``nonfinite``)."""
    if "nonfinite" not in rows:
        return rows.groupby(keys).size().mul(0).rename("diverged")
    cells = rows.assign(_diverged=rows["nonfinite"].fillna(0).astype(int) > 0)
    cell_id = ["experiment", "malfunction", "method_id", "k", "seed"]
    cells = cells.drop_duplicates([c for c in dict.fromkeys([*keys, *cell_id]) if c in cells])
    return cells.groupby(keys)["_diverged"].sum().astype(int).rename("diverged")


def diverged_note(count: int) -> str:
    """The caption note (LaTeX) of a table with ``count`` diverged cells; empty for none."""
    if count <= 0:
        return ""
    cells = "cell" if count == 1 else "cells"
    return (
        f"{DIVERGED_MARK} Includes {count} diverged {cells} (non-finite model weights during "
        "training): not comparable with the other values."
    )


# The same mark in Markdown reports and figures (plain text, no LaTeX)
DIVERGED_SIGN = "\u2020"


def diverged_cells_note(labels: list[str]) -> str:
    """The note (Markdown) of a paper-vs-ours report whose values include the diverged cells
    ``labels`` (one label per cell), counting and naming them; empty for none."""
    if not labels:
        return ""
    cells = "cell" if len(labels) == 1 else "cells"
    return (
        f"{DIVERGED_SIGN} {len(labels)} diverged {cells} (non-finite model weights during "
        f"training): {', '.join(labels)}. Values marked {DIVERGED_SIGN} include them and are "
        "not comparable with the paper's."
    )


# JSON-schema properties of a report entry that shows one metric (see MetricDisplay.resolve)
METRIC_PARAMS: dict[str, Param] = {
    "metric": Param(
        {"type": "string", "pattern": METRIC_PATTERN},
        "accuracy",
        "per-client test metric (collected column test_<metric>)",
    ),
    "percent": Param(
        {"type": ["boolean", "null"]}, None, "show 100 x value; null = for metrics in [0, 1]"
    ),
    "decimals": Param(
        {"type": ["integer", "null"], "minimum": 0, "maximum": 6},
        None,
        "decimals shown; null = 1 in percent, else 3",
    ),
    "metric_label": Param(
        {"type": ["string", "null"]},
        None,
        "name in captions and axis labels; null = the metric's usual name",
    ),
}


def metric_display(params: dict) -> MetricDisplay:
    """The display of a report entry's metric parameters (:data:`METRIC_PARAMS`)."""
    return MetricDisplay.resolve(
        params["metric"], params["percent"], params["decimals"], params["metric_label"]
    )
