"""Summaries of experiment results: the Table 4.3 / 4.4-shaped table, paired tests, files, charts.

Standard errors: with several folds, the standard error of the mean over folds (as in the
dissertation's tables); with one fold, the standard error over the test users of that fold
(:func:`error_caption` says which, in every table and chart).

Paired test: for each metric, the method with the best mean and the runner-up are compared by a
Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, two-sided) on their per-user test values,
paired by (fold, user) and pooled over folds.
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from scipy import stats

from recsys_ltr.eval.methods import METHODS
from recsys_ltr.eval.results import method_of

#: Significance level of the table's marker.
ALPHA = 0.05
MARKER = "†"


def _group(method: str) -> str:
    known = METHODS.get(method_of(method))  # a novelty row "ALS (top-100 last)" is ALS's
    return known.group if known else ""


def summarize(results, metrics, skipped=()) -> pd.DataFrame:
    """One row per method: mean and standard error of each metric, in the order of ``metrics``.

    Methods that were skipped on every fold get a row with NaN values and their reason in ``note``.
    """
    rows = []
    for method in dict.fromkeys(r.method for r in results):
        runs = [r for r in results if r.method == method]
        row = {"affinity": _group(method), "method": method, "folds": len(runs), "note": ""}
        for m in metrics:
            values = np.array([r.test[m] for r in runs], dtype=float)
            row[m] = values.mean()
            row[f"{m} se"] = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else runs[0].test_stderr[m]
        rows.append(row)
    done = {row["method"] for row in rows}
    for method, reason in {s.method: s.reason for s in skipped}.items():
        if method not in done:
            rows.append(
                {
                    "affinity": _group(method),
                    "method": method,
                    "folds": 0,
                    "note": f"skipped: {reason}",
                    **{c: np.nan for m in metrics for c in (m, f"{m} se")},
                }
            )
    return pd.DataFrame(
        rows, columns=["affinity", "method", "folds", *[c for m in metrics for c in (m, f"{m} se")], "note"]
    )


def pooled(results, method: str, metric: str) -> dict[tuple[int, int], float]:
    """Per-user test values of ``method`` keyed by (fold, user)."""
    return {
        (r.fold, int(u)): float(v)
        for r in results
        if r.method == method
        for u, v in zip(r.users, r.per_user[metric], strict=True)
    }


def paired_tests(results, summary: pd.DataFrame, metrics, among=None) -> dict[str, dict]:
    """Wilcoxon signed-rank test between the best method and the runner-up for each metric.

    Returns ``{metric: {"best", "runner_up", "p_value", "n_pairs"}}`` (metrics with fewer than two
    evaluated methods are left out); pairs are the (fold, user) keys both methods have.  ``among``
    (row names) limits the contest to those rows (the command line: the methods asked for).
    """
    tests = {}
    ranked = summary.dropna(subset=list(metrics))
    if among is not None:
        ranked = ranked[ranked["method"].isin(list(among))]
    for m in metrics:
        order = ranked.sort_values(m, ascending=False, kind="stable")["method"].tolist()
        if len(order) < 2:
            continue
        a, b = pooled(results, order[0], m), pooled(results, order[1], m)
        keys = sorted(a.keys() & b.keys())
        x, y = np.array([a[key] for key in keys]), np.array([b[key] for key in keys])
        tests[m] = {"best": order[0], "runner_up": order[1], "p_value": _wilcoxon(x, y), "n_pairs": len(keys)}
    return tests


def _wilcoxon(x, y) -> float:
    if len(x) == 0:
        return float("nan")
    if np.array_equal(x, y):
        return 1.0  # scipy's value too, with a warning about the zero variance
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.wilcoxon(x, y).pvalue)


#: Marks the rows of methods the run added (the bases of a stacking method) in the table.
ADDED_MARKER = "°"


def format_table(summary: pd.DataFrame, metrics, tests=None, digits: int = 4, added=None) -> str:
    """Markdown table shaped like Tables 4.3 / 4.4: ``mean (se)`` per metric, best mean in bold,
    ``†`` on the best when the Wilcoxon test against the runner-up gives p < 0.05, a row of those
    p-values, and a line per skipped method.

    ``added`` maps the methods the run added (not asked for: the bases of a stacking method) to
    the methods that needed them: their rows are marked ``ADDED_MARKER`` (``°``), a note says why,
    and the best (bold, ``†``) is chosen among the other rows."""
    tests, added = tests or {}, added or {}
    is_added = summary["method"].map(lambda row: method_of(row) in added).to_numpy(dtype=bool)
    contest = summary[~is_added]
    best = {m: contest[m].max() for m in metrics}
    lines = ["| affinity | method | " + " | ".join(metrics) + " |", "|---|---|" + "---:|" * len(metrics)]
    notes = []
    for (_, row), extra in zip(summary.iterrows(), is_added):
        if row["note"]:
            notes.append(f"- {row['method']}: {row['note']}")
            cells = ["skipped"] + ["–"] * (len(metrics) - 1)
        elif extra:
            cells = [f"{row[m]:.{digits}f} ({row[f'{m} se']:.{digits}f})" for m in metrics]
        else:
            cells = [_cell(row, m, best[m], tests.get(m), digits) for m in metrics]
        name = f"{row['method']}{ADDED_MARKER}" if extra else row["method"]
        lines.append(f"| {row['affinity'] or 'n/a'} | {name} | " + " | ".join(cells) + " |")
    if added:
        needed = sorted({m for names in added.values() for m in names})
        notes.append(
            f"{ADDED_MARKER}: not asked for (--models): run as a base of {' and '.join(needed)}; "
            "not in the contest for the best (bold, †)."
        )
    if tests:
        p_cells = [f"{tests[m]['p_value']:.2g}" if m in tests else "–" for m in metrics]
        lines.append("| | Wilcoxon p (best vs runner-up) | " + " | ".join(p_cells) + " |")
        notes.insert(
            0, f"{MARKER}: best differs from the runner-up (paired Wilcoxon signed-rank test over users, p < {ALPHA})."
        )
    return "\n".join(lines + ([""] + notes if notes else []))


def _cell(row, metric, best, test, digits):
    cell = f"{row[metric]:.{digits}f} ({row[f'{metric} se']:.{digits}f})"
    if not np.isclose(row[metric], best):
        return cell
    significant = test is not None and test["best"] == row["method"] and test["p_value"] < ALPHA
    return f"**{cell}**" + (MARKER if significant else "")


def long_table(results, dataset: str, protocol: str) -> pd.DataFrame:
    """Every (fold, method, metric) test value, with the setting chosen on validation."""
    rows = [
        {
            "dataset": dataset,
            "protocol": protocol,
            "method": r.method,
            "fold": r.fold,
            "params": json.dumps(r.params, sort_keys=True),
            "select": r.select,
            "validation": r.validation,
            "fit_seconds": r.fit_seconds,
            "metric": m,
            "value": v,
            "stderr_users": r.test_stderr[m],
        }
        for r in results
        for m, v in r.test.items()
    ]
    return pd.DataFrame(rows)


def tuning_table(results) -> pd.DataFrame:
    """Every setting tried by the two-level tuning, per (method, fold), marking the chosen one."""
    rows = [
        {
            "method": r.method,
            "fold": r.fold,
            "level": t["level"],
            "params": json.dumps(t["params"], sort_keys=True),
            "select": r.select,
            "validation": t["validation"],
            "fit_seconds": t["fit_seconds"],
            "chosen": t["params"] == r.params,
        }
        for r in results
        for t in r.trials
    ]
    return pd.DataFrame(
        rows, columns=["method", "fold", "level", "params", "select", "validation", "fit_seconds", "chosen"]
    )


def error_caption(folds: int) -> str:
    """What the ``±`` / parenthesised figure of the tables and charts is, for ``folds`` folds."""
    if folds > 1:
        return f"standard error over {folds} folds"
    return "standard error over the test users of the single fold"


#: Colours of the charts: the best mean and the others.
BEST_COLOUR, OTHER_COLOUR = "tab:orange", "tab:blue"


def plot_metric(summary: pd.DataFrame, metric: str, path, title: str = "", error: str = "standard error") -> Path:
    """Bar chart of one metric's means with ``error`` bars, as PNG (:func:`metric_figure`)."""
    metric_figure(summary, metric, title, error).savefig(path, dpi=110)
    return Path(path)


