"""Default settings of ALS and BPR: candidate defaults scored on every data set, one fold.

The eval tables (``eval/results/*/standard/tuning.csv``) show that implicit's own defaults
(ALS: ``alpha=1``, i.e. no extra confidence on positives, ``regularization=0.01``; BPR:
``learning_rate=0.01`` for 100 epochs) are weak.  This script fits each candidate setting on the
training part of fold 0 (``split.folds(X, 1, random_state=0)``: per user 10% validation, 20% test, the
eval protocol) and prints validation ADG (what a default is chosen on) and test ADG (what is
reported), with the validation positives excluded from the test candidates.

    NUMBA_NUM_THREADS=2 PYTHONPATH=. python benchmarks/defaults_als_bpr.py \\
        [--datasets movielens-100k,msweb] [--models ALS,BPR] [--candidates 0,4]

Prints one line per (data set, model, setting); ``default`` is the model's current default.
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse
import time

from recsys_ltr import datasets, split
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, BPR

DATASETS = ("movielens-100k", "movielens-1m-implicit", "lastfm-2k", "citeulike-a", "msweb")
#: Settings tried, in the order they were tried (``--candidates`` picks by index); ALS 8 is the
#: default since this script was written, BPR 0 (implicit's) remains the default.
CANDIDATES = {
    "ALS": [
        {"factors": 64, "regularization": 0.01, "alpha": 1.0},  # implicit's defaults (the old ones here)
        {"factors": 64, "regularization": 10.0, "alpha": 10.0},
        {"factors": 64, "regularization": 10.0, "alpha": 40.0},
        {"factors": 64, "regularization": 100.0, "alpha": 40.0},
        {"factors": 64, "regularization": 30.0, "alpha": 20.0},
        {"factors": 64, "regularization": 30.0, "alpha": 40.0},
        {"factors": 64, "regularization": 100.0, "alpha": 10.0},
        {"factors": 64, "regularization": 50.0, "alpha": 20.0},
        {"factors": 64, "regularization": 100.0, "alpha": 20.0},
    ],
    "BPR": [
        {"factors": 64, "learning_rate": 0.01, "regularization": 0.01, "iterations": 100},  # implicit's defaults
        {"factors": 64, "learning_rate": 0.05, "regularization": 0.01, "iterations": 100},
        {"factors": 64, "learning_rate": 0.1, "regularization": 0.01, "iterations": 100},
        {"factors": 64, "learning_rate": 0.05, "regularization": 0.01, "iterations": 200},
        {"factors": 64, "learning_rate": 0.1, "regularization": 0.01, "iterations": 200},
        {"factors": 64, "learning_rate": 0.01, "regularization": 0.01, "iterations": 300},
        {"factors": 64, "learning_rate": 0.005, "regularization": 0.01, "iterations": 300},
        {"factors": 64, "learning_rate": 0.01, "regularization": 0.001, "iterations": 300},
        {"factors": 64, "learning_rate": 0.01, "regularization": 0.01, "iterations": 30},
        {"factors": 64, "learning_rate": 0.01, "regularization": 0.05, "iterations": 100},
        {"factors": 64, "learning_rate": 0.01, "regularization": 0.1, "iterations": 100},
        {"factors": 64, "learning_rate": 0.005, "regularization": 0.01, "iterations": 100},
    ],
}
MODELS = {"ALS": ALS, "BPR": BPR}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--models", default="ALS,BPR")
    p.add_argument("--candidates", help="comma-separated indices into each model's candidate list (default: all)")
    args = p.parse_args(argv)
    picked = None if args.candidates is None else [int(i) for i in args.candidates.split(",")]
    for name in args.datasets.split(","):
        X = datasets.load(name).matrix
        train, val, test = next(split.folds(X, n_folds=1, random_state=0))
        for model_name in args.models.split(","):
            cls = MODELS[model_name]
            defaults = {k: v for k, v in cls().get_params().items() if k in CANDIDATES[model_name][0]}
            candidates = CANDIDATES[model_name]
            for params in candidates if picked is None else [candidates[i] for i in picked]:
                t0 = time.perf_counter()
                model = cls(**params, num_threads=2, random_state=0, show_progress=False).fit(train)
                seconds = time.perf_counter() - t0
                v = evaluate(model, train, val, exclude=test, metrics=["ADG"])["ADG"]
                t = evaluate(model, train, test, exclude=val, metrics=["ADG"])["ADG"]
                mark = "  default" if params == defaults else ""
                print(
                    f"{name:22s} {model_name} {params}: validation ADG {v:.4f}, test ADG {t:.4f}, fit {seconds:.1f} s{mark}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
