"""Serving and evaluation on a real Ray cluster against in-process, at pipeline scale.

A head and a worker node started as separate processes on this machine (``ray start --head``, ``ray
start --address=...``; ``benchmarks/_ray_cluster.py``), one CPU each, joined by address from this
process, run :func:`~recsys_ltr.executors.recommend_users` (``N=20``, every block consumed as it
arrives), :func:`~recsys_ltr.metrics.evaluate` (ADG, MAP, Recall@20, NDCG@20) and, for ``FEBR()``,
:func:`~recsys_ltr.febr.febr_features` (the heads' features of the served users) of a model fitted
here, beside the same calls in this process on numba's 2 threads.

Data: :func:`recsys_ltr.datasets.make_tastes` (seed 0) of ``--users`` x ``--users / 10`` items, a
per-user 20% holdout (``split.holdout(val=0, test=0.2)``), as ``benchmarks/scale_table.py`` draws it;
``--serve-users`` and ``--eval-users`` seeded samples of the users.  Per model and workload: wall
seconds and users per second of each run, the cluster's throughput over in-process, the tasks' CPU
seconds and the peak resident memory of each worker process (``TaskStats``), and whether the
cluster's results equal in-process ones: the top-20 ids of every user, the per-user metrics and
FEBR's features (the factor models' BLAS products round their last bits by thread count, so their
ids may differ between near-tied items; the fraction of users with identical lists is given).  Every
node's object store holds the shipped model: ``FEBR()`` at 1M users ranks as GF-CF, whose item graph
``P`` takes 6.9 GB, so two nodes and the driver on one 24 GB machine hold three copies of it; its row
is measured at ``--users 300000`` (``P`` 1.8 GB).

    NUMBA_NUM_THREADS=2 PYTHONPATH=. python benchmarks/ray_cluster_throughput.py --users 1000000
"""

from __future__ import annotations

import os
import uuid

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")
# the cluster's token, set before ray is imported (ray reads its authentication mode then)
TOKEN = uuid.uuid4().hex
os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN)

import argparse
import json
import time
from pathlib import Path

import numpy as np
import ray  # the ray extra
from _ray_cluster import local_cluster

from recsys_ltr import split
from recsys_ltr.datasets import make_tastes
from recsys_ltr.executors import RayExecutor, recommend_users
from recsys_ltr.febr import FEBR, febr_features
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, ItemKNN, RP3beta

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"ALS": ALS, "ItemKNN": ItemKNN, "RP3beta": RP3beta, "FEBR": FEBR}
METRICS = ["ADG", "MAP", "REC@20", "NDCG@20"]


def serve(model, users, executor):
    """``(seconds, ids)``: the top 20 of every one of the sorted ``users``, placed as the blocks arrive."""
    ids = np.empty((users.size, 20), np.int64)
    start = time.perf_counter()
    for block, block_ids, _ in recommend_users(model, users, N=20, executor=executor, show_progress=False):
        ids[np.searchsorted(users, block)] = block_ids  # blocks arrive as they finish
    return time.perf_counter() - start, ids


def judge(model, train, test, users, executor):
    start = time.perf_counter()
    result = evaluate(model, train, test, users=users, metrics=METRICS, executor=executor, show_progress=False)
    return time.perf_counter() - start, result.per_user


def featurise(model, users, executor):
    """``(seconds, features)``: FEBR's head features of the sorted ``users``, ``(indptr, items, phi)``
    of every block in ``users``' order (``None`` for a model without them)."""
    if not isinstance(model, FEBR):
        return None, None
    start = time.perf_counter()
    blocks = sorted(febr_features(model, users, executor=executor, show_progress=False), key=lambda b: b[0][0])
    return time.perf_counter() - start, [features for _, features in blocks]


def same_features(a, b) -> bool:
    """Whether two runs' features are equal block by block (the same blocks: the same batch size)."""
    return len(a) == len(b) and all(np.array_equal(x, y) for fa, fb in zip(a, b) for x, y in zip(fa, fb))


