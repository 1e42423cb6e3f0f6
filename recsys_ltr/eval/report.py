"""Summaries of experiment results: the Table 4.3-shaped table, CSV and JSON files.

Standard errors: with several folds, the standard error of the mean over folds (as in the
dissertation's tables); with one fold, the standard error over users of that fold.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd


def summarize(results, metrics) -> pd.DataFrame:
    """One row per method: mean and standard error of each metric, in the order of ``metrics``."""
    rows = []
    for method in dict.fromkeys(r.method for r in results):
        runs = [r for r in results if r.method == method]
        row = {"method": method, "folds": len(runs)}
        for m in metrics:
            values = np.array([r.test[m] for r in runs], dtype=float)
            row[m] = values.mean()
            if len(values) > 1:
                row[f"{m} se"] = values.std(ddof=1) / np.sqrt(len(values))
            else:
                row[f"{m} se"] = runs[0].test_stderr[m]
        rows.append(row)
    return pd.DataFrame(rows)


def long_table(results, dataset: str, protocol: str) -> pd.DataFrame:
    """Every (fold, method, metric) test value, with the setting chosen on validation."""
    rows = [
        {
            "dataset": dataset,
            "protocol": protocol,
            "method": r.method,
            "fold": r.fold,
            "params": json.dumps(r.params, sort_keys=True),
            "validation_ADG": r.validation_adg,
            "fit_seconds": r.fit_seconds,
            "metric": m,
            "value": v,
            "stderr_users": r.test_stderr[m],
        }
        for r in results
        for m, v in r.test.items()
    ]
    return pd.DataFrame(rows)


def format_table(summary: pd.DataFrame, metrics, digits: int = 4) -> str:
    """Markdown table of ``mean (se)`` per metric, best mean per column in bold."""
    best = {m: summary[m].max() for m in metrics}
    header = "| method | " + " | ".join(metrics) + " |"
    lines = [header, "|---|" + "---:|" * len(metrics)]
    for _, row in summary.iterrows():
        cells = []
        for m in metrics:
            cell = f"{row[m]:.{digits}f} ({row[f'{m} se']:.{digits}f})"
            cells.append(f"**{cell}**" if np.isclose(row[m], best[m]) else cell)
        lines.append(f"| {row['method']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_outputs(out: Path, results, summary: pd.DataFrame, table: str, meta: dict) -> list[Path]:
    """Write ``results.csv`` (long), ``summary.csv``, ``table.md`` and ``summary.json`` into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.csv", out / "summary.csv", out / "table.md", out / "summary.json"]
    long_table(results, meta["dataset"], meta["protocol"]).to_csv(paths[0], index=False)
    summary.to_csv(paths[1], index=False)
    paths[2].write_text(table + "\n")
    payload = {"meta": meta, "summary": summary.to_dict(orient="records")}
    paths[3].write_text(json.dumps(payload, indent=2, default=float) + "\n")
    return paths
