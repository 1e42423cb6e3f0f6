"""Throughput under real conditions: batch serving against implicit, small calls, shared machines.

Sections (``--only``, default all), each printing our time next to its peer's, measured in the
same run (median of ``--runs`` interleaved runs after a warm-up call; wall and process CPU):

* ``knn`` -- gowalla (whole matrix), item-p with k = 100 against implicit's
  ``CosineRecommender(K=100)``: ``recommend`` of every user (N = 10, liked items filtered) in one
  batch call, ``similar_items`` of every item (N = 10), and evaluation: our full-ranking
  ``evaluate`` of a 80/20 split against ``implicit.evaluation.ranking_metrics_at_k`` (K = 10,
  top-10 metrics only: less work than ranking every item).
* ``als`` -- ``recommend`` of every user of gowalla (N = 10, liked filtered) by our ``ALS`` against
  implicit's own batch ``recommend`` with the same 64 factors.
* ``serve`` -- users/s of ``EASE`` ``recommend`` (every user, N = 10) on movielens-1m-implicit
  (FEBR's serving is ``bench_febr.py``'s).
* ``serial`` -- the row kernels that run serially on small calls (:mod:`recsys_ltr._parallel`):
  ItemKNN(k=50) fit, ``recommend`` of every user and ``evaluate`` on movielens-100k, lastfm-2k and
  movielens-1m-implicit, each forced serial and forced parallel, with the call's work units, the
  serial seconds per unit (the kernels' ``seconds_per_unit``) and the version the call picks.

``--contention`` runs a CPU-bound competitor (one process spinning a Python loop) for the whole
benchmark, as on a shared server.  The first contact (the README's tour in a fresh process) is timed
against an earlier version of the code by ``bench_regression.py --only tour``.

    NUMBA_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_throughput.py [--contention] [--runs 3]
        [--only knn,als,serve,serial]
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse
import multiprocessing
from pathlib import Path

import numpy as np
from _timing import timed

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("knn", "als", "serve", "serial")


def _spin():
    while True:
        pass


def row(what, ours, peer, peer_name):
    print(
        f"| {what} | {ours[0]:.2f} ({ours[1]:.2f}) | {peer[0]:.2f} ({peer[1]:.2f}) | {peer_name} | "
        f"{ours[0] / peer[0]:.2f} |",
        flush=True,
    )


def header():
    print("| operation | ours: wall s (CPU s) | peer: wall s (CPU s) | peer | ratio (wall) |\n|---|---:|---:|---|---:|")


def gowalla_split():
    from recsys_ltr import datasets, split

    X = datasets.load("gowalla").matrix.tocsr()
    train, _, test = split.holdout(X, val=0.0, test=0.2, random_state=0)
    return X, train.tocsr(), test.tocsr()


def bench_knn(runs):
    from implicit.evaluation import ranking_metrics_at_k
    from implicit.nearest_neighbours import CosineRecommender

    from recsys_ltr.metrics import evaluate
    from recsys_ltr.models import ItemKNN

    X, train, test = gowalla_split()
    users, items = np.arange(X.shape[0]), np.arange(X.shape[1])
    ours, peer = ItemKNN(k=100).fit(X), CosineRecommender(K=100)
    peer.fit(X, show_progress=False)
    row(
        "recommend(all users, N=10)",
        timed(lambda: ours.recommend(users, X, N=10), runs, warmup=True),
        timed(lambda: peer.recommend(users, X, N=10), runs, warmup=True),
        "implicit CosineRecommender",
    )
    row(
        "similar_items(all items, N=10)",
        timed(lambda: ours.similar_items(items, N=10), runs, warmup=True),
        timed(lambda: peer.similar_items(items, N=10), runs, warmup=True),
        "implicit CosineRecommender",
    )
    ours_t, peer_t = ItemKNN(k=100).fit(train), CosineRecommender(K=100)
    peer_t.fit(train, show_progress=False)
    row(
        "evaluate (ours: every item ranked, 8 metrics)",
        timed(lambda: evaluate(ours_t, train, test, k=10), runs, warmup=True),
        timed(lambda: ranking_metrics_at_k(peer_t, train, test, K=10, show_progress=False), runs, warmup=True),
        "implicit ranking_metrics_at_k (K=10)",
    )


def bench_als(runs):
    from implicit.cpu.als import AlternatingLeastSquares

    from recsys_ltr.models import ALS

    X, _, _ = gowalla_split()
    users = np.arange(X.shape[0])
    ours = ALS(factors=64, iterations=15, random_state=0).fit(X)
    peer = AlternatingLeastSquares(factors=64, iterations=15, random_state=0)
    peer.user_factors = ours.user_factors_.astype(np.float32)  # the same model, implicit's dtype
    peer.item_factors = ours.item_factors_.astype(np.float32)
    row(
        "ALS recommend(all users, N=10)",
        timed(lambda: ours.recommend(users, X, N=10), runs, warmup=True),
        timed(lambda: peer.recommend(users, X, N=10), runs, warmup=True),
        "implicit ALS batch recommend",
    )


def bench_serve(runs):
    from recsys_ltr import datasets, split
    from recsys_ltr.models import EASE

    X = datasets.load("movielens-1m-implicit").matrix.tocsr()
    train = split.holdout(X, val=0.1, test=0.2, random_state=0)[0]
    users = np.arange(X.shape[0])
    for name, model in (("EASE", EASE(regularization=500).fit(train)),):
        wall, cpu, _ = timed(lambda m=model: m.recommend(users, train, N=10), runs, warmup=True)
        print(
            f"| {name} recommend, movielens-1m-implicit | {wall:.2f} ({cpu:.2f}) | {len(users) / wall:,.0f} users/s | | |"
        )


def bench_serial(runs):
    from recsys_ltr import _parallel, datasets, split
    from recsys_ltr.metrics import evaluate
    from recsys_ltr.models import ItemKNN

    seen, default = [], _parallel.SERIAL_SECONDS
    call = _parallel.RowKernel.__call__
    _parallel.RowKernel.__call__ = lambda kernel, *args, work, calls=1: (
        seen.append((kernel, work * calls)) or call(kernel, *args, work=work, calls=calls)
    )
    print(
        "\n| call | serial s | parallel s | serial / parallel | work units | serial ns / unit | runs |\n|---|---:|---:|---:|---:|---:|---|"
    )
    try:
        for name in ("movielens-100k", "lastfm-2k", "movielens-1m-implicit"):
            train, val, test = split.holdout(datasets.load(name).matrix, val=0.1, test=0.2, random_state=0)
            model = ItemKNN(k=50).fit(train)
            users = np.arange(train.shape[0])
            for what, fn in (
                ("ItemKNN(k=50).fit", lambda: ItemKNN(k=50).fit(train)),
                ("recommend(every user, N=10)", lambda: model.recommend(users, train, N=10)),
                ("evaluate", lambda: evaluate(model, train, test, exclude=val, k=10)),
            ):
                seen.clear()
                fn()
                kernel, work = max(seen, key=lambda c: c[1])
                times = {}
                for version, limit in (("serial", np.inf), ("parallel", 0.0)):
                    _parallel.SERIAL_SECONDS = limit
                    times[version] = timed(fn, runs, warmup=True)[0]
                _parallel.SERIAL_SECONDS = default
                picked = "serial" if kernel.runs_serially(work) else "parallel"
                print(
                    f"| {what}, {name} | {times['serial']:.4f} | {times['parallel']:.4f} | "
                    f"{times['serial'] / times['parallel']:.2f} | {work:.3g} | {1e9 * times['serial'] / work:.2f} | "
                    f"{picked} |",
                    flush=True,
                )
    finally:
        _parallel.RowKernel.__call__ = call


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--contention", action="store_true", help="run a CPU-bound competitor process throughout")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    args = parser.parse_args()
    competitor = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True) if args.contention else None
    if competitor is not None:
        competitor.start()
    print(
        f"threads: {os.environ['NUMBA_NUM_THREADS']}; contention: {'one CPU-bound process' if competitor else 'none'}"
    )
    sections = args.only.split(",")
    if set(sections) - {"serial"}:
        header()
    try:
        for section in sections:
            globals()[f"bench_{section}"](args.runs)
    finally:
        if competitor is not None:
            competitor.terminate()


if __name__ == "__main__":
    main()