def run(args):
    n_items = max(args.users // 10, 20)
    train, _, test = split.holdout(
        make_tastes(args.users, n_items, random_state=0).matrix, val=0.0, test=0.2, random_state=0
    )
    rng = np.random.default_rng(0)
    served = np.sort(rng.choice(train.shape[0], min(args.serve_users, train.shape[0]), replace=False))
    tested = np.flatnonzero(np.diff(test.indptr))
    judged = np.sort(rng.choice(tested, min(args.eval_users, tested.size), replace=False))
    print(f"{train.shape[0]:,} users x {n_items:,} items, {train.nnz:,} training positives", flush=True)
    models = {}
    for name in args.models:
        start = time.perf_counter()
        models[name] = MODELS[name]().fit(train)
        print(f"  {name} fitted in {time.perf_counter() - start:.1f} s", flush=True)
    local = {
        name: (serve(m, served, None), judge(m, train, test, judged, None), featurise(m, served, None))
        for name, m in models.items()
    }
    rows = []
    store = int(args.object_store_gb * 2**30)
    with local_cluster(nodes=2, cpus=1, object_store_bytes=store, pythonpath=[ROOT], token=TOKEN) as (address, _):
        executor = RayExecutor(address=address)
        wait_for_nodes(2)
        for name, model in models.items():
            (serve_local, ids_local), (eval_local, values_local), (features_local, phi_local) = local[name]
            before = executor.stats.cpu_seconds
            serve_cluster, ids_cluster = serve(model, served, executor)
            serve_cpu = executor.stats.cpu_seconds - before
            eval_cluster, values_cluster = judge(model, train, test, judged, executor)
            features_cluster, phi_cluster = featurise(model, served, executor)
            same_lists = float(np.mean(np.all(ids_local == ids_cluster, axis=1)))
            same_metrics = all(np.array_equal(values_local[m], values_cluster[m]) for m in METRICS)
            rows.append(
                {
                    "model": name,
                    "serve_users": int(served.size),
                    "serve_local_s": serve_local,
                    "serve_cluster_s": serve_cluster,
                    "serve_cluster_cpu_s": serve_cpu,
                    "eval_users": int(judged.size),
                    "eval_local_s": eval_local,
                    "eval_cluster_s": eval_cluster,
                    "identical_lists": same_lists,
                    "identical_metrics": same_metrics,
                    "features_local_s": features_local,
                    "features_cluster_s": features_cluster,
                    "identical_features": None if phi_local is None else same_features(phi_local, phi_cluster),
                    "worker_peak_rss_mib": sorted(v / 2**20 for v in executor.stats.peak_rss.values()),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        ray.shutdown()  # the driver leaves before the nodes stop: a driver whose cluster dies exits at once
    return rows


def wait_for_nodes(count, seconds=120):
    deadline = time.monotonic() + seconds
    while len([n for n in ray.nodes() if n["Alive"]]) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {count} Ray nodes alive after {seconds} s")
        time.sleep(0.5)


def table(rows):
    lines = [
        "| model | users/s served: in-process / 2-node cluster (ratio) | users/s evaluated: in-process / cluster (ratio) "
        "| FEBR's features, users/s: in-process / cluster (ratio) | identical top-20 lists / metrics / features "
        "| peak RSS per worker |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        rss, same = r["worker_peak_rss_mib"], r["identical_features"]
        cells = [r["model"]]
        for users, workload in (("serve", "serve"), ("eval", "eval"), ("serve", "features")):
            local, cluster = r[f"{workload}_local_s"], r[f"{workload}_cluster_s"]
            if local is None:
                cells.append("-")
                continue
            a, b = r[f"{users}_users"] / local, r[f"{users}_users"] / cluster
            cells.append(f"{a:,.0f} / {b:,.0f} ({b / a:.2f}x)")
        features = "-" if same is None else ("yes" if same else "no")
        cells.append(f"{r['identical_lists']:.2%} / {'yes' if r['identical_metrics'] else 'no'} / {features}")
        cells.append(f"{min(rss):,.0f}-{max(rss):,.0f} MiB")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1_000_000, help="users of the generated data (items: a tenth)")
    parser.add_argument("--serve-users", type=int, default=200_000, help="users whose top 20 are served")
    parser.add_argument("--eval-users", type=int, default=10_000, help="test users evaluated")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=["ItemKNN", "ALS"])
    parser.add_argument("--object-store-gb", type=float, default=2.0, help="object store of each node")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args()
    rows = run(args)
    print(table(rows))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
