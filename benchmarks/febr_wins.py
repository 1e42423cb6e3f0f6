"""Does FEBR win?  The best of FEBR-stack / FEBR-rerank against the best other method, per data set
and protocol, from the unit cache of ``python -m recsys_ltr.eval`` runs.

For ADG and MAP: the mean over folds of the best FEBR variant and of the best other method (each
tuned by the same CLI run), and a paired Wilcoxon signed-rank test of the two over the test users
pooled over folds (the CLI's own test compares the best method with the runner-up, which is often
the other FEBR variant).  Run after the CLI commands of ``eval/results/README.md``::

    python benchmarks/febr_wins.py [--results eval/results] [--datasets movielens-100k,...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.stats import wilcoxon

from recsys_ltr.eval.cache import UnitCache
from recsys_ltr.eval.results import FoldResult

FEBR = ("FEBR-stack", "FEBR-rerank")
METRICS = ("ADG", "MAP")


def load_units(cache: Path, protocol: str) -> dict[str, dict[int, FoldResult]]:
    """``{method: {fold: result}}`` of the finished units of one protocol, read by the cache's own
    reader (a novelty unit's second row, "ALS (top-100 last)", is a method of its own)."""
    units: dict[str, dict[int, FoldResult]] = {}
    for result in UnitCache.finished(cache, protocol):
        for row in result.rows():
            units.setdefault(row.method, {})[row.fold] = row
    return units


def compare(units, metric):
    """(best other, its mean, best FEBR, its mean, Wilcoxon p) for ``metric``."""
    mean = {m: np.mean([r.test[metric] for r in folds.values()]) for m, folds in units.items()}
    other = max((m for m in units if m not in FEBR), key=mean.get)
    febr = max((m for m in FEBR if m in units), key=mean.get)
    per_user = [np.concatenate([units[m][f].per_user[metric] for f in sorted(units[m])]) for m in (febr, other)]
    if np.array_equal(*per_user):  # FEBR fell back to the other method on every fold
        return other, mean[other], febr, mean[febr], None
    return other, mean[other], febr, mean[febr], wilcoxon(*per_user).pvalue


def verdict(febr_mean, other_mean, p) -> str:
    """What the row says beside FEBR's mean: identical rankings, a tie (p >= .05), below, or nothing."""
    if p is None:
        return " (identical rankings)"
    if p >= 0.05:
        return " (tied)"
    return " (below)" if febr_mean < other_mean else ""


def p_text(p) -> str:
    """The p column: 1 for identical rankings, a bound where float64 underflows to 0."""
    if p is None:
        return "1"
    return f"{p:.2g}" if p > 0 else "< 1e-300"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("eval/results"))
    parser.add_argument("--datasets", default="movielens-100k,movielens-1m-implicit,lastfm-2k,citeulike-a,msweb")
    args = parser.parse_args()
    print("| data set, protocol | metric | best other | best FEBR | p (FEBR vs other) |\n|---|---|---|---|---:|")
    for dataset in args.datasets.split(","):
        for protocol in ("standard", "novelty"):
            units = load_units(args.results / dataset / "cache", protocol)
            folds = {len(f) for f in units.values()}
            if not any(m in units for m in FEBR) or len(folds) != 1:
                print(f"| {dataset}, {protocol} | | not run (or unfinished) | | |")
                continue
            for metric in METRICS:
                other, o, febr, f, p = compare(units, metric)
                print(
                    f"| {dataset}, {protocol} | {metric} | {other} {o:.4f} | {febr} {f:.4f}{verdict(f, o, p)} | {p_text(p)} |"
                )


if __name__ == "__main__":
    main()
