"""Scale-out benchmark: in-process vs Ray with 1 and 2 workers, on gowalla and on a synthetic
matrix of at least 10 million positives calibrated on gowalla.

Data
----
* ``gowalla``: ``recsys_ltr.datasets.load("gowalla")`` (29,858 users x 40,981 items, 1,027,370
  positives, a 10-core: every degree is at least 10).
* ``synthetic``: users and items whose degree distributions follow gowalla's.  Each side's degrees
  are fitted by a discrete power law above ``x_min`` (Clauset, Shalizi & Newman 2009: the MLE
  ``alpha = 1 + n / sum(log(x / (x_min - 1/2)))`` for every candidate ``x_min``, keeping the one
  whose fit has the smallest Kolmogorov-Smirnov distance); a synthetic degree is drawn from the
  fitted tail with gowalla's tail probability and from gowalla's empirical degrees below
  ``x_min`` otherwise, capped at gowalla's largest degree times the size ratio.  The numbers of
  users and items are ``--target-nnz`` divided by the mean degrees, and every user stub is paired
  with an item drawn with probability proportional to its degree (Chung-Lu); repeated pairs
  collapse, leaving at least 10 million positives with the default target.

Workloads
---------
* ``cosine``: the item cosine top-``--k`` affinity (``cosine_affinity(X, k)``) of the whole matrix;
  throughput in items/s.
* ``evaluate``: full-ranking evaluation (all 8 metrics over every candidate) of item-p
  (``ItemKNN(k)`` fitted on the training part of a 70/10/20 per-user split, validation items
  excluded) for every test user of gowalla and for ``--eval-users`` seeded random test users of the
  synthetic matrix (all of them take hours on 2 cores); throughput in users/s.
* ``overhead``: ``--overhead-tasks`` no-op tasks through ``RayExecutor.map`` (the per-task cost of
  submission, scheduling and result; in each Ray session only).
* ``febr`` (on the data sets of ``--febr-on``, default gowalla): a stacked FEBR over item-p and
  user-p (``ItemKNN(k)``, ``UserKNN(k)``; ``--febr-iterations`` OPT-ADG samples, fitted once in
  this process on the same split, fit seconds in the header), then its full-ranking evaluation of
  the same test users and its feature extraction (:func:`recsys_ltr.febr.febr_features`: the
  features of every pair of every user's head, the bases scoring every item) for those users;
  throughput in users/s.  The features are not gathered: the driver hashes each block as it
  arrives (equality with in-process is checked on the hashes).

Each workload runs in this process (numba on 2 threads) and on Ray with 1 and 2 workers (a local
instance started with ``num_cpus`` 1, then 2; one task per CPU, one numba thread per task).  The
in-process and Ray results are checked equal (affinity arrays, per-user metric values).  Reported
per run: wall seconds (median of ``--repeats``) and throughput, the CPU seconds of the tasks (all
threads; on a shared machine wall time measures the CPU share the scheduler granted, CPU time the
work) and the throughput per CPU second, peak resident memory of each worker
process (object-store pages it mapped included; in-process: this process's peak), bytes shipped
to workers (shared inputs once per node, plus task payloads) and returned, and the load average
of the machine before and after.

    PYTHONPATH=. RECSYS_LTR_DATA=/work/shared/datasets python benchmarks/bench_scale.py
    PYTHONPATH=. python benchmarks/bench_scale.py --target-nnz 300000 --eval-users 500   # a quick look
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse
import hashlib
import json
import resource
import time

import numpy as np
import scipy.sparse as sp

from recsys_ltr import datasets, split
from recsys_ltr._validation import check_feedback
from recsys_ltr.executors import RayExecutor, SerialExecutor
from recsys_ltr.febr import FEBR, febr_features
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ItemKNN, UserKNN
from recsys_ltr.neighbors import cosine_affinity

THREADS = 2


# ------------------------------------------------------------------------------ power-law calibration
def fit_power_law(degrees) -> dict:
    """Discrete power-law tail of ``degrees`` (x_min by minimum KS distance, alpha by MLE)."""
    x = np.sort(np.asarray(degrees, dtype=np.float64))
    best = None
    for x_min in np.unique(x):
        tail = x[x >= x_min]
        if tail.size < 50:
            break
        alpha = 1.0 + tail.size / np.sum(np.log(tail / (x_min - 0.5)))
        model_cdf = 1.0 - (tail / (x_min - 0.5)) ** (1.0 - alpha)
        ks = float(np.max(np.abs(np.arange(1, tail.size + 1) / tail.size - model_cdf)))
        if best is None or ks < best["ks"]:
            best = {"x_min": int(x_min), "alpha": float(alpha), "ks": ks, "tail_fraction": tail.size / x.size}
    return best


def sample_degrees(rng, degrees, fit, n, cap) -> np.ndarray:
    """``n`` degrees: the fitted power-law tail with gowalla's tail probability, else gowalla's
    empirical degrees below ``x_min``; capped at ``cap``."""
    body = np.asarray(degrees)[np.asarray(degrees) < fit["x_min"]]
    in_tail = rng.random(n) < fit["tail_fraction"]
    out = rng.choice(body, size=n) if body.size else np.full(n, fit["x_min"])
    u = rng.random(int(in_tail.sum()))
    tail = np.floor((fit["x_min"] - 0.5) * (1.0 - u) ** (-1.0 / (fit["alpha"] - 1.0)) + 0.5)
    out[in_tail] = np.minimum(tail, cap)
    return np.minimum(out, cap).astype(np.int64)


def calibrated_matrix(X, target_nnz, seed=0):
    """The synthetic matrix (module docstring) and the fits it used."""
    rng = np.random.default_rng(seed)
    du, di = np.diff(X.indptr), np.bincount(X.indices, minlength=X.shape[1])
    fits = {"users": fit_power_law(du), "items": fit_power_law(di)}
    mean_u = np.mean(sample_degrees(rng, du, fits["users"], 200_000, np.inf))
    mean_i = np.mean(sample_degrees(rng, di, fits["items"], 200_000, np.inf))
    n_users, n_items = int(target_nnz / mean_u), int(target_nnz / mean_i)
    user_deg = sample_degrees(rng, du, fits["users"], n_users, du.max() * n_items / X.shape[1])
    item_deg = sample_degrees(rng, di, fits["items"], n_items, di.max() * n_users / X.shape[0])
    rows = np.repeat(np.arange(n_users, dtype=np.int64), user_deg)
    cols = rng.choice(n_items, size=rows.size, p=item_deg / item_deg.sum())
    M = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_users, n_items))
    M.sum_duplicates()
    M.data[:] = 1.0
    keep_u, keep_i = np.diff(M.indptr) > 0, np.bincount(M.indices, minlength=n_items) > 0
    return check_feedback(M[keep_u][:, keep_i]), fits


# ------------------------------------------------------------------------------ workloads
def describe(X) -> dict:
    """Shape, positives, degree moments and the cosine kernel's work ``sum_u deg(u)^2``."""
    du, di = np.diff(X.indptr), np.bincount(X.indices, minlength=X.shape[1])
    return {
        "users": X.shape[0],
        "items": X.shape[1],
        "nnz": int(X.nnz),
        "user_degree": {"mean": float(du.mean()), "max": int(du.max())},
        "item_degree": {"mean": float(di.mean()), "max": int(di.max())},
        "cosine_work": int(np.sum(du.astype(np.int64) ** 2)),
    }


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(name, run, repeats, executor):
    """Median seconds of ``repeats`` runs of ``run(executor)``, with the executor's statistics."""
    times, result = [], None
    load_before = os.getloadavg()
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = run(executor)
        times.append(time.perf_counter() - t0)
    stats = executor.stats
    workers = stats.peak_rss or {os.getpid(): peak_rss()}
    return result, {
        "workload": name,
        "executor": executor_label(executor),
        "seconds": float(np.median(times)),
        "runs": [round(t, 3) for t in times],
        "cpu_seconds": stats.cpu_seconds / repeats,
        "peak_rss_mib_per_worker": sorted(round(v / 2**20) for v in workers.values()),
        "shipped_mib": stats.shipped_bytes / 2**20 / repeats,
        "shared_mib": stats.shared_bytes / 2**20 / repeats,
        "returned_mib": stats.result_bytes / 2**20 / repeats,
        "tasks": stats.tasks // repeats,
        "load_before": [round(v, 2) for v in load_before],
        "load_after": [round(v, 2) for v in os.getloadavg()],
    }


