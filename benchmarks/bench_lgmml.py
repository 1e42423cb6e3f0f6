"""L-GMML vs a global GMML ranker vs LightGBM's LambdaMART (LGBMRanker) on LETOR 4.0 MQ2008.

Five folds (train S_f..S_{f+2}, validation S_{f+3}, test S_{f+4}); per fold every method is
trained on the training part for each configuration of a small grid, and the model with the best
validation NDCG@10 is scored on the test part.  Reported: mean ± std over folds of NDCG@1,3,5,10 and MAP (queries
without a relevant document are left out, see ``recsys_ltr.query_metrics``), the median fit time
over folds, and the median (over 5 repeats) scoring time per test document.

Methods
  L-GMML shared      one Φ for every query (the package default), grid on n_metrics x margin
  L-GMML per-query   Φ_q per training query (Algorithm 2 literally), mean Φ for test queries
  L-GMML candidates  shared Φ, anchors moved into each test query's candidate set
  GMML global        su2017 Fig. 5's global GMML: L-GMML with m = 1 and every query pooled
  LGBMRanker         lambdarank, grid num_leaves {7, 31} x n_estimators {100, 300}, lr 0.05
  best feature       baseline: the single feature (or its negation) with the best training
                     NDCG@10, used as the score

Queries without any relevant document have no defined NDCG/AP and are DROPPED from every mean
(MQ2008 has many); the script prints how many test queries each fold drops.

Run:  NUMBA_NUM_THREADS=2 python benchmarks/bench_lgmml.py [--folds 1 2 ...] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from recsys_ltr.datasets.letor import load_letor
from recsys_ltr.ltr.lgmml import LGMML
from recsys_ltr.query_metrics import ranking_report

KEYS = ("NDCG@1", "NDCG@3", "NDCG@5", "NDCG@10", "MAP")
THREADS = 2


def _lgmml(**kw):
    return lambda seed: LGMML(num_threads=THREADS, random_state=seed, **kw)


LGMML_GRID = [dict(n_metrics=m, margin=z) for m, z in itertools.product((20, 50), (0.1, 1.0))]
METHODS = {
    "L-GMML shared": (LGMML_GRID, lambda p: _lgmml(**p)),
    "L-GMML per-query": (LGMML_GRID, lambda p: _lgmml(phi_mode="per_query", **p)),
    "L-GMML candidates": (LGMML_GRID, lambda p: _lgmml(test_anchors="candidates", **p)),
    "GMML global": ([{}], lambda p: _lgmml(n_metrics=1, queries_per_metric=10**6, n_epochs=0)),
    "LGBMRanker": (
        [dict(num_leaves=nl, n_estimators=ne) for nl, ne in itertools.product((7, 31), (100, 300))],
        lambda p: lambda seed: _LGBM(random_state=seed, **p),
    ),
    "best feature": ([{}], lambda p: lambda seed: _BestFeature()),
}


class _BestFeature:
    """Baseline: rank by the one feature (either sign) with the best training NDCG@10."""

    def fit(self, X, y, qid):
        best = max(
            (
                (ranking_report(y, sign * X[:, f], qid)["NDCG@10"], f, sign)
                for f in range(X.shape[1])
                for sign in (1.0, -1.0)
            ),
            key=lambda t: t[0],
        )
        _, self.feature, self.sign = best
        return self

    def predict(self, X, qid):
        return self.sign * X[:, self.feature]


class _LGBM:
    """LGBMRanker behind the ``fit(X, y, qid)`` / ``predict(X, qid)`` interface of LGMML."""

    def __init__(self, **params):
        import lightgbm

        self.model = lightgbm.LGBMRanker(
            objective="lambdarank", learning_rate=0.05, n_jobs=THREADS, verbose=-1, **params
        )

    def fit(self, X, y, qid):
        _, first, counts = np.unique(qid, return_index=True, return_counts=True)
        self.model.fit(X, y, group=counts[np.argsort(first)])  # rows of a query are contiguous
        return self

    def predict(self, X, qid):
        return self.model.predict(X)


def _timed_fit(make, data):
    t0 = time.perf_counter()
    model = make().fit(*data)
    return model, time.perf_counter() - t0


def _score_time(model, X, qid, repeats=5):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.predict(X, qid)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) / X.shape[0]


def run_fold(fold, seeds):
    data = load_letor("letor-mq2008", fold=fold)
    train, vali, test = data["train"], data["vali"], data["test"]
    test_q = np.unique(test[2])
    with_rel = np.unique(test[2][test[1] > 0])
    print(
        f"fold {fold}: {test_q.size - with_rel.size} of {test_q.size} test queries have no relevant "
        f"document and are dropped from the means",
        flush=True,
    )
    out = {}
    for name, (grid, factory) in METHODS.items():
        for seed in seeds:
            best = None
            for params in grid:
                model, fit_s = _timed_fit(lambda: factory(params)(seed), train)
                v = ranking_report(vali[1], model.predict(vali[0], vali[2]), vali[2])["NDCG@10"]
                if best is None or v > best[0]:
                    best = (v, params, model, fit_s)
            _, params, model, fit_s = best
            rep = ranking_report(test[1], model.predict(test[0], test[2]), test[2])
            rep.update(fit_s=fit_s, score_us=1e6 * _score_time(model, test[0], test[2]), params=params)
            out.setdefault(name, []).append(rep)
            print(
                f"fold {fold} seed {seed} {name:18s} NDCG@10 {rep['NDCG@10']:.4f} MAP {rep['MAP']:.4f} "
                f"fit {fit_s:.2f}s {params}",
                flush=True,
            )
    return out


def _warm_up():
    """Compile the numba kernels once so that no fit time includes compilation."""
    rng = np.random.default_rng(0)
    X, y, qid = rng.random((40, 3)), np.tile([2, 1, 0, 0], 10), np.repeat(np.arange(10), 4)
    for kw in ({}, {"phi_mode": "per_query"}, {"test_anchors": "candidates"}):
        LGMML(n_metrics=2, queries_per_metric=2, n_epochs=1, num_threads=THREADS, **kw).fit(X, y, qid).predict(X, qid)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = ap.parse_args()
    _warm_up()
    results = {}
    for fold in args.folds:
        for name, reps in run_fold(fold, args.seeds).items():
            results.setdefault(name, []).extend(reps)

    print(
        f"\nMQ2008, folds {args.folds}, seeds {args.seeds}: test mean ± std over {len(args.folds) * len(args.seeds)} runs"
    )
    print(f"{'method':18s} " + " ".join(f"{k:>15s}" for k in KEYS) + f" {'fit s (med)':>12s} {'score us/doc':>13s}")
    ref = results["LGBMRanker"]
    for name, reps in results.items():
        cells = [f"{np.mean([r[k] for r in reps]):.4f} ± {np.std([r[k] for r in reps]):.3f}" for k in KEYS]
        fit = np.median([r["fit_s"] for r in reps])
        score = np.median([r["score_us"] for r in reps])
        print(f"{name:18s} " + " ".join(f"{c:>15s}" for c in cells) + f" {fit:12.2f} {score:13.2f}")
    print("\nratio to LGBMRanker (same run): NDCG@10, MAP, fit time, scoring time per document")
    base = {k: np.mean([r[k] for r in ref]) for k in ("NDCG@10", "MAP")}
    bfit, bscore = np.median([r["fit_s"] for r in ref]), np.median([r["score_us"] for r in ref])
    for name, reps in results.items():
        print(
            f"{name:18s} {np.mean([r['NDCG@10'] for r in reps]) / base['NDCG@10']:.3f} "
            f"{np.mean([r['MAP'] for r in reps]) / base['MAP']:.3f} "
            f"{np.median([r['fit_s'] for r in reps]) / bfit:.3f} "
            f"{np.median([r['score_us'] for r in reps]) / bscore:.3f}"
        )


if __name__ == "__main__":
    main()
