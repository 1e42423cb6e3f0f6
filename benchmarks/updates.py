"""Updates without a refit against a refit: the quality and the seconds of ``partial_fit``.

``split.holdout(val=0, test=0.2, seed 0)`` of a data set; every model at its defaults is fitted on
the training rows of the first ``--share`` of the users (in the data's order) and of the items they
have, then the other users (and the items only they have) are added by ``Interactions.partial_fit``
-- ``partial_fit_items`` for the new items, ``partial_fit_users`` for the new users; a model that
cannot add items gets the users' rows on the items it knows -- and compared
with the same model refitted on every user's training rows: NDCG@10 and Recall@20 on the test items
of the added users, the seconds of the update and of the refit::

    RECSYS_LTR_DATA=../shared/datasets python benchmarks/updates.py --dataset lastfm-2k
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from _timing import timed

from recsys_ltr import Interactions, datasets, split
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, EASE, GFCF, KUNN, ItemKNN, Popularity, RP3beta, UserKNN

MODELS = {
    "ALS": ALS,
    "ItemKNN": ItemKNN,
    "UserKNN": UserKNN,
    "KUNN": KUNN,
    "RP3beta": RP3beta,
    "EASE": EASE,
    "GFCF": GFCF,
    "Popularity": Popularity,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="lastfm-2k")
    parser.add_argument("--share", type=float, default=0.8, help="share of the users fitted first")
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    data = datasets.load(args.dataset)
    train, _, test = split.holdout(data.matrix, val=0.0, test=0.2, random_state=0)
    everyone = Interactions.from_sparse(train)
    n_first = int(args.share * data.n_users)
    log = everyone.to_dataframe()
    first = log["user"] < n_first
    print(
        f"{args.dataset}: {n_first} users fitted first, {data.n_users - n_first} added "
        f"({int((~first).sum())} training positives)"
    )
    print(
        "| model | update s | refit s | NDCG@10 update / refit | Recall@20 update / refit |\n|---|---:|---:|---:|---:|"
    )
    metrics = ["NDCG@10", "Recall@20"]
    for name in args.models.split(","):
        make = MODELS[name]
        start = Interactions.from_dataframe(log[first])
        model = make().fit(start.matrix)
        added_log, note = log[~first], ""
        try:
            seconds, _, grown = timed(lambda: start.partial_fit(model, Interactions.from_dataframe(added_log)))
        except NotImplementedError:  # new items need a refit (the model is unchanged): the known items' rows
            added_log, note = added_log[added_log["item"].isin(start.item_ids)], " (known items)"
            seconds, _, grown = timed(lambda: start.partial_fit(model, Interactions.from_dataframe(added_log)))
        refit_seconds, _, refit = timed(lambda: make().fit(train))
        # the grown data's internal order is not the data's: the added users' scores in the data's order
        added = np.arange(n_first, data.n_users)
        added = added[np.isin(added, grown.user_ids)]  # on known items only, a few users have no row left
        note += (
            f" ({data.n_users - n_first - added.size} users left out)" if added.size < data.n_users - n_first else ""
        )
        cols = pd.Index(grown.item_ids).get_indexer(np.arange(data.n_items))  # -1: an item no training row has
        ours = evaluate(_Reordered(model, grown.user_index(added), cols), train[added], test[added], metrics=metrics)
        theirs = evaluate(refit, train, test, metrics=metrics, users=added)
        print(
            f"| {name}{note} | {seconds:.2f} | {refit_seconds:.2f} | {ours['NDCG@10']:.4f} / {theirs['NDCG@10']:.4f} | "
            f"{ours['Recall@20']:.4f} / {theirs['Recall@20']:.4f} |"
        )


class _Reordered:
    """The updated model's scores of the added users, its columns in the data's item order."""

    def __init__(self, model, rows, cols):
        self.model, self.rows, self.cols = model, rows, cols

    def __call__(self, user_ids):
        scores = self.model.score(self.rows[user_ids])[:, np.maximum(self.cols, 0)]
        scores[:, self.cols < 0] = -np.inf
        return scores


if __name__ == "__main__":
    main()
