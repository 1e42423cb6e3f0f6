"""Does ``FEBR().fit(X)``, the call a user makes, beat the one-line alternatives?

For each data set and seed: ``split.holdout(X, val=0.1, test=0.2, random_state=seed)``; ``ALS()``,
``EASE()``, ``RP3beta()``, ``GFCF()``, ``BSPM()``, ``ChebyCF()`` and ``FEBR(random_state=seed)`` are
fitted on the training part at their defaults (no validation given: FEBR carves its own); every
model and each of FEBR's fitted bases is evaluated on the test part with the validation positives
excluded.  Reported
per data set and metric (ADG, MAP, Recall@20, NDCG@20): the mean over seeds of the test values,
FEBR's fit seconds (wall and CPU), and the paired Wilcoxon signed-rank test of FEBR against each
alternative and against its best base by that metric (per-user values pooled over the seeds; ``+``
FEBR significantly above at p < .05, ``-`` significantly below, ``=`` neither).

    NUMBA_NUM_THREADS=2 RECSYS_LTR_DATA=../shared/datasets python benchmarks/febr_defaults.py \\
        [--datasets movielens-1m-implicit,lastfm-2k,msweb,citeulike-a,movielens-100k] [--seeds 0,1,2] \\
        [--febr-params '{"validation_metric": "NDCG@20"}']
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy.stats import wilcoxon

from recsys_ltr import datasets, split
from recsys_ltr.febr import FEBR
from recsys_ltr.febr.bases import fit_on, resolve_bases
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, BSPM, EASE, GFCF, ChebyCF, RP3beta

DATASETS = ("movielens-1m-implicit", "lastfm-2k", "msweb", "citeulike-a", "movielens-100k")
METRICS = ("ADG", "MAP", "REC@20", "NDCG@20")
ANCHORS = {
    "ALS()": lambda s: ALS(random_state=s),
    "EASE()": lambda s: EASE(),
    "RP3beta()": lambda s: RP3beta(),
    "GFCF()": lambda s: GFCF(),
    "BSPM()": lambda s: BSPM(),
    "ChebyCF()": lambda s: ChebyCF(),
}
BEST_BASE = "FEBR's best base"


def per_user(model, train, test, val):
    result = evaluate(model, train, test, exclude=val, metrics=list(METRICS), show_progress=False)
    return {m: result.per_user[m] for m in METRICS}


def sign(febr, other):
    """``+`` / ``-`` / ``=``: FEBR significantly above / below ``other`` (paired Wilcoxon, p < .05)."""
    diff = febr - other
    if not np.any(diff):
        return "=", 1.0
    p = float(wilcoxon(diff).pvalue)
    return ("+" if diff.mean() > 0 else "-") if p < 0.05 else "=", p


def run(name, seeds, febr_params):
    X = datasets.load(name).matrix
    scores, seconds = {}, []
    for seed in seeds:
        train, val, test = split.holdout(X, val=0.1, test=0.2, random_state=seed)
        for label, make in ANCHORS.items():
            try:
                scores.setdefault(label, []).append(per_user(make(seed).fit(train), train, test, val))
            except ValueError as refused:  # e.g. BSPM()'s 448 (ChebyCF()'s 512) singular vectors of 285 items (msweb)
                print(f"  {name} seed {seed}: {label} refuses the data: {refused}", flush=True)
                scores.pop(label, None)
        wall, cpu = time.perf_counter(), time.process_time()
        febr = FEBR(random_state=seed, show_progress=False, **febr_params).fit(train)
        seconds.append((time.perf_counter() - wall, time.process_time() - cpu))
        scores.setdefault("FEBR()", []).append(per_user(febr, train, test, val))
        names, specs = resolve_bases(febr.bases, train)  # every base, also those a fallen-back FEBR dropped
        bases = [per_user(b, train, test, val) for b in fit_on(specs, names, train, stage=lambda message: None)]
        scores.setdefault(BEST_BASE, []).append(  # per metric, the base best on this seed's test part
            {m: bases[int(np.argmax([b[m].mean() for b in bases]))][m] for m in METRICS}
        )
        best = {m: names[int(np.argmax([b[m].mean() for b in bases]))] for m in METRICS}
        print(
            f"  {name} seed {seed}: FEBR fit {seconds[-1][0]:.1f} s ({seconds[-1][1]:.1f} CPU s), tail "
            f"{' + '.join(febr.tail_bases_)} ({febr.tail_gain_}), scorer test {febr.stacked_gain_}; best bases {best}",
            flush=True,
        )
    runs_of_every_seed = {k: runs for k, runs in scores.items() if len(runs) == len(seeds)}
    pooled = {k: {m: np.concatenate([v[m] for v in runs]) for m in METRICS} for k, runs in runs_of_every_seed.items()}
    rows = []
    for label, values in pooled.items():
        cells = [label]
        for m in METRICS:
            cell = f"{values[m].mean():.4f}"
            if label != "FEBR()":
                s, p = sign(pooled["FEBR()"][m], values[m])
                cell += f" ({s} {p:.2g})"
            cells.append(cell)
        if label == "FEBR()":
            wall, cpu = np.median(seconds, axis=0)
            cells.append(f"fit {wall:.1f} s, {cpu:.1f} CPU s")
        else:
            cells.append("")
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--febr-params", default="{}", help="FEBR's parameters besides its defaults (JSON)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    febr_params = json.loads(args.febr_params)
    for name in args.datasets.split(","):
        rows = run(name, seeds, febr_params)
        header = " | ".join(f"{m} (FEBR vs it)" for m in METRICS)
        print(f"\n{name}, seeds {seeds}, FEBR {febr_params}\n\n| model | {header} | |\n|---|" + "---:|" * 4 + "---|")
        print("\n".join(rows), flush=True)


if __name__ == "__main__":
    main()
