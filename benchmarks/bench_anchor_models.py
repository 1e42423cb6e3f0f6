"""Anchor models (issue 6): cost of our wrappers against the libraries they wrap, and quality.

On movielens-1m-implicit (train split of ``split.holdout(X, random_state=0)``), 2 threads, median of
``--runs`` interleaved runs of

1. EASE fit: ``models.EASE(regularization=500)`` (in-place Cholesky ``potrf``/``potri``, one dense n x n
   matrix) against the textbook numpy ``P = inv(G + lam I); B = I - P / diag(P)``;
2. ALS, BPR, LightFM-WARP fit: our wrapper against the bare library fit on the same float32
   matrix (the ratio shows the wrapper's overhead: validation, copy to float64);
3. ALS fold-in of 1000 users (alpha 1 and 10): our float64 numba kernel against implicit's
   ``recalculate_user``;
4. test ADG / REC@10 of the four anchors and popularity on movielens-100k and
   movielens-1m-implicit (default parameters except ``factors=64``, one fold).

    NUMBA_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_anchor_models.py [--runs 3]
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse

import numpy as np
from _timing import timed
from threadpoolctl import threadpool_limits

from recsys_ltr import datasets, split
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, BPR, EASE, LightFMWARP, Popularity

THREADS = 2


def numpy_ease(X, lam):
    G = (X.T @ X).toarray()
    P = np.linalg.inv(G + lam * np.eye(G.shape[0]))
    B = np.eye(G.shape[0]) - P / np.diag(P)[None, :]
    np.fill_diagonal(B, 0.0)
    return B


def implicit_fit(cls, **params):
    def fit(X32):
        with threadpool_limits(1, user_api="blas"):
            cls(num_threads=THREADS, random_state=0, **params).fit(X32, show_progress=False)

    return fit


def lightfm_fit(X):
    from lightfm import LightFM

    LightFM(no_components=64, loss="warp", random_state=0).fit(X.tocoo(), epochs=30, num_threads=THREADS)


def speed(runs):
    from implicit.cpu.als import AlternatingLeastSquares
    from implicit.cpu.bpr import BayesianPersonalizedRanking

    X = datasets.load("movielens-1m-implicit").matrix.tocsr()
    train, _, _ = split.holdout(X, random_state=0)
    X32 = train.astype(np.float32)
    pairs = {
        "EASE fit vs numpy inv": (
            lambda: EASE(regularization=500.0, num_threads=THREADS).fit(train),
            lambda: numpy_ease(train, 500.0),
        ),
        "ALS fit vs implicit": (
            lambda: ALS(num_threads=THREADS).fit(train),
            lambda: implicit_fit(AlternatingLeastSquares, factors=64)(X32),
        ),
        "BPR fit vs implicit": (
            lambda: BPR(num_threads=THREADS).fit(train),
            lambda: implicit_fit(BayesianPersonalizedRanking, factors=64)(X32),
        ),
        "LightFM fit vs lightfm": (lambda: LightFMWARP(num_threads=THREADS).fit(train), lambda: lightfm_fit(train)),
    }
    print(f"movielens-1m-implicit train: {train.shape[0]} users x {train.shape[1]} items, nnz {train.nnz}")
    print(f"{'task':28s} {'ours s':>8s} {'peer s':>8s} {'ours/peer':>9s}")
    for name, (ours, peer) in pairs.items():
        ours(), peer()  # warm-up (numba compilation, caches)
        t_ours, t_peer = [], []
        for _ in range(runs):
            t_ours.append(timed(ours)[0])
            t_peer.append(timed(peer)[0])
        a, b = np.median(t_ours), np.median(t_peer)
        print(f"{name:28s} {a:8.2f} {b:8.2f} {a / b:9.2f}")
    users = np.arange(min(1000, train.shape[0]))  # the stand-in data of the smoke test has fewer
    rows = train[users]
    for alpha in (1.0, 10.0):  # alpha = 1 skips the per-item rank-one updates
        als = ALS(alpha=alpha, num_threads=THREADS).fit(train)
        ref = AlternatingLeastSquares(factors=64, alpha=alpha, num_threads=THREADS)
        ref.item_factors = als.item_factors_.astype(np.float32)
        als._fold_in(rows)  # compile
        a = timed(lambda: als._fold_in(rows), runs)[0]
        with threadpool_limits(1, user_api="blas"):
            b = timed(lambda: ref.recalculate_user(users, rows.astype(np.float32)), runs)[0]
        print(f"{f'ALS fold-in {users.size} users a={alpha:g}':28s} {a:8.3f} {b:8.3f} {a / b:9.2f}")


def quality():
    print(f"\n{'data set':24s} {'model':12s} {'ADG':>7s} {'REC@10':>7s}")
    for name in ("movielens-100k", "movielens-1m-implicit"):
        X = datasets.load(name).matrix.tocsr()
        train, val, test = split.holdout(X, random_state=0)
        for model in (Popularity(), EASE(), ALS(), BPR(), LightFMWARP()):
            res = evaluate(model.fit(train), train, test, exclude=val, metrics=["ADG", "REC@10"])
            print(f"{name:24s} {type(model).__name__:12s} {res['ADG']:7.4f} {res['REC@10']:7.4f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-quality", action="store_true")
    args = parser.parse_args()
    speed(args.runs)
    if not args.skip_quality:
        quality()


if __name__ == "__main__":
    main()
