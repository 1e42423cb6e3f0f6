"""Approximate against exact top-N of ALS factors: ``ApproximateTopN`` (faiss IVF) beside ``ALS.recommend``.

``ALS()`` fitted on gowalla's training part (LightGCN's split); every user's top ``--n`` with their
liked items filtered, exact (the tiled kernel of :mod:`recsys_ltr.models.ranking`) and approximate at
each ``--nprobe``: build seconds, recommend seconds (median of ``--runs``), throughput against exact,
recall of the exact top-N::

    RECSYS_LTR_DATA=../shared/datasets python benchmarks/ann_topn.py
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import timed

from recsys_ltr import datasets
from recsys_ltr.models import ALS
from recsys_ltr.models.approximate import ApproximateTopN


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="gowalla")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--nprobe", type=int, nargs="+", default=[20, 40, 64])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    train = datasets.load_presplit(args.dataset)[0]
    model = ALS(show_progress=False).fit(train)
    users = np.arange(model.n_users_)
    print(
        "| items | setting | build s | recommend s | throughput vs exact | recall@N |\n|---:|---|---:|---:|---:|---:|"
    )
    exact_s, _, exact = timed(lambda: model.recommend(users, N=args.n), runs=args.runs, warmup=True)
    print(f"| {model.n_items_} | exact | | {exact_s:.2f} | 1.0x | 1 |")
    for nprobe in args.nprobe:
        build_s, _, index = timed(lambda p=nprobe: ApproximateTopN(model, nprobe=p))
        seconds, _, got = timed(lambda i=index: i.recommend(users, N=args.n), runs=args.runs, warmup=True)
        hits = np.mean([np.intersect1d(a, b).size for a, b in zip(got[0], exact[0])]) / exact[0].shape[1]
        print(
            f"| {model.n_items_} | nlist {index.nlist_}, nprobe {nprobe} | {build_s:.2f} | {seconds:.2f} | "
            f"{exact_s / seconds:.1f}x | {hits:.4f} |"
        )


if __name__ == "__main__":
    main()
