"""FEBRi with cosine / KUNN / SLIM affinities next to item-p, SLIM, implicit ALS and BPR (issue 5, sec. 4).

One holdout fold (70/10/20, seed 0) per data set; every method tuned modestly on validation ADG
(grids below; ALS and BPR by the eval CLI's quick two-level grids), then fitted settings reported on test (validation items excluded from candidates).
FEBR (lam = 1e-4, early stopping after 3 evaluations every 100k samples without a better validation
ADG, the initial theta = item-p / SLIM included) is tuned over k, the learning rate and the label
holdout (0: the paper; 0.2: features of training pairs from 80% of each user's positives).  FEBR's
SLIM affinity is the tuned SLIM (fsSLIM, same k, l1, l2): its ``item_affinity_`` reused, or refitted
on the feature part when holdout > 0.

Run::

    NUMBA_NUM_THREADS=2 OMP_NUM_THREADS=2 python benchmarks/quality_febr.py \\
        --datasets movielens-100k movielens-1m-implicit lastfm-2k citeulike-a
"""

from __future__ import annotations

import argparse
import itertools

from recsys_ltr.datasets import load
from recsys_ltr.eval.runner import tune
from recsys_ltr.febr.model import FEBR
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import SLIM, ItemKNN
from recsys_ltr.split import holdout

METRICS = ["ADG", "MAP", "NDCG", "REC@10", "ATOP"]
K_GRID = (20, 50, 100)
FEBR_K_GRID = (50, 100)
THREADS = 2


def candidates(train):
    for k in K_GRID:
        yield "item-p", {"k": k}, lambda k=k: ItemKNN(k=k, num_threads=THREADS).fit(train)
    for k, l1 in itertools.product((20, 50), (0.1, 1.0)):
        yield "SLIM", {"k": k, "l1": l1}, lambda k=k, l1=l1: SLIM(k=k, l1=l1, l2=1.0, num_threads=THREADS).fit(train)


def tuned_anchor(name, train, val):
    """ALS / BPR tuned by ``python -m recsys_ltr.eval``'s two-level quick grids: (val ADG, params, model)."""
    params, model, trials = tune(name, train, val, budget="quick", random_state=0, num_threads=THREADS)
    return max(t["validation_ADG"] for t in trials), params, model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["movielens-100k"])
    parser.add_argument("--iterations", type=int, default=500_000)
    args = parser.parse_args()
    for name in args.datasets:
        train, val, test = holdout(load(name), val=0.1, test=0.2, seed=0)
        best = {}
        for method, params, build in candidates(train):
            scorer = build()
            adg = evaluate(scorer, train, val, metrics=["ADG"], num_threads=THREADS)["ADG"]
            if adg > best.get(method, (-1,))[0]:
                best[method] = (adg, params, scorer)
        for anchor in ("ALS", "BPR"):
            best[anchor] = tuned_anchor(anchor, train, val)
        slim_k, slim_l1 = best["SLIM"][1]["k"], best["SLIM"][1]["l1"]
        for kind in ("cosine", "kunn", "slim"):
            for k, lr, h in itertools.product(FEBR_K_GRID if kind != "slim" else (slim_k,), (1e-3, 1e-2), (0.0, 0.2)):
                affinity, params = kind, None
                if kind == "slim":  # the tuned SLIM: reuse its W, or refit it on the feature part
                    affinity = best["SLIM"][2].item_affinity_ if h == 0 else "slim"
                    params = None if h == 0 else {"l1": slim_l1, "l2": 1.0}
                model = FEBR(
                    affinity=affinity,
                    k=k,
                    lam=1e-4,
                    learning_rate=lr,
                    iterations=args.iterations,
                    early_stopping=3,
                    holdout=h,
                    affinity_params=params,
                    random_state=0,
                    num_threads=THREADS,
                ).fit(train, validation=val)
                adg = max(r["val_adg"] for r in model.history_)
                key = f"FEBRi-{kind}"
                if adg > best.get(key, (-1,))[0]:
                    best[key] = (adg, {"k": k, "lr": lr, "holdout": h, "best_it": model.best_iteration_}, model)
        print(f"\n{name}: test metrics (validation ADG in brackets)")
        print(f"{'method':<14}" + "".join(f"{m:>9}" for m in METRICS) + "  params")
        for method, (vadg, params, scorer) in best.items():
            res = evaluate(scorer, train, test, exclude=val, metrics=METRICS, num_threads=THREADS)
            print(
                f"{method:<14}" + "".join(f"{res[m]:>9.4f}" for m in METRICS) + f"  [{vadg:.4f}] {params}", flush=True
            )


if __name__ == "__main__":
    main()
