"""Which tail base do the command line's FEBR-stack and FEBR-rerank units choose?

For each fold and protocol of a committed table (``eval/results/<data set>/<protocol>/results.csv``
gives each base's tuned setting), the unit's FEBR is built and fitted as the CLI does, and the fit is
stopped right after the tail choice: printed are the best base on the selection sample, the tail
base chosen, the paired test against the first base (``tail_gain_``) and the sizes of the selection
and test samples.  Where every unit keeps the committed table's choice and sample, a change of the
tail rule leaves that table as it is::

    RECSYS_LTR_DATA=../shared/datasets python benchmarks/febr_tail_choice.py movielens-1m-implicit
    RECSYS_LTR_DATA=../shared/datasets python benchmarks/febr_tail_choice.py gowalla --protocols fixed \
        --methods FEBR-stack
"""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd

from recsys_ltr import datasets, split
from recsys_ltr.eval import tuning
from recsys_ltr.eval.methods import get_method
from recsys_ltr.eval.results import selection_metric
from recsys_ltr.febr import FEBR
from recsys_ltr.febr.bases import Workload


class _Chosen(Exception):
    """Raised right after the tail choice: the rest of the fit is not needed."""


def stop_after_tail_choice(record: dict):
    """Patch ``FEBR._set_tail`` to fill ``record`` and stop the fit."""
    set_tail = FEBR._set_tail

    def patched(self, samples):
        set_tail(self, samples)
        adg = self.history_[0]["base_" + self._val_key]
        record.update(
            best=list(adg)[int(np.argmax(list(adg.values())))],
            tail=" + ".join(self.tail_bases_),
            test=getattr(self, "tail_gain_", None),
            selection=int(samples.selection.users.size),
            tests=None if samples.tests is None else int(samples.tests.users.size),
        )
        raise _Chosen

    FEBR._set_tail = patched


def tuned(results: pd.DataFrame, fold: int) -> dict:
    """``{method: the chosen setting as .params}`` of one fold of a results table (what
    ``tuning.stack_context`` reads of a FoldResult)."""
    done = {}
    for method, rows in results[results.fold == fold].groupby("method"):
        done[method] = SimpleNamespace(params=json.loads(rows.params.iloc[0]))
    return done


def units(name: str, protocols):
    """``(protocol, fold, (train, val, test), settings)`` of every unit of the data set's tables."""
    for protocol in protocols:
        if protocol == "fixed":
            _, parts = datasets.load_presplit(name)
            splits, k, top = [(parts["train"], parts["valid"], parts["test"])], 20, None
        else:
            X = datasets.load(name).matrix
            top = 100 if protocol == "novelty" else None
            splits, k = split.folds(X, n_folds=3, random_state=0, exclude_top=top), 10
        push_down = None if top is None else split.top_items_trusted(X, top)
        settings = {"budget": "quick", "k": k, "num_threads": 1, "protocol": protocol, "push_down": push_down}
        for fold, parts in enumerate(splits):
            yield protocol, fold, parts, top, settings


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--results", default="eval/results")
    parser.add_argument("--methods", default="FEBR-stack,FEBR-rerank")
    parser.add_argument("--protocols", default="standard,novelty", help="comma-separated; gowalla: fixed")
    args = parser.parse_args()
    record = {}
    stop_after_tail_choice(record)
    for protocol, fold, parts, top, settings in units(args.dataset, args.protocols.split(",")):
        results = pd.read_csv(f"{args.results}/{args.dataset}/{protocol}/results.csv")
        for name in args.methods.split(","):
            select = selection_metric(protocol, settings["k"])
            context = tuning.stack_context(get_method(name), tuned(results, fold), top, Workload.of(parts[0]), select)
            record.clear()
            try:
                tuning.run_unit(name, fold, *parts, random_state=fold, context=context, **settings)
            except _Chosen:
                pass
            print(args.dataset, protocol, fold, name, record, flush=True)


if __name__ == "__main__":
    main()
