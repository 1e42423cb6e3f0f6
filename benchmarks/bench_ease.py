"""EASE on large catalogues: the dense solve, the sparse approximate inverse and a numpy inverse.

In one run, 2 threads, medians of ``--runs`` interleaved runs:

1. the blocked in-place inverse (``recsys_ltr._spd_inverse``) against LAPACK through scipy on a
   synthetic Gram matrix of order ``--lapack-n``: its Cholesky stage against one ``potrf`` call,
   the whole inverse against ``potrf`` + ``potri``;
2. lastfm-2k (``split.holdout(X, random_state=0)``, ``regularization=100``, the CLI's tuned value): fit seconds, the
   fit's peak memory (peak resident set above the resident set before the fit, also as a multiple
   of one dense ``n x n`` float64 matrix), validation and test metrics and batch ``recommend``
   (all users, ``N=10``) in users/s, for ``EASE(solver="dense")``, ``EASE(solver="sparse")`` and the
   peer, the textbook numpy ``B = I - inv(G + lam I) / diag`` (its quality is the dense solve's);
3. gowalla (the published train / valid / test split): ``EASE()`` (``"auto"`` takes the sparse
   solve), ``lam`` chosen on validation ADG among ``--gowalla-lams``; the numpy peer would need
   three dense 40,981 x 40,981 matrices (40 GB) and is not run;
4. with ``--gowalla-dense LAM``: exact EASE on gowalla in float32 (one 6.7 GB matrix, by the
   blocked inverse), the quality the sparse solve approximates.

    NUMBA_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_ease.py [--runs 3] [--skip-lapack] [--skip-peer]
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse
import gc
import time

import numpy as np
import scipy.sparse as sp
from _timing import timed
from bench_anchor_models import numpy_ease  # the textbook peer
from scipy.linalg import get_lapack_funcs
from threadpoolctl import threadpool_limits

from recsys_ltr import datasets, split
from recsys_ltr._gram import gram as gram_matrix
from recsys_ltr._spd_inverse import _cholesky, _Matrix, spd_inverse_inplace, symmetrise_upper
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import EASE

THREADS = 2
METRICS = ("ADG", "REC@10", "NDCG", "MAP", "ATOP")


def _status(key):
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(key)).split()[1]) * 1024


def measured(fn):
    """``(result, seconds, peak bytes above the resident set at the start)`` of ``fn()``."""
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak resident set (VmHWM)
    before = _status("VmRSS")
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start, _status("VmHWM") - before


class DenseWeights:
    """Scores ``X_u B`` of a dense ``B`` (the numpy peer), for :func:`evaluate`."""

    def __init__(self, X, B):
        self.X, self.B = X, B

    def score(self, users):
        return self.X[users] @ self.B


def lapack_section(n, runs):
    rng = np.random.default_rng(0)
    X = sp.random(2 * n, n, density=20 / n, random_state=rng, format="csr")
    X.data[:] = 1.0
    G = np.asfortranarray((X.T @ X).toarray() + 100.0 * np.eye(n))
    potrf, potri = get_lapack_funcs(("potrf", "potri"), (G,))
    times = {name: [] for name in ("potrf", "blocked Cholesky", "potrf + potri", "blocked inverse")}
    with threadpool_limits(THREADS, user_api="blas"):
        for _ in range(runs):
            A = G.copy(order="F")
            start = time.perf_counter()
            c, _ = potrf(A, lower=False, overwrite_a=True, clean=False)
            times["potrf"].append(time.perf_counter() - start)
            start = time.perf_counter()
            potri(c, lower=False, overwrite_c=True)
            times["potrf + potri"].append(time.perf_counter() - start + times["potrf"][-1])
            A = G.copy(order="F")
            start = time.perf_counter()
            for _ in _cholesky(_Matrix(A), n, 256):
                pass
            times["blocked Cholesky"].append(time.perf_counter() - start)
            A = G.copy(order="F")
            start = time.perf_counter()
            spd_inverse_inplace(A)
            times["blocked inverse"].append(time.perf_counter() - start)
    med = {name: float(np.median(t)) for name, t in times.items()}
    print(f"\n1. blocked inverse vs LAPACK (scipy's OpenBLAS), order {n}, {THREADS} threads, median of {runs}")
    print(f"{'task':18s} {'ours s':>8s} {'LAPACK s':>9s} {'ours/LAPACK':>12s}")
    for ours, peer, label in (
        ("blocked Cholesky", "potrf", "Cholesky"),
        ("blocked inverse", "potrf + potri", "inverse"),
    ):
        print(f"{label:18s} {med[ours]:8.2f} {med[peer]:9.2f} {med[ours] / med[peer]:12.2f}")


def users_per_second(model, n_users, runs):
    users = np.arange(n_users)
    model.recommend(users[:100], N=10)  # compile
    return n_users / timed(lambda: model.recommend(users, N=10), runs)[0]


def quality(model, train, val, test):
    v = evaluate(model, train, val, metrics=["ADG"], num_threads=THREADS)
    t = evaluate(model, train, test, exclude=val, metrics=list(METRICS), num_threads=THREADS)
    return {"val ADG": v["ADG"], **{m: t[m] for m in METRICS}}


def row(name, seconds, peak, n, scores, users_s):
    dense = 8.0 * n * n
    cells = " ".join(f"{scores[m]:7.4f}" for m in ("val ADG", *METRICS))
    rate = f"{users_s:8.0f}" if users_s else f"{'-':>8s}"
    print(f"{name:26s} {seconds:8.1f} {peak / 1e9:7.2f} {peak / dense:6.2f} {cells} {rate}")


def header(title):
    print(f"\n{title}")
    cols = " ".join(f"{m:>7s}" for m in ("val ADG", *(f"t.{m}"[:7] for m in METRICS)))
    print(f"{'model':26s} {'fit s':>8s} {'peak GB':>7s} {'x n^2':>6s} {cols} {'users/s':>8s}")


def lastfm_section(runs, peer=True, lam=100.0):
    X = datasets.load("lastfm-2k").matrix.tocsr()
    train, val, test = split.holdout(X, random_state=0)
    n = train.shape[1]
    fits = {
        **({"numpy inverse (peer)": lambda: numpy_ease(train, lam)} if peer else {}),
        "EASE dense": lambda: EASE(regularization=lam, solver="dense", num_threads=THREADS, show_progress=False).fit(
            train
        ),
        "EASE sparse k=200": lambda: EASE(
            regularization=lam, solver="sparse", num_threads=THREADS, show_progress=False
        ).fit(train),
    }
    EASE(regularization=lam, solver="sparse", show_progress=False).fit(train[:100])  # compile
    results, extra = {name: [] for name in fits}, {}
    for r in range(runs):
        for name, fit in fits.items():  # interleaved
            model, seconds, peak = measured(fit)
            results[name].append((seconds, peak))
            if r == runs - 1:
                peer = isinstance(model, np.ndarray)
                scores = quality(DenseWeights(train, model) if peer else model, train, val, test)
                extra[name] = scores, None if peer else users_per_second(model, train.shape[0], runs)
            del model
    header(f"2. lastfm-2k train {train.shape[0]} x {n}, nnz {train.nnz}, lam={lam:g}, median of {runs}")
    for name in fits:
        row(name, *np.median(results[name], axis=0), n, *extra[name])


def gowalla_section(runs, lams):
    _, parts = datasets.load_presplit("gowalla")
    train, val, test = parts["train"], parts["valid"], parts["test"]
    n = train.shape[1]
    header(f"3. gowalla train {train.shape[0]} x {n}, nnz {train.nnz} (published split), EASE() = sparse k=200")
    fits = {}  # lam -> [(model, seconds, peak, scores), ...]: the validation pass is the first timed run
    for lam in lams:
        fits[lam] = [
            measured(lambda lam=lam: EASE(regularization=lam, num_threads=THREADS, show_progress=False).fit(train))
        ]
        model, seconds, peak = fits[lam][0]
        assert model.solver_ == "sparse"
        fits[lam][0] += (quality(model, train, val, test),)
        row(f"EASE() lam={lam:g} (1 run)", seconds, peak, n, fits[lam][0][3], None)
        del model
    lam = max(lams, key=lambda v: fits[v][0][3]["val ADG"])
    timed = fits[lam] + [
        measured(lambda: EASE(regularization=lam, num_threads=THREADS, show_progress=False).fit(train))
        for _ in range(runs - 1)
    ]
    seconds, peak = np.median([t[1:3] for t in timed], axis=0)
    model = timed[0][0]
    row(f"chosen lam={lam:g}", seconds, peak, n, timed[0][3], users_per_second(model, train.shape[0], runs))


class Float32Weights:
    """Exact EASE in float32 (half the dense float64 memory) from the blocked inverse: the quality
    reference of the sparse solve on catalogues whose float64 solve does not fit."""

    def __init__(self, X, lam):
        gram = gram_matrix(X, "EASE")
        gram.setdiag(gram.diagonal() + lam)  # X^T X + lam I, as EASE's fit makes it
        P = gram.astype(np.float32).toarray().T
        with threadpool_limits(THREADS, user_api="blas"):
            spd_inverse_inplace(P)
        symmetrise_upper(P)
        self.X, self.B = X, P.T
        self.B /= -np.diag(self.B).copy()
        np.fill_diagonal(self.B, 0.0)

    def score(self, users):
        return np.asarray(self.X[users].astype(np.float32) @ self.B, dtype=np.float64)  # no float64 copy of B


def gowalla_dense_reference(lam):
    _, parts = datasets.load_presplit("gowalla")
    train, val, test = parts["train"], parts["valid"], parts["test"]
    header(f"4. gowalla, exact EASE in float32 (blocked inverse, {THREADS} threads), lam={lam:g}, 1 run")
    model, seconds, peak = measured(lambda: Float32Weights(train, lam))
    row("exact float32", seconds, peak, train.shape[1], quality(model, train, val, test), None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lapack-n", type=int, default=8000)
    parser.add_argument("--gowalla-lams", default="50,100,200")
    parser.add_argument("--skip-lapack", action="store_true")
    parser.add_argument("--skip-lastfm", action="store_true")
    parser.add_argument("--skip-peer", action="store_true", help="lastfm-2k without the numpy peer (its 7.5 GB)")
    parser.add_argument("--skip-gowalla", action="store_true")
    parser.add_argument(
        "--gowalla-dense", type=float, metavar="LAM", help="also run the float32 exact reference (7 GB)"
    )
    args = parser.parse_args()
    if not args.skip_lapack:
        lapack_section(args.lapack_n, args.runs)
    if not args.skip_lastfm:
        lastfm_section(args.runs, peer=not args.skip_peer)
    if not args.skip_gowalla:
        gowalla_section(args.runs, [float(v) for v in args.gowalla_lams.split(",")])
    if args.gowalla_dense:
        gowalla_dense_reference(args.gowalla_dense)


if __name__ == "__main__":
    main()