def rates(size, row) -> dict:
    """Throughput per wall second and per CPU second of the tasks."""
    cpu = row["cpu_seconds"]
    return {"throughput": size / row["seconds"], "per_cpu_second": size / cpu if cpu > 0 else float("nan")}


def executor_label(executor):
    return "in-process" if isinstance(executor, SerialExecutor) else f"ray x{executor.parallelism}"


def workloads(name, X, k, eval_users, seed, febr_iterations=None):
    """The (name, run, size, unit, check) of the workloads on data set ``name`` (with FEBR's when
    ``febr_iterations`` is given)."""
    train, val, test = next(split.folds(X, n_folds=1, val=0.1, test=0.2, random_state=seed))
    model = ItemKNN(k=k, num_threads=THREADS).fit(train)
    users = np.flatnonzero(np.diff(test.indptr))
    if eval_users and eval_users < users.size:
        users = np.sort(np.random.default_rng(seed).choice(users, eval_users, replace=False))

    def cosine(executor):
        return cosine_affinity(X, k, num_threads=THREADS, executor=executor).matrix

    def full_ranking(model):
        return lambda executor: evaluate(
            model, train, test, exclude=val, users=users, num_threads=THREADS, executor=executor
        )

    plans = [
        (f"{name} item cosine top-{k}", cosine, X.shape[1], "items/s", same_csr),
        (f"{name} item-p evaluate ({users.size:,} users)", full_ranking(model), users.size, "users/s", same_evaluation),
    ]
    if febr_iterations is None:
        return plans
    febr = fit_febr(train, val, k, febr_iterations)

    def features(executor):
        return {block[0]: digest(f) for block, f in febr_features(febr, users, executor=executor)}

    return plans + [
        (f"{name} FEBR evaluate ({users.size:,} users)", full_ranking(febr), users.size, "users/s", same_evaluation),
        (f"{name} FEBR features ({users.size:,} users)", features, users.size, "users/s", lambda a, b: a == b),
    ]


