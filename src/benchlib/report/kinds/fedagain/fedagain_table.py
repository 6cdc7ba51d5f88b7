"""FedAgain Tables 1-3, rendered from the user's prepared stores and from the corruption list.

``table: subtypes`` (Table 1): one row per class (stone subtype), one column per dataset, "Yes"
where the dataset's store holds the class, and a last column "Yes" (all datasets), "Partially"
(two or more) or "No". ``table: subsets`` (Table 2): per dataset its view, number of classes and
its train / test / total patch counts (statistic: counts of the prepared store). ``table:
corruptions`` (Table 3): the 19 corruption types used for corrupted clients, by family.

Config entries::

    reports:
      fedagain_table1: {kind: fedagain_table, table: subtypes,
                        datasets: [kidney_a_mix, kidney_b_mix, kidney_c_mix]}
      fedagain_table3: {kind: fedagain_table, table: corruptions}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives import layout
from benchlib.primitives.errors import require
from benchlib.primitives.io import write_text_atomic
from benchlib.report.base import (
    ReportKind,
    check_outputs,
    derived_param,
    register_kind,
    required_param,
)
from benchlib.report.latex import tex_escape

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig

FAMILIES = {  # the package's families; Table 3 of the paper lists the same grouping
    "Noise": ["gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise"],
    "Blur": ["defocus_blur", "glass_blur", "motion_blur", "zoom_blur", "gaussian_blur"],
    "Weather": ["snow", "frost", "fog", "spatter"],
    "Digital": ["brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
                "saturate"],
}  # fmt: skip
STATISTIC = {
    "subtypes": "presence of each class in each dataset's prepared store",
    "subsets": "patch counts of each dataset's prepared store (source train/test split)",
    "corruptions": "the corruption types drawn for corrupted clients' training images",
}


def _tabular(columns: str, header: list[str], rows: list[list[str]], caption: str) -> str:
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{tex_escape(caption)}}}",
        rf"\begin{{tabular}}{{{columns}}}",
        r"\toprule",
        " & ".join(tex_escape(h) for h in header) + r" \\",
        r"\midrule",
        *(" & ".join(tex_escape(c) for c in row) + r" \\" for row in rows),
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


@register_kind
class FedAgainTable(ReportKind):
    name = "fedagain_table"
    output = "table"
    params = Params(
        {
            "table": required_param(
                {"enum": ["subtypes", "subsets", "corruptions"]}, "which of the paper's tables"
            ),
            "datasets": Param(
                {"type": "array", "items": {"type": "string"}},
                [],
                "the dataset ids it describes (subtypes and subsets need one at least)",
            ),
            "caption": derived_param({"type": "string"}, "the caption", "the table's statistic"),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        table = params["table"]
        datasets = list(params["datasets"])
        require(
            table == "corruptions" or bool(datasets),
            f"table {table} needs datasets: [the dataset ids it describes]",
        )
        for dataset in datasets:
            require(dataset in config.datasets, f"dataset {dataset!r} is not under datasets")
        return {
            "name": name,
            "table": table,
            "datasets": [[d, config.dataset_label(d)] for d in datasets],
            "caption": params["caption"] if params["caption"] is not None else STATISTIC[table],
            "statistic": STATISTIC[table],
            "inputs": [layout.store_manifest(config.store_name(d)) for d in datasets],
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return list(spec["inputs"])

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        check_outputs(self, outputs)
        manifests = [json.loads(Path(p).read_text()) for p in inputs]
        labels = [label for _, label in spec["datasets"]]
        caption = f"{spec['caption']} (statistic: {spec['statistic']})"
        if spec["table"] == "corruptions":
            rows = [[family, t.replace("_", " ")] for family, types in FAMILIES.items()
                    for t in types]  # fmt: skip
            text = _tabular("ll", ["Category", "Corruption type"], rows, caption)
        elif spec["table"] == "subtypes":
            present = [set(_classes(m)) for m in manifests]
            classes = sorted(set().union(*present))
            rows = []
            for cls in classes:
                marks = ["Yes" if cls in p else "No" for p in present]
                count = marks.count("Yes")
                common = "Yes" if count == len(marks) else "Partially" if count >= 2 else "No"
                rows.append([cls, *marks, common])
            header = ["Subtype", *labels, "Common across all"]
            text = _tabular("l" + "c" * (len(labels) + 1), header, rows, caption)
        else:
            rows = []
            for label, m in zip(labels, manifests, strict=True):
                counts = m.get("patches") or m.get("source_counts") or {}
                train, test = int(counts.get("train", 0)), int(counts.get("test", 0))
                rows.append([label, str(m.get("view", "")), str(m["num_classes"]), str(train),
                             str(test), str(train + test)])  # fmt: skip
            header = ["Dataset", "Image types", "Classes", "Train", "Test", "Total"]
            text = _tabular("llrrrr", header, rows, caption)
        write_text_atomic(outputs[0], text)


def _classes(manifest: dict[str, Any]) -> list[str]:
    return [str(c) for c in manifest.get("classes", range(int(manifest["num_classes"])))]
