"""The graph filters at the authors' settings on gowalla's LightGCN split: ``GFCF()`` and ``BSPM()``.

Both defaults are their papers' gowalla settings (GF-CF: 256 factors, alpha 0.3; BSPM: 448 factors,
beta 0.2, one RK4 sharpening step over 2.5), so this reproduces the published rows without tuning:
each model is fitted on ``train.txt`` + ``valid.txt`` of ``../shared/datasets/gowalla`` and ranks
every item outside a user's training positives for ``test.txt`` (``--protocol fixed``'s metrics).
Prints fit and scoring seconds, peak memory and Recall@20 / NDCG@20, and the paired Wilcoxon
test of BSPM against GF-CF over the test users::

    NUMBA_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 RECSYS_LTR_DATA=../shared/datasets \\
        python benchmarks/gowalla_bspm.py
"""

from __future__ import annotations

import argparse
import resource
import time

from scipy.stats import wilcoxon

from recsys_ltr.datasets import load_presplit
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import BSPM, GFCF

GB = 2**30
PUBLISHED = {"GFCF": (0.1849, 0.1518), "BSPM": (0.1920, 0.1597)}


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    _, parts = load_presplit("gowalla")
    train = (parts["train"] + parts["valid"]).tocsr()
    per_user = {}
    for model in (GFCF(), BSPM()):
        name = type(model).__name__
        t0 = time.perf_counter()
        model.fit(train)
        fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = evaluate(model, train, parts["test"], metrics=["REC@20", "NDCG@20"], show_progress=False)
        score = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB
        per_user[name] = result.per_user["REC@20"], result.per_user["NDCG@20"]
        print(
            f"{name}: fit {fit:.1f} s, scoring {result.per_user['REC@20'].size} test users {score:.1f} s, "
            f"peak {peak:.2f} GB; Recall@20 {result['REC@20']:.4f}, NDCG@20 {result['NDCG@20']:.4f} "
            f"(published {PUBLISHED[name][0]:.4f} / {PUBLISHED[name][1]:.4f})",
            flush=True,
        )
    for m, metric in enumerate(("Recall@20", "NDCG@20")):
        diff = per_user["BSPM"][m] - per_user["GFCF"][m]
        print(f"BSPM - GF-CF {metric}: {diff.mean():+.4f}, paired Wilcoxon p = {wilcoxon(diff).pvalue:.2g}")


if __name__ == "__main__":
    main()
