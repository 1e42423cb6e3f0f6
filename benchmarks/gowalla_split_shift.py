"""Is gowalla's ``test.txt`` exchangeable with a random per-user holdout of the training data?

A model validated on held-out training positives (FEBR's carved validation, or ``valid.txt``) can only
be as right about ``test.txt`` as those positives are like the test's.  Each model, at its defaults,
is scored on a fixed sample of users under four splits of ``../shared/datasets/gowalla``:

* ``valid.txt``: fitted on ``train.txt``, scored on ``valid.txt`` (the split's own validation);
* ``carved``: fitted on a random 90% of each user's ``train.txt + valid.txt`` (``split.holdout``, as
  ``FEBR()`` carves its validation), scored on the other 10%;
* ``test.txt``: fitted on ``train.txt + valid.txt``, scored on ``test.txt`` (the published protocol);
* ``random``: fitted on a random 79% of each user's positives of all three files, scored on the other
  21% (``test.txt``'s share): a test set exchangeable with the training data by construction.

Printed: Recall@20 / NDCG@20 of each model under each split and, per split, each model's Recall@20
relative to GF-CF's.  ``--febr`` adds ``FEBR(random_state=seed)`` at its defaults (its own carved
validation) on the ``test.txt`` and ``random`` splits, and with ``--validation-metric`` another of
its validation metrics.  Where ``test.txt`` ranks the models as ``random`` does, validation on held-out
training data can choose for it; where it does not, every choice made on validation is biased::

    NUMBA_NUM_THREADS=2 RECSYS_LTR_DATA=../shared/datasets python benchmarks/gowalla_split_shift.py \\
        [--users 3000] [--models EASE,GF-CF,BSPM,RP3beta,ALS,user-p] [--febr] [--validation-metric REC@20]
"""

from __future__ import annotations

import argparse

import numpy as np

from recsys_ltr import split
from recsys_ltr.datasets import load_presplit
from recsys_ltr.febr import FEBR
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, BSPM, EASE, GFCF, RP3beta, UserKNN

MODELS = {"EASE": EASE, "GF-CF": GFCF, "BSPM": BSPM, "RP3beta": RP3beta, "ALS": ALS, "user-p": UserKNN}
METRICS = ("REC@20", "NDCG@20")


def splits(parts, seed):
    """``{name: (training matrix, held-out matrix)}`` of the four splits (module docstring)."""
    train, valid, test = parts["train"], parts["valid"], parts["test"]
    both = (train + valid).tocsr()
    carved_train, carved, _ = split.holdout(both, val=0.1, test=0.0, random_state=seed)
    share = test.nnz / (both.nnz + test.nnz)
    everything = (both + test).tocsr()
    everything.data[:] = 1.0
    random_train, _, random_test = split.holdout(everything, val=0.0, test=share, random_state=seed)
    return {
        "valid.txt": (train, valid),
        "carved": (carved_train, carved),
        "test.txt": (both, test),
        "random": (random_train, random_test),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=3000, help="users scored (a seeded sample)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--febr", action="store_true", help="FEBR() too, on the test.txt and random splits")
    parser.add_argument("--validation-metric", default="ADG", help="FEBR's validation_metric")
    args = parser.parse_args()
    names = args.models.split(",")
    factories = {**MODELS, "FEBR": lambda: FEBR(random_state=args.seed, validation_metric=args.validation_metric)}
    _, parts = load_presplit("gowalla")
    n_users = parts["train"].shape[0]
    users = np.sort(np.random.default_rng(args.seed).choice(n_users, min(args.users, n_users), replace=False))
    recall = {}
    for split_name, (train, held) in splits(parts, args.seed).items():
        scored = users[np.diff(held.indptr)[users] > 0]
        for name in names + (["FEBR"] if args.febr and split_name in ("test.txt", "random") else []):
            model = factories[name]().fit(train)
            result = evaluate(model, train, held, metrics=list(METRICS), users=scored, show_progress=False)
            recall[split_name, name] = result["REC@20"]
            print(
                f"{split_name:9s} {name:8s} "
                + " ".join(f"{m} {result[m]:.4f}" for m in METRICS)
                + f" ({scored.size} users)",
                flush=True,
            )
    reference = "GF-CF" if "GF-CF" in names else names[0]
    print(f"\nRecall@20 relative to {reference}'s, per split:")
    print(f"{'':9s} " + " ".join(f"{name:>8s}" for name in names + ["FEBR"]))
    for split_name in ("valid.txt", "carved", "test.txt", "random"):
        row = [recall.get((split_name, name), np.nan) / recall[split_name, reference] for name in names + ["FEBR"]]
        print(f"{split_name:9s} " + " ".join(f"{r:8.3f}" for r in row))


if __name__ == "__main__":
    main()
