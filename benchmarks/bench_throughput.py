"""Throughput under real conditions: first contact, batch serving against implicit, shared machines.

Sections (``--only``, default all), each printing our time next to its peer's, measured in the
same run (median of ``--runs`` interleaved runs after a warm-up call; wall and process CPU):

* ``tour`` -- the README's short tour (import, load movielens-100k, split, ``ItemKNN(k=50).fit``,
  one ``recommend``, ``evaluate``) in a fresh process with an empty numba cache, this checkout
  against ``--baseline`` (a git ref checked out into a temporary worktree; default ``ead6bbd``,
  the code when the throughput issue was filed), alternating, median of ``--tour-runs``; and the
  warm ``import recsys_ltr.models`` (median of 5 fresh processes).
* ``knn`` -- gowalla (whole matrix), item-p with k = 100 against implicit's
  ``CosineRecommender(K=100)``: ``recommend`` of every user (N = 10, liked items filtered) in one
  batch call, ``similar_items`` of every item (N = 10), and evaluation: our full-ranking
  ``evaluate`` of a 80/20 split against ``implicit.evaluation.ranking_metrics_at_k`` (K = 10,
  top-10 metrics only: less work than ranking every item).
* ``als`` -- ``recommend`` of every user of gowalla (N = 10, liked filtered) by our ``ALS`` against
  implicit's own batch ``recommend`` with the same 64 factors.
* ``serve`` -- users/s of ``EASE`` and ``FEBR()`` ``recommend`` (every user, N = 10) on
  movielens-1m-implicit.
* ``serial`` -- the row kernels that run serially on small calls (:mod:`recsys_ltr._parallel`):
  ItemKNN(k=50) fit, ``recommend`` of every user and ``evaluate`` on movielens-100k, lastfm-2k and
  movielens-1m-implicit, each forced serial and forced parallel, with the call's work units, the
  serial seconds per unit (the kernels' ``seconds_per_unit``) and the version the call picks.

``--contention`` runs a CPU-bound competitor (one process spinning a Python loop) for the whole
benchmark, as on a shared server.

    NUMBA_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_throughput.py [--contention] [--runs 3]
        [--only tour,knn,als,serve,serial] [--baseline REF]
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("tour", "knn", "als", "serve", "serial")
TOUR = """
import time
c0, t0 = time.process_time(), time.perf_counter()
from recsys_ltr import datasets, split
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ItemKNN
data = datasets.load("movielens-100k")
train, val, test = split.holdout(data.matrix, val=0.1, test=0.2, seed=0)
model = ItemKNN(k=50).fit(train)
model.recommend(0, train[0], N=10)
evaluate(model, train, test, exclude=val, k=10)
print(time.perf_counter() - t0, time.process_time() - c0)
"""
IMPORT = "import time; t = time.perf_counter(); import recsys_ltr.models; print(time.perf_counter() - t, 0.0)"


def _spin():
    while True:
        pass


def timed(fn, runs):
    """Median (wall, CPU) seconds of ``runs`` calls of ``fn`` after a warm-up call, and its result."""
    out = fn()
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return float(np.median(walls)), float(np.median(cpus)), out


def row(what, ours, peer, peer_name):
    print(
        f"| {what} | {ours[0]:.2f} ({ours[1]:.2f}) | {peer[0]:.2f} ({peer[1]:.2f}) | {peer_name} | "
        f"{ours[0] / peer[0]:.2f} |",
        flush=True,
    )


def header():
    print("| operation | ours: wall s (CPU s) | peer: wall s (CPU s) | peer | ratio (wall) |\n|---|---:|---:|---|---:|")


def _fresh_process(code, pythonpath, cold):
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "RECSYS_LTR_COMPILE_NOTICE": "0"}
    with tempfile.TemporaryDirectory() as cache:
        if cold:
            env["NUMBA_CACHE_DIR"] = cache
        # cwd: ``python -c`` puts the working directory first on sys.path, ahead of PYTHONPATH
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=pythonpath
        )
    return [float(v) for v in done.stdout.split()[-2:]]


def bench_tour(runs, baseline):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base), baseline], check=True)
        try:
            ours, theirs = [], []
            for _ in range(runs):  # alternating: both see the same machine
                ours.append(_fresh_process(TOUR, ROOT, cold=True))
                theirs.append(_fresh_process(TOUR, base, cold=True))
            row("cold tour (empty numba cache)", np.median(ours, 0), np.median(theirs, 0), f"this code at {baseline}")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=True)
    warm = np.median([_fresh_process(IMPORT, ROOT, cold=False) for _ in range(5)], 0)
    print(f"| warm `import recsys_ltr.models` | {warm[0]:.2f} | | | |", flush=True)


def gowalla_split():
    from recsys_ltr import datasets, split

    X = datasets.load("gowalla").matrix.tocsr()
    train, _, test = split.holdout(X, val=0.0, test=0.2, seed=0)
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
        timed(lambda: ours.recommend(users, X, N=10), runs),
        timed(lambda: peer.recommend(users, X, N=10), runs),
        "implicit CosineRecommender",
    )
    row(
        "similar_items(all items, N=10)",
        timed(lambda: ours.similar_items(items, N=10), runs),
        timed(lambda: peer.similar_items(items, N=10), runs),
        "implicit CosineRecommender",
    )
    ours_t, peer_t = ItemKNN(k=100).fit(train), CosineRecommender(K=100)
    peer_t.fit(train, show_progress=False)
    row(
        "evaluate (ours: every item ranked, 8 metrics)",
        timed(lambda: evaluate(ours_t, train, test, k=10), runs),
        timed(lambda: ranking_metrics_at_k(peer_t, train, test, K=10, show_progress=False), runs),
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
        timed(lambda: ours.recommend(users, X, N=10), runs),
        timed(lambda: peer.recommend(users, X, N=10), runs),
        "implicit ALS batch recommend",
    )


def bench_serve(runs):
    from recsys_ltr import datasets, split
    from recsys_ltr.models import EASE, FEBR

    X = datasets.load("movielens-1m-implicit").matrix.tocsr()
    train = split.holdout(X, val=0.1, test=0.2, seed=0)[0]
    users = np.arange(X.shape[0])
    for name, model in (("EASE", EASE(lam=500).fit(train)), ("FEBR()", FEBR(random_state=0).fit(train))):
        wall, cpu, _ = timed(lambda m=model: m.recommend(users, train, N=10), runs)
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
            train, val, test = split.holdout(datasets.load(name).matrix, val=0.1, test=0.2, seed=0)
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
                    times[version] = timed(fn, runs)[0]
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
    parser.add_argument("--tour-runs", type=int, default=3)
    parser.add_argument("--baseline", default="ead6bbd")
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
            if section == "tour":
                bench_tour(args.tour_runs, args.baseline)
            else:
                globals()[f"bench_{section}"](args.runs)
    finally:
        if competitor is not None:
            competitor.terminate()


if __name__ == "__main__":
    main()
