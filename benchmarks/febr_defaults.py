"""Does ``FEBR().fit(X)``, the call a user makes, beat the one-line alternatives?

For each data set and seed: ``split.holdout(X, val=0.1, test=0.2, random_state=seed)``; ``ALS()``,
``EASE()``, ``RP3beta()`` and ``FEBR(random_state=seed)`` are fitted on the training part at their
defaults (no validation given: FEBR carves its own); every model and each of FEBR's fitted bases is
evaluated on the test part with the validation positives excluded.  Reported per data set: the
mean over seeds of test ADG and MAP, FEBR's fit seconds, and the paired Wilcoxon signed-rank test
of FEBR against each alternative and against its best base (per-user values pooled over the seeds;
``+`` FEBR significantly above at p < .05, ``-`` significantly below, ``=`` neither).

    NUMBA_NUM_THREADS=2 RECSYS_LTR_DATA=../shared/datasets python benchmarks/febr_defaults.py \\
        [--datasets movielens-1m-implicit,lastfm-2k,msweb,citeulike-a,movielens-100k] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import wilcoxon

from recsys_ltr import datasets, split
from recsys_ltr.febr import FEBR
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, EASE, RP3beta

DATASETS = ("movielens-1m-implicit", "lastfm-2k", "msweb", "citeulike-a", "movielens-100k")
ANCHORS = {"ALS()": lambda s: ALS(random_state=s), "EASE()": lambda s: EASE(), "RP3beta()": lambda s: RP3beta()}


def per_user(model, train, test, val):
    result = evaluate(model, train, test, exclude=val, metrics=["ADG", "MAP"], show_progress=False)
    return result.per_user["ADG"], result.per_user["MAP"]


def sign(febr, other):
    """``+`` / ``-`` / ``=``: FEBR significantly above / below ``other`` (paired Wilcoxon, p < .05)."""
    diff = febr - other
    if not np.any(diff):
        return "=", 1.0
    p = float(wilcoxon(diff).pvalue)
    return ("+" if diff.mean() > 0 else "-") if p < 0.05 else "=", p


def run(name, seeds):
    X = datasets.load(name).matrix
    scores, seconds = {}, []
    for seed in seeds:
        train, val, test = split.holdout(X, val=0.1, test=0.2, random_state=seed)
        for label, make in ANCHORS.items():
            scores.setdefault(label, []).append(per_user(make(seed).fit(train), train, test, val))
        t = time.perf_counter()
        febr = FEBR(random_state=seed, show_progress=False).fit(train)
        seconds.append(time.perf_counter() - t)
        scores.setdefault("FEBR()", []).append(per_user(febr, train, test, val))
        bases = [per_user(b, train, test, val) for b in febr.bases_]
        best = int(np.argmax([adg.mean() for adg, _ in bases]))
        scores.setdefault("FEBR's best base", []).append(bases[best])
        tail = " + ".join(febr.tail_bases_)
        print(
            f"  {name} seed {seed}: FEBR fit {seconds[-1]:.1f} s, tail {tail} ({febr.tail_gain_}), "
            f"scorer test {febr.stacked_gain_}",
            flush=True,
        )
    pooled = {k: tuple(np.concatenate([v[m] for v in runs]) for m in (0, 1)) for k, runs in scores.items()}
    rows = []
    for label, (adg, map_) in pooled.items():
        cells = [label, f"{adg.mean():.4f}", f"{map_.mean():.4f}"]
        if label != "FEBR()":
            (s_adg, p_adg), (s_map, p_map) = sign(pooled["FEBR()"][0], adg), sign(pooled["FEBR()"][1], map_)
            cells += [f"{s_adg} {p_adg:.2g}", f"{s_map} {p_map:.2g}"]
        else:
            cells += [f"fit {np.median(seconds):.1f} s", ""]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    for name in args.datasets.split(","):
        rows = run(name, seeds)
        print(
            f"\n{name}, seeds {seeds}\n\n| model | test ADG | test MAP | FEBR vs it: ADG | MAP |\n|---|---:|---:|---|---|"
        )
        print("\n".join(rows), flush=True)


if __name__ == "__main__":
    main()