def metric_figure(summary: pd.DataFrame, metric: str, title: str = "", error: str = "standard error"):
    """The matplotlib figure of :func:`plot_metric`.

    The y-axis starts at 0 (bar lengths compare), each bar is labelled with its mean, the best mean
    is highlighted and a legend says what the colours and error bars are; the title is wrapped to
    the figure's width (matplotlib's object API on an Agg canvas: no pyplot state, no display).
    """
    rows = summary.dropna(subset=[metric])
    means, errors = rows[metric].to_numpy(), rows[f"{metric} se"].fillna(0).to_numpy()
    best = np.isclose(means, means.max()) if len(means) else np.zeros(0, bool)
    width = max(5.0, 0.45 * len(rows) + 1.5)
    fig = Figure(figsize=(width, 4.4))
    FigureCanvasAgg(fig)  # rendered by Agg: PNG files, no display
    ax = fig.subplots()
    x = np.arange(len(rows))
    ax.bar(x, means, yerr=errors, color=np.where(best, BEST_COLOUR, OTHER_COLOUR), capsize=3)
    top = float((means + errors).max()) if len(means) else 1.0
    ax.set_ylim(0.0, top * 1.05 if top > 0 else 1.0)
    for xi, v in zip(x, means):  # the value inside the bar, clear of the error bar
        ax.text(xi, 0.02 * top, f"{v:.3f}", rotation=90, ha="center", va="bottom", fontsize=7, color="white")
    ax.set_xticks(x, rows["method"], rotation=60, ha="right")
    ax.set_ylabel(f"test {metric} (axis from 0)")
    handles = [Patch(color=BEST_COLOUR, label="best mean"), Patch(color=OTHER_COLOUR, label="other methods")]
    fig.legend(
        handles=handles, loc="lower center", ncol=2, fontsize=7, frameon=False,
        title=f"bars: mean; error bars: {error}", title_fontsize=7,
    )  # fmt: skip
    chars = int(width * 72 / (0.6 * 9))  # characters of a 9-pt title that fit the figure
    lines = [textwrap.fill(line, chars, break_on_hyphens=False) for line in (title or metric).split("\n")]
    ax.set_title("\n".join(lines), fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 1))  # the bottom tenth holds the legend
    return fig