def fit_febr(train, val, k, iterations):
    """Stacked FEBR over item-p and user-p, fitted in this process (the fit is not distributed)."""
    t0 = time.perf_counter()
    bases = [ItemKNN(k=k, num_threads=THREADS), UserKNN(k=k, num_threads=THREADS)]
    febr = FEBR(bases=bases, max_iter=iterations, random_state=0, num_threads=THREADS, show_progress=False)
    febr.fit(train, validation=val)
    print(
        json.dumps(
            {"febr_fit_seconds": round(time.perf_counter() - t0, 1), "febr_params": febr.get_params()}, default=str
        )
    )
    return febr


def digest(features) -> str:
    """sha1 of a block's feature arrays (stacked: indptr, items, phi)."""
    h = hashlib.sha1()
    for part in features if isinstance(features, tuple) else (features,):
        h.update(np.ascontiguousarray(part).tobytes())
    return h.hexdigest()


def same_csr(a, b):
    return all(np.array_equal(getattr(a, p), getattr(b, p)) for p in ("indptr", "indices", "data"))


def same_evaluation(a, b):
    return all(np.array_equal(a.per_user[m], b.per_user[m]) for m in a.per_user)


def no_op(shared, task):
    return task


def task_overhead(n_tasks) -> dict:
    """Tasks per second of ``RayExecutor.map`` over ``n_tasks`` no-op tasks (the driver's and
    Ray's cost of one task: submission, scheduling, result)."""
    executor = RayExecutor()
    _, row = measure(f"{n_tasks:,} no-op tasks", lambda ex: list(ex.map(no_op, range(n_tasks))), 1, executor)
    return {**row, **rates(n_tasks, row), "unit": "tasks/s", "equal": True}


def warm_up(executor, plans):
    """Import the package and load (or compile) the kernels in every worker of ``executor`` by
    running the small ``plans`` (:func:`warm_up_plans`)."""
    for _, run, *_ in plans:
        run(executor)


