"""Throughput of the shared WARP / β-WSS engine next to LightFM's WARP, same run, 2 threads.

Data: the train part of movielens-1m-implicit (``recsys_ltr.datasets.load_presplit``).
Ours: :class:`recsys_ltr.warp.WarpSampler` + the reference dot-product model (64 factors,
β = 10, reciprocal loss, learning rate 0.05), one "epoch" = nnz (query, positive) samples, in
both compile modes.  Peer: ``lightfm.LightFM(no_components=64, loss="warp", max_sampled=10)``,
one ``fit_partial`` epoch (nnz positive pairs).  Each figure is the median over R epochs run
interleaved across the methods (so that load changes hit all alike), after a warm-up epoch that
also compiles.  LightFM's epoch does more than sampling (feature machinery, adagrad,
regularisation), so the ratio compares whole epochs of two dot-product WARP learners, not the
sampler alone.

Run:  NUMBA_NUM_THREADS=2 python benchmarks/bench_warp.py [--repeats 3]
Needs: pip install rectools-lightfm (provides the ``lightfm`` module on Python 3.11).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "2")

import numpy as np

from recsys_ltr.datasets import load_presplit
from recsys_ltr.warp import DOT_ROWS, WarpSampler, dot_score, dot_update

THREADS, FACTORS, BETA, LR = 2, 64, 10, 0.05


def ours(X, compile_mode: str):
    """A warmed-up epoch runner for the dot-product model; returns (run, first-epoch seconds)."""
    rng = np.random.default_rng(0)
    state = (0.1 * rng.standard_normal((X.shape[0], FACTORS)), 0.1 * rng.standard_normal((X.shape[1], FACTORS)))
    sampler = WarpSampler(
        X, beta=BETA, loss="reciprocal", random_state=0, num_threads=THREADS, compile_mode=compile_mode
    )

    def run():
        t0 = time.perf_counter()
        st = sampler.sgd(state, dot_score, dot_update, X.nnz, LR, rows=DOT_ROWS)
        dt = time.perf_counter() - t0
        return np.array([st.samples / dt, st.violators / dt, st.draws / dt, st.draws / st.samples])

    t0 = time.perf_counter()
    run()  # warm-up epoch (and compilation)
    return run, time.perf_counter() - t0


def lightfm(X):
    from lightfm import LightFM

    model = LightFM(no_components=FACTORS, loss="warp", max_sampled=BETA, learning_rate=LR, random_state=0)
    coo = X.tocoo()

    def run():
        t0 = time.perf_counter()
        model.fit_partial(coo, epochs=1, num_threads=THREADS)
        return np.array([X.nnz / (time.perf_counter() - t0), np.nan, np.nan, np.nan])

    t0 = time.perf_counter()
    run()
    return run, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    _, parts = load_presplit("movielens-1m-implicit")
    X = parts["train"]
    print(f"movielens-1m-implicit train: {X.shape[0]} users x {X.shape[1]} items, {X.nnz} pairs; "
          f"{THREADS} threads, {FACTORS} factors, beta = max_sampled = {BETA}, "
          f"median of {args.repeats} epochs after a warm-up epoch")  # fmt: skip
    runners = {
        "LightFM warp": lightfm(X),
        "WarpSampler dot (pointer)": ours(X, "pointer"),
        "WarpSampler dot (inline)": ours(X, "inline"),
    }
    rows = {name: [] for name in runners}
    for _ in range(args.repeats):  # interleaved, so that load changes hit every method alike
        for name, (run, _) in runners.items():
            rows[name].append(run())
    med = {name: np.median(np.array(r), axis=0) for name, r in rows.items()}
    ref = med["LightFM warp"][0]
    print(f"{'method':<28}{'pairs/s':>12}{'violators/s':>14}{'draws/s':>12}{'draws/pair':>12}"
          f"{'vs LightFM':>12}{'1st epoch s':>13}")  # fmt: skip
    for name, m in med.items():
        extra = "".join(f"{v:>{w}.3g}" if np.isfinite(v) else " " * w for v, w in zip(m[1:], (14, 12, 12)))
        print(f"{name:<28}{m[0]:>12.3g}{extra}{m[0] / ref:>11.2f}x{runners[name][1]:>13.2f}")


if __name__ == "__main__":
    main()