def write_outputs(out, experiment, summary: pd.DataFrame, tests: dict, table: str, meta: dict, metrics) -> list[Path]:
    """Write into ``out``: ``table.md``, ``summary.csv``, ``wilcoxon.csv``, ``summary.json`` (meta,
    summary, tests, chosen settings per fold, skipped units), ``results.csv`` (long), ``tuning.csv``
    and one ``<metric>.png`` bar chart per metric (``@`` written ``_at_``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = experiment.results
    names = ("table.md", "summary.csv", "summary.json", "results.csv", "tuning.csv", "wilcoxon.csv")
    paths = [out / name for name in names]
    title = f"{meta['dataset']}, {meta['protocol']} protocol, {meta['folds']} fold(s), {meta['budget']} budget"
    error = error_caption(meta["folds"])
    paths[0].write_text(f"{title}: mean ({error})\n\n{table}\n")
    summary.to_csv(paths[1], index=False)
    params = {}
    for r in results:
        params.setdefault(r.method, {})[str(r.fold)] = r.params
    payload = {
        "meta": meta,
        "summary": summary.replace({np.nan: None}).to_dict(orient="records"),
        "wilcoxon": tests,
        "params": params,
        "skipped": [vars(s) for s in experiment.skipped],
    }
    paths[2].write_text(json.dumps(payload, indent=2, default=float) + "\n")
    long_table(results, meta["dataset"], meta["protocol"]).to_csv(paths[3], index=False)
    tuning_table(results).to_csv(paths[4], index=False)
    pd.DataFrame(
        [{"metric": m, **t} for m, t in tests.items()], columns=["metric", "best", "runner_up", "p_value", "n_pairs"]
    ).to_csv(paths[5], index=False)
    for m in metrics:
        paths.append(plot_metric(summary, m, out / f"{m.replace('@', '_at_')}.png", f"{m}\n{title}", error))
    return paths