def warm_up_plans(febr: bool):
    X = datasets.make_synthetic(n_users=400, n_items=300, random_state=0).matrix
    return workloads("warm-up", X, 10, 0, 0, 2000 if febr else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="default: $RECSYS_LTR_DATA, else ../shared/datasets")
    parser.add_argument("--target-nnz", type=int, default=10_500_000, help="stubs of the synthetic matrix")
    parser.add_argument("--k", type=int, default=100, help="neighbours of the cosine affinity and of item-p")
    parser.add_argument("--eval-users", type=int, default=10_000, help="synthetic test users evaluated")
    parser.add_argument("--repeats", type=int, default=1, help="runs per measurement (median)")
    parser.add_argument("--workers", default="1,2", help="Ray worker counts")
    parser.add_argument("--only", choices=("gowalla", "synthetic", "overhead"), help="one data set, or no data")
    parser.add_argument("--overhead-tasks", type=int, default=2000, help="no-op tasks timed per Ray session")
    parser.add_argument(
        "--febr-on", default="gowalla", help="data sets of the FEBR workloads (comma-separated; '' for none)"
    )
    parser.add_argument("--febr-iterations", type=int, default=200_000, help="OPT-ADG samples of the FEBR fit")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()

    gowalla = datasets.load("gowalla", data_dir=args.data_dir).matrix
    suites, header = [], {"threads_in_process": THREADS, "cpu_count": os.cpu_count()}
    if args.only in (None, "gowalla"):
        suites.append(("gowalla", gowalla, 0))
    if args.only in (None, "synthetic"):
        t0 = time.perf_counter()
        synthetic, header["fits"] = calibrated_matrix(gowalla, args.target_nnz)
        header["seconds_to_generate"] = round(time.perf_counter() - t0, 1)
        suites.append(("synthetic", synthetic, args.eval_users))
    for name, X, _ in suites:
        header[name] = describe(X)
    print(json.dumps(header, indent=1))
    febr_on = set(filter(None, args.febr_on.split(",")))
    plans = []
    for name, X, n_eval in suites:
        plans += workloads(name, X, args.k, n_eval, 0, args.febr_iterations if name in febr_on else None)
    rows, reference = [], {}
    warm = warm_up_plans(bool(febr_on & {name for name, _, _ in suites}))
    if plans:
        warm_up(SerialExecutor(), warm)
    for name, run, size, unit, _ in plans:  # in-process first: the reference results
        reference[name], row = measure(name, run, args.repeats, SerialExecutor())
        rows.append({**row, **rates(size, row), "unit": unit, "equal": True})
        print(json.dumps(rows[-1]))
    import ray

    for n_workers in (int(w) for w in args.workers.split(",")):
        ray.init(num_cpus=n_workers, include_dashboard=False, log_to_driver=False)
        warm_up(RayExecutor(), warm)
        rows.append(task_overhead(args.overhead_tasks))
        print(json.dumps(rows[-1]))
        for name, run, size, unit, same in plans:
            result, row = measure(name, run, args.repeats, RayExecutor())
            equal = bool(same(result, reference[name]))
            rows.append({**row, **rates(size, row), "unit": unit, "equal": equal})
            print(json.dumps(rows[-1]))
            if not equal:
                raise SystemExit(f"{name}: Ray and in-process results differ")
        ray.shutdown()
    print_table(rows)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"header": header, "rows": rows}, f, indent=1)


def print_table(rows):
    print(
        "\n| workload | executor | seconds | throughput | CPU s | per CPU s | peak RSS per worker (MiB) | "
        "shipped (MiB) | returned (MiB) | tasks | load avg before / after |"
    )
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['workload']} | {r['executor']} | {r['seconds']:.1f} | {r['throughput']:,.0f} {r['unit']} | "
            f"{r['cpu_seconds']:.1f} | {r['per_cpu_second']:,.0f} | "
            f"{', '.join(map(str, r['peak_rss_mib_per_worker']))} | {r['shipped_mib']:.1f} | "
            f"{r['returned_mib']:.1f} | {r['tasks']} | {r['load_before'][0]} / {r['load_after'][0]} |"
        )


if __name__ == "__main__":
    main()
