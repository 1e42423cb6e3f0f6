"""Does weighting play counts help?  The models that read weights on binary, BM25 and log weights.

lastfm-2k keeps each (user, artist) pair's play count (``Interactions.weights``).  For each fold of
``split.folds(counts, 3)`` (per user 10% validation, 20% test, the eval protocol; the parts keep the
counts), every model that reads weights is fitted at its defaults on the training part weighted
three ways, and judged on the same binary test part (validation positives excluded):

* ``binary``: the counts set to 1 (what every model read before weights were kept);
* ``bm25``: implicit's recipe, ``bm25_weight(train.T, K1=100, B=0.8).T`` (idf over users, length per
  artist), entries of weight <= 0 dropped;
* ``log``: ``log_weight(train)``, Hu et al.'s ``1 + log(1 + plays)``.

Prints mean test ADG and NDCG@10 over the folds, with the fit seconds.

    NUMBA_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_weighting.py [--dataset lastfm-2k] [--folds 3]
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse
import time

import numpy as np

from recsys_ltr import datasets, split
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, EASE, ItemKNN, UserKNN
from recsys_ltr.weighting import bm25_weight, log_weight

MODELS = {
    "ALS()": ALS,
    "EASE(dense_max_items=4096)": lambda: EASE(dense_max_items=4096),  # the CLI's EASE
    "ItemKNN()": ItemKNN,
    "UserKNN()": UserKNN,
}


def binary(X):
    B = X.copy()
    B.data[:] = 1.0
    return B


def bm25(X):
    W = bm25_weight(X.T, K1=100, B=0.8).T.tocsr()
    W.data[W.data <= 0] = 0.0
    W.eliminate_zeros()
    return W


WEIGHTINGS = {"binary": binary, "bm25": bm25, "log": log_weight}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="lastfm-2k")
    parser.add_argument("--folds", type=int, default=3)
    args = parser.parse_args()
    counts = datasets.load(args.dataset).weighted_matrix
    rows = {}
    for fold, (train, val, test) in enumerate(split.folds(counts, args.folds)):
        for weighting, weigh in WEIGHTINGS.items():
            X = weigh(train)
            for name, make in MODELS.items():
                start = time.perf_counter()
                model = make().fit(X)
                seconds = time.perf_counter() - start
                result = evaluate(model, X, test, exclude=val, k=10, metrics=["ADG", "NDCG@10"])
                rows.setdefault((name, weighting), []).append((result["ADG"], result["NDCG@10"], seconds))
                print(f"fold {fold} {name:28s} {weighting:7s} ADG {result['ADG']:.4f}", flush=True)
    print(f"\n{args.dataset}, {args.folds} folds, test means | model | weights | ADG | NDCG@10 | fit s |")
    for (name, weighting), values in rows.items():
        adg, ndcg, seconds = np.mean(values, axis=0)
        print(f"| {name} | {weighting} | {adg:.4f} | {ndcg:.4f} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
