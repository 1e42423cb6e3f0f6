"""Neighbourhood toolkit benchmark (issue 3, sec. 5): speed against peers, and quality sanity.

1. Cosine item-item KNN, k = 100, on movielens-1m-implicit and gowalla (whole matrix), 2 threads,
   median of ``--runs`` interleaved runs of

   * ``recsys_ltr``: ``neighbors.cosine_knn(X, 100)`` (rows sorted, self excluded);
   * ``implicit``: ``implicit.nearest_neighbours.CosineRecommender(K=100).fit(X)``;
   * ``sparse_dot_topn``: ``sp_matmul_topn(A, A.T, top_n=101, sort=True)`` with ``A`` the
     L2-normalised item vectors (101: the item itself comes first), normalisation included.

   Wall-clock and process CPU time are both reported: on a shared machine CPU time is the
   steadier figure.  The mean overlap of our neighbour lists with implicit's checks the work is
   the same.
2. SLIM (``k=None``) and fsSLIM (``k=100``) fit time on movielens-1m-implicit (train split).
3. Evaluation time of item-p (k = 100) on gowalla: ``metrics.evaluate`` on the test split.
4. Quality sanity, one fold (``split.holdout(X, val=0.1, test=0.2, random_state=0)``): test ADG, REC@10,
   MAP and NDCG of item-p, user-p, KUNN and SLIM (fsSLIM) on movielens-100k,
   movielens-1m-implicit and lastfm-2k, the neighbourhood size chosen on validation ADG.
5. RP3β fit (``models.RP3beta(k=100)``) against item-p's fit (``models.ItemKNN(k=100)``) on
   movielens-1m-implicit and gowalla (whole matrix), median of ``--runs`` interleaved runs.

    NUMBA_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_neighbors.py [--runs 3] [--skip-quality]
        [--only knn,slim,eval,rp3beta,quality]
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse
import time
import warnings

import numpy as np
from _timing import timed

from recsys_ltr import datasets, split
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import KUNN, SLIM, ItemKNN, RP3beta, UserKNN
from recsys_ltr.neighbors import cosine_knn

THREADS = 2
K = 100
GRID = (10, 20, 50, 100, 200, 500)
SLIM_GRID = (20, 50, 100)
QUALITY_SETS = ("movielens-100k", "movielens-1m-implicit", "lastfm-2k")
TEST_METRICS = ("ADG", "REC@10", "MAP", "NDCG")


def feedback(name):
    return datasets.load(name).matrix.tocsr()


def knn_peers(X):
    """The three implementations, each returning an items x items neighbourhood matrix."""
    from implicit.nearest_neighbours import CosineRecommender
    from sklearn.preprocessing import normalize
    from sparse_dot_topn import sp_matmul_topn

    Xf = X.astype(np.float32)

    def ours():
        return cosine_knn(X, K, num_threads=THREADS)

    def implicit_knn():
        model = CosineRecommender(K=K, num_threads=THREADS)
        model.fit(Xf, show_progress=False)
        return model.similarity

    def sdt():
        A = normalize(X.T.tocsr())
        return sp_matmul_topn(A, A.T.tocsr(), top_n=K + 1, sort=True, n_threads=THREADS)

    return {"recsys_ltr": ours, "implicit": implicit_knn, "sparse_dot_topn": sdt}


def overlap(S, T):
    """Mean over rows of |ours & theirs| / |ours| (self removed from theirs)."""
    S, T = S.tocsr(), T.tocsr()
    fractions = []
    for i in range(S.shape[0]):
        ours = set(S.indices[S.indptr[i] : S.indptr[i + 1]].tolist())
        if ours:
            theirs = set(T.indices[T.indptr[i] : T.indptr[i + 1]].tolist()) - {i}
            fractions.append(len(ours & theirs) / len(ours))
    return float(np.mean(fractions))


def bench_knn(runs):
    print(f"== 1. cosine item KNN, k={K}, {THREADS} threads, median of {runs} runs")
    print(f"{'data set':<24}{'method':<17}{'wall s':>8}{'cpu s':>8}{'wall ratio':>12}{'cpu ratio':>11}{'overlap':>9}")
    for name in ("movielens-1m-implicit", "gowalla"):
        X = feedback(name)
        peers = knn_peers(X)
        peers["recsys_ltr"]()  # numba compilation / cache load
        times = {m: [] for m in peers}
        results = {}
        for _ in range(runs):
            for method, fn in peers.items():
                wall, cpu, results[method] = timed(fn)
                times[method].append((wall, cpu))
        med = {m: np.median(np.array(t), axis=0) for m, t in times.items()}
        for method in peers:
            wall, cpu = med[method]
            ours_wall, ours_cpu = med["recsys_ltr"]
            ov = overlap(results["recsys_ltr"], results[method]) if method != "recsys_ltr" else 1.0
            print(
                f"{name:<24}{method:<17}{wall:8.2f}{cpu:8.2f}{wall / ours_wall:11.2f}x{cpu / ours_cpu:10.2f}x{ov:9.3f}"
            )
    print("   (ratio = peer time / our time: > 1 means we are faster)")


def bench_slim(runs):
    print(f"\n== 2. SLIM fit time, movielens-1m-implicit train split, {THREADS} threads, median of {runs} runs")
    train, _, _ = split.holdout(feedback("movielens-1m-implicit"), val=0.1, test=0.2, random_state=0)
    for label, k in (("fsSLIM k=100", 100), ("SLIM (full)", None)):
        walls = []
        for _ in range(runs):
            wall, _, model = timed(lambda: SLIM(k=k, num_threads=THREADS).fit(train))
            walls.append(wall)
        print(f"{label:<14} {np.median(walls):7.2f} s   nnz(W) = {model.W_.nnz:,}")


def bench_eval(runs):
    print(f"\n== 3. evaluation of item-p (k={K}) on gowalla test split, {THREADS} threads, median of {runs} runs")
    train, val, test = split.holdout(feedback("gowalla"), val=0.1, test=0.2, random_state=0)
    fit_wall, _, model = timed(lambda: ItemKNN(k=K, num_threads=THREADS).fit(train))
    evaluate(model, train, test, exclude=val, users=np.arange(100), num_threads=THREADS)  # compile
    walls = []
    for _ in range(runs):
        wall, _, res = timed(lambda: evaluate(model, train, test, exclude=val, num_threads=THREADS))
        walls.append(wall)
    n = len(res.users)
    print(
        f"fit {fit_wall:.2f} s; evaluate {np.median(walls):.2f} s for {n:,} users "
        f"({n / np.median(walls):,.0f} users/s; all 8 metrics, full ranking of {train.shape[1]:,} items)"
    )


def bench_rp3beta(runs):
    print(f"\n== 5. RP3beta fit vs ItemKNN fit, k={K}, whole matrix, {THREADS} threads, median of {runs} runs")
    print(f"{'data set':<24}{'model':<10}{'wall s':>8}{'cpu s':>8}{'wall ratio':>12}{'cpu ratio':>11}")
    fits = {"ItemKNN": lambda: ItemKNN(k=K, num_threads=THREADS), "RP3beta": lambda: RP3beta(k=K, num_threads=THREADS)}
    for name in ("movielens-1m-implicit", "gowalla"):
        X = feedback(name)
        times = {label: [] for label in fits}
        for _ in range(runs + 1):  # the first round compiles / loads the numba cache
            for label, make in fits.items():
                times[label].append(timed(lambda make=make: make().fit(X))[:2])
        med = {label: np.median(np.array(t[1:]), axis=0) for label, t in times.items()}
        for label in fits:
            wall, cpu = med[label]
            print(
                f"{name:<24}{label:<10}{wall:8.2f}{cpu:8.2f}"
                f"{wall / med['ItemKNN'][0]:11.2f}x{cpu / med['ItemKNN'][1]:10.2f}x"
            )
    print("   (ratio = time / ItemKNN's time)")


def tune(make, grid, train, val, refit):
    """Best model on validation ADG over ``grid``; KNN models truncate one fit (``with_k``)."""
    best = None
    big = None if refit else make(max(grid)).fit(train)
    for k in grid:
        model = make(k).fit(train) if refit else big.with_k(k)
        adg = evaluate(model, train, val, metrics=("ADG",), num_threads=THREADS)["ADG"]
        if best is None or adg > best[0]:
            best = (adg, k, model)
    return best


def bench_quality():
    print("\n== 4. quality sanity, one fold (holdout val=0.1 test=0.2 seed=0), k chosen on validation ADG")
    print(
        f"{'data set':<24}{'model':<8}{'k':>5}{'val ADG':>9}"
        + "".join(f"{m:>9}" for m in TEST_METRICS)
        + f"{'time s':>8}"
    )
    models = {
        "item-p": (lambda k: ItemKNN(k=k, num_threads=THREADS), False, "items"),
        "user-p": (lambda k: UserKNN(k=k, num_threads=THREADS), False, "users"),
        "KUNN": (lambda k: KUNN(k=k, num_threads=THREADS), False, "both"),
        "SLIM": (lambda k: SLIM(k=k, num_threads=THREADS), True, "items"),
    }
    for name in QUALITY_SETS:
        train, val, test = split.holdout(feedback(name), val=0.1, test=0.2, random_state=0)
        limits = {"items": train.shape[1] - 1, "users": train.shape[0] - 1}
        limits["both"] = min(limits.values())
        for label, (make, refit, side) in models.items():
            grid = tuple(k for k in (SLIM_GRID if label == "SLIM" else GRID) if k <= limits[side])
            start = time.perf_counter()
            adg, k, model = tune(make, grid, train, val, refit)
            res = evaluate(model, train, test, exclude=val, metrics=TEST_METRICS, num_threads=THREADS)
            took = time.perf_counter() - start
            print(
                f"{name:<24}{label:<8}{k:>5}{adg:9.4f}"
                + "".join(f"{res[m]:9.4f}" for m in TEST_METRICS)
                + f"{took:8.1f}"
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", module="implicit")
    only = args.only.split(",")
    if unknown := set(only) - set(SECTIONS):
        parser.error(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    for section, run in SECTIONS.items():
        if section in only and not (section == "quality" and args.skip_quality):
            run(args.runs)


SECTIONS = {
    "knn": bench_knn,
    "slim": bench_slim,
    "eval": bench_eval,
    "quality": lambda runs: bench_quality(),
    "rp3beta": bench_rp3beta,
}

if __name__ == "__main__":
    main()
