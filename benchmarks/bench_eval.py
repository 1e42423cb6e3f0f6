"""Throughput of ``recsys_ltr.metrics.evaluate`` on gowalla, against two peers.

A fixed random-factor model (64 factors, seed 0) is evaluated on gowalla's published train/test
files (29,858 users x 40,981 items; ``recsys_ltr.datasets.load_presplit``).  Reported: users per
second, median of ``--runs`` runs, for

* ``recsys_ltr``: ``evaluate`` (all 8 metrics, full candidate lists, exact ranks, counting kernel);
* ``numpy argsort``: the plain per-user reference written below (full stable argsort of each
  user's candidate list; same score blocks, same tie rule, same metrics) -- run on a seeded
  random sample of ``--ref-users`` test users only, since it is slow; its per-user numbers are
  checked against ours to 1e-9;
* ``implicit``: ``implicit.evaluation.ranking_metrics_at_k`` on the same factors wrapped in
  implicit's CPU ``MatrixFactorizationBase`` (an unfitted ``AlternatingLeastSquares`` given the
  factors; BLAS limited to one thread during the call, as implicit advises).  It only computes a
  top-K list per user (partial selection, no rank below K, hence no ADG/ATOP/MAP over the full
  list): not the same work.

All three include computing the scores from the factors.  Threads: 2 (numba, BLAS, implicit).

    NUMBA_NUM_THREADS=2 python benchmarks/bench_eval.py      # package installed (pip install -e .)
    PYTHONPATH=. NUMBA_NUM_THREADS=2 python benchmarks/bench_eval.py   # from a source checkout
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse

import numpy as np
from _timing import timed

from recsys_ltr._memory import TASK_BYTES, rows_per_block
from recsys_ltr.datasets import load_presplit
from recsys_ltr.metrics import evaluate

THREADS = 2
K = 10


class RandomFactors:
    """Fixed random-factor scorer: score(u, i) = <p_u, q_i>."""

    def __init__(self, n_users, n_items, factors=64, seed=0):
        rng = np.random.default_rng(seed)
        self.user_factors = (0.1 * rng.standard_normal((n_users, factors))).astype(np.float32)
        self.item_factors = (0.1 * rng.standard_normal((n_items, factors))).astype(np.float32)

    def score(self, user_ids):
        return self.user_factors[user_ids] @ self.item_factors.T


def argsort_reference(model, train, test, users, batch_size):
    """Per-user metrics by fully sorting each candidate list with numpy (the plain way)."""
    n_items = train.shape[1]
    pop = np.asarray(train.sum(axis=0)).ravel()
    tie_order = np.lexsort((np.arange(n_items), -pop))  # items by popularity desc, id asc
    out = {name: [] for name in ("ADG", "ATOP", f"REC@{K}", "MAP", "NDCG", f"P@{K}", "AUC", "MRR")}
    rank_of = np.empty(n_items, dtype=np.int64)
    for start in range(0, len(users), batch_size):
        block = users[start : start + batch_size]
        scores = model.score(block)
        for row, u in enumerate(block):
            is_cand = np.ones(n_items, dtype=bool)
            is_cand[train.indices[train.indptr[u] : train.indptr[u + 1]]] = False
            cand = tie_order[is_cand[tie_order]]
            ordered = cand[np.argsort(-scores[row, cand], kind="stable")]
            rank_of[ordered] = np.arange(ordered.size)
            r = np.sort(rank_of[test.indices[test.indptr[u] : test.indptr[u + 1]]])
            n, m = ordered.size, r.size
            gain = 1 / np.log2(r + 2)
            hits = np.count_nonzero(r < K)
            out["ADG"].append(gain.mean())
            out["ATOP"].append(np.mean(1 - r / (n - 1)))
            out[f"REC@{K}"].append(hits / m)
            out["MAP"].append(np.mean(np.arange(1, m + 1) / (r + 1)))
            out["NDCG"].append(gain.sum() / np.sum(1 / np.log2(np.arange(m) + 2)))
            out[f"P@{K}"].append(hits / K)
            out["AUC"].append(1 - np.sum(r - np.arange(m)) / (m * (n - m)))
            out["MRR"].append(1 / (r[0] + 1))
    return {name: np.array(v) for name, v in out.items()}


def implicit_model(model):
    from implicit.cpu.als import AlternatingLeastSquares  # a concrete CPU MatrixFactorizationBase

    mf = AlternatingLeastSquares(factors=model.user_factors.shape[1], num_threads=THREADS)
    mf.user_factors, mf.item_factors = model.user_factors, model.item_factors
    return mf


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ref-users", type=int, default=1500, help="users run through the argsort reference")
    parser.add_argument("--data-dir", default=None, help="default: $RECSYS_LTR_DATA, else ../shared/datasets")
    args = parser.parse_args()

    _, parts = load_presplit("gowalla", data_dir=args.data_dir)
    train, test = parts["train"], parts["test"]
    model = RandomFactors(*train.shape)
    users = np.flatnonzero(np.diff(test.indptr)).astype(np.int64)
    ref_users = np.sort(np.random.default_rng(0).choice(users, min(args.ref_users, users.size), replace=False))
    batch_size = rows_per_block(8 * train.shape[1], TASK_BYTES)
    print(
        f"gowalla: {train.shape[0]:,} users x {train.shape[1]:,} items, train nnz {train.nnz:,}, "
        f"test nnz {test.nnz:,}; {users.size:,} test users; 64 random factors; {THREADS} threads; "
        f"median of {args.runs} runs"
    )

    evaluate(model, train, test, users=users[:50], num_threads=THREADS)  # compile / load the kernels
    t_ours, _, res = timed(lambda: evaluate(model, train, test, k=K, num_threads=THREADS), args.runs)
    t_ref, _, ref = timed(lambda: argsort_reference(model, train, test, ref_users, batch_size), args.runs)
    ours_sub = evaluate(model, train, test, k=K, users=ref_users, num_threads=THREADS)
    worst = max(np.max(np.abs(ours_sub.per_user[name] - ref[name])) for name in ref)
    if worst > 1e-9:
        raise SystemExit(f"recsys_ltr and the argsort reference disagree by {worst:g}")
    blocks = range(0, users.size, batch_size)
    t_scores, _, _ = timed(lambda: [model.score(users[s : s + batch_size]).shape for s in blocks], 1)

    import implicit.evaluation
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, "blas"):  # implicit's advice: its own threads, single-threaded BLAS
        mf = implicit_model(model)
        t_imp, _, imp = timed(
            lambda: implicit.evaluation.ranking_metrics_at_k(
                mf, train, test, K=K, show_progress=False, num_threads=THREADS
            ),
            args.runs,
        )

    ours_rate, ref_rate = users.size / t_ours, ref_users.size / t_ref
    print(f"{'method':<34} {'users/s':>10} {'vs argsort':>11}  note")
    print(
        f"{'recsys_ltr.metrics.evaluate':<34} {ours_rate:>10,.0f} {ours_rate / ref_rate:>10.1f}x  "
        f"all users, 8 metrics over full lists ({t_ours:.2f} s; scoring alone {t_scores:.2f} s)"
    )
    print(
        f"{'numpy per-user argsort':<34} {ref_rate:>10,.0f} {1:>10.1f}x  "
        f"{ref_users.size:,} sampled users; agrees to {worst:.1e}"
    )
    imp_rate = users.size / t_imp
    print(
        f"{'implicit ranking_metrics_at_k':<34} {imp_rate:>10,.0f} {imp_rate / ref_rate:>10.1f}x  "
        f"top-{K} only (not the same work)"
    )
    print("recsys_ltr means: " + ", ".join(f"{n} {v:.4f}" for n, v in res.items()))
    print("implicit@10:      " + ", ".join(f"{n} {v:.4f}" for n, v in imp.items()))


if __name__ == "__main__":
    main()
