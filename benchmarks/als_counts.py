"""ALS() on the raw counts of a data set and on their transforms: why ``ALS`` warns on large counts.

``split.holdout(val=0, test=0.2, seed 0)`` of the data set's weighted matrix (play counts for
lastfm-2k); ``ALS()`` at its defaults fitted on the binary matrix, the raw counts, the counts divided
by 10 and 100, ``log_weight`` and ``bm25_weight`` of them; NDCG@10 and ADG on the test part.  The
warning's threshold (:data:`recsys_ltr.models.factorization.RAW_COUNT_MEDIAN`) is read off this table::

    RECSYS_LTR_DATA=../shared/datasets python benchmarks/als_counts.py --dataset lastfm-2k
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from recsys_ltr import datasets, split
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS
from recsys_ltr.weighting import bm25_weight, log_weight


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="lastfm-2k")
    args = parser.parse_args()
    train, _, test = split.holdout(datasets.load(args.dataset).weighted_matrix, val=0.0, test=0.2, random_state=0)
    inputs = {
        "binary": train.sign(),
        "raw counts": train,
        "counts / 10": train / 10.0,
        "counts / 100": train / 100.0,
        "log_weight": log_weight(train),
        "bm25_weight": bm25_weight(train),
    }
    print("| input | median value | warns | NDCG@10 | ADG |\n|---|---:|---|---:|---:|")
    for name, X in inputs.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = ALS(random_state=0, show_progress=False).fit(X)
        result = evaluate(model, train, test, metrics=["NDCG@10", "ADG"])
        warned = "yes" if any("saturate" in str(w.message) for w in caught) else "no"
        print(f"| {name} | {np.median(X.data):.3g} | {warned} | {result['NDCG@10']:.4f} | {result['ADG']:.4f} |")


if __name__ == "__main__":
    main()
