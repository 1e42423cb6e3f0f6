"""The graph filters at the authors' settings on gowalla's LightGCN split: ``GFCF()``, ``BSPM()``, ``ChebyCF()``.

Each default is its paper's gowalla setting (GF-CF: 256 factors, alpha 0.3; BSPM: 448 factors, beta
0.2, one RK4 sharpening step over 2.5; ChebyCF: order 8, flatness 1.5, 512 factors, alpha 0.2, beta
0.4), so this reproduces the published rows without tuning: each model is fitted on ``train.txt`` +
``valid.txt`` of ``../shared/datasets/gowalla`` and ranks every item outside a user's training
positives for ``test.txt`` (``--protocol fixed``'s metrics).  Prints fit and scoring seconds (wall
and CPU), peak memory and Recall@20 / NDCG@20, and the paired Wilcoxon tests of each model against
the one before it over the test users::

    NUMBA_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 RECSYS_LTR_DATA=../shared/datasets \\
        python benchmarks/gowalla_graph_filters.py
"""

from __future__ import annotations

import argparse
import itertools
import resource
import time

from scipy.stats import wilcoxon

from recsys_ltr.datasets import load_presplit
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import BSPM, GFCF, ChebyCF

GB = 2**30
PUBLISHED = {"GFCF": (0.1849, 0.1518), "BSPM": (0.1920, 0.1597), "ChebyCF": (0.1941, 0.1616)}


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    _, parts = load_presplit("gowalla")
    train = (parts["train"] + parts["valid"]).tocsr()
    per_user = {}
    for model in (GFCF(), BSPM(), ChebyCF()):
        name = type(model).__name__
        t0, c0 = time.perf_counter(), time.process_time()
        model.fit(train)
        fit, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        result = evaluate(model, train, parts["test"], metrics=["REC@20", "NDCG@20"], show_progress=False)
        score, score_cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB
        per_user[name] = result.per_user["REC@20"], result.per_user["NDCG@20"]
        print(
            f"{name}: fit {fit:.1f} s ({fit_cpu:.0f} CPU s), scoring {result.per_user['REC@20'].size} test users "
            f"{score:.1f} s ({score_cpu:.0f} CPU s), peak {peak:.2f} GB; Recall@20 {result['REC@20']:.4f}, "
            f"NDCG@20 {result['NDCG@20']:.4f} (published {PUBLISHED[name][0]:.4f} / {PUBLISHED[name][1]:.4f})",
            flush=True,
        )
    names = list(per_user)
    for before, name in itertools.pairwise(names):
        for m, metric in enumerate(("Recall@20", "NDCG@20")):
            diff = per_user[name][m] - per_user[before][m]
            print(f"{name} - {before} {metric}: {diff.mean():+.4f}, paired Wilcoxon p = {wilcoxon(diff).pvalue:.2g}")


if __name__ == "__main__":
    main()
