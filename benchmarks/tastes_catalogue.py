"""The models at their defaults on a generated catalogue of pipeline size: quality, fit CPU and peak.

``datasets.make_tastes(n_users, n_items, random_state=seed)`` (64 clustered tastes, Zipf(1) orders,
log-normal activity around 30 positives), a per-user 20% holdout (``split.holdout(test=0.2)``), and
each model ``Model().fit(train)`` at its defaults in a child process of its own (so each peak is its
own: ``ru_maxrss``), judged on ``--eval-users`` sampled test users: ADG, MAP, Recall@20, NDCG@20, fit
CPU seconds (both cores counted) and the paired test of ``FEBR()`` against each other model (a
one-sided paired t-test per metric that FEBR is below it: ``below p``).

Two rows are the generator's own rankings (``make_tastes(..., return_params=True)``), no fit: ``planted``
ranks a user's unseen items by one draw's probability under the user's true taste, ``inferred`` under
the mixture of tastes weighted by their posterior given the training positives (drawn independently
from a uniform prior: Bayes' rule of the model, a learner that knew the model but not the taste).
They tell how far above the best model any re-ranker could still go::

    NUMBA_NUM_THREADS=2 python benchmarks/tastes_catalogue.py [--users 100000] [--items 30000] \\
        [--models FEBR,GF-CF,BSPM,ChebyCF,EASE,ItemKNN,RP3beta,ALS,planted,inferred] [--eval-users 5000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import time

import numpy as np
from scipy.stats import ttest_rel

from recsys_ltr import split
from recsys_ltr.datasets import make_tastes
from recsys_ltr.febr import FEBR
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, BSPM, EASE, GFCF, ChebyCF, ItemKNN, RP3beta, UserKNN

MODELS = {
    "FEBR": FEBR,
    "EASE": EASE,
    "ItemKNN": ItemKNN,
    "UserKNN": UserKNN,
    "RP3beta": RP3beta,
    "ALS": ALS,
    "GF-CF": GFCF,
    "BSPM": BSPM,
    "ChebyCF": ChebyCF,
}
METRICS = ("ADG", "MAP", "REC@20", "NDCG@20")
GENERATOR = ("planted", "inferred")  # the generator's own rankings


def generator_scorer(name, planted, train):
    """Score rows of one draw's probabilities: under each user's taste (``planted``) or under the
    tastes weighted by their posterior given the user's training positives (``inferred``)."""
    probability = planted["draw_probability"]
    if name == "planted":
        return lambda ids: probability[planted["taste"][ids]]
    log_probability = np.log(probability).T

    def inferred(ids):
        log_posterior = train[ids] @ log_probability  # + log of the uniform prior, a constant
        posterior = np.exp(log_posterior - log_posterior.max(axis=1, keepdims=True))
        return (posterior / posterior.sum(axis=1, keepdims=True)) @ probability

    return inferred


def run(name, args, queue):
    """Fit ``name`` at its defaults on the seeded split; put its figures and per-user values."""
    X, planted = make_tastes(args.users, args.items, random_state=args.seed, return_params=True)
    train, _, test = split.holdout(X.matrix, val=0.0, test=0.2, random_state=args.seed)
    with_test = np.flatnonzero(np.diff(test.indptr))
    users = np.sort(np.random.default_rng(args.seed).choice(with_test, min(args.eval_users, with_test.size), False))
    cpu = time.process_time()
    model = generator_scorer(name, planted, train) if name in GENERATOR else MODELS[name]().fit(train)
    cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    result = evaluate(model, train, test, metrics=list(METRICS), users=users, show_progress=False)
    queue.put((name, cpu, peak, {m: result.per_user[m] for m in METRICS}, train.nnz))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--models", default="FEBR,GF-CF,BSPM,ChebyCF,EASE,ItemKNN,RP3beta,ALS")
    parser.add_argument("--eval-users", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    rows = {}
    for name in args.models.split(","):
        queue = context.Queue()
        child = context.Process(target=run, args=(name, args, queue))
        child.start()
        rows[name] = queue.get()
        child.join()
    nnz = next(iter(rows.values()))[4]
    print(f"make_tastes({args.users:,} x {args.items:,}, seed {args.seed}): {nnz:,} training positives")
    print("| model (defaults) | " + " | ".join(METRICS) + " | fit CPU s | peak GB |")
    print("|---|" + "---:|" * (len(METRICS) + 2))
    for name, cpu, peak, values, _ in rows.values():
        cells = " | ".join(f"{values[m].mean():.4f}" for m in METRICS)
        label = f"generator: {name}" if name in GENERATOR else f"`{name}()`"
        print(f"| {label} | {cells} | {cpu:.0f} | {peak:.1f} |")
    if "FEBR" in rows:
        febr = rows["FEBR"][3]
        for name, _, _, values, _ in rows.values():
            if name != "FEBR":  # against the generator's rankings: how far FEBR is below the ceiling
                tests = [ttest_rel(febr[m], values[m], alternative="less").pvalue for m in METRICS]
                print(f"FEBR below {name}: " + ", ".join(f"{m} p = {p:.2g}" for m, p in zip(METRICS, tests)))


if __name__ == "__main__":
    main()
