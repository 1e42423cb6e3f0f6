"""Which setting of each default base's grid does ``FEBR()`` choose, and by how much?

For each data set and seed: ``split.holdout(X, val=0.1, test=0.2, random_state=seed)`` and
``FEBR(random_state=seed).fit(train)`` with every grid of :data:`recsys_ltr.febr.bases.AUTO_BASES`
widened by the settings it no longer searches (:data:`DROPPED`); printed is each setting's ADG on the
label part (the number FEBR ranks the settings by) and, per base, how often each setting won.  A
setting that never wins and trails its grid's best everywhere costs a fit for nothing::

    NUMBA_NUM_THREADS=2 RECSYS_LTR_DATA=../shared/datasets python benchmarks/febr_grids.py \\
        [--datasets movielens-100k,msweb,lastfm-2k,movielens-1m-implicit,citeulike-a] [--seeds 0,1]
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict

import recsys_ltr.febr.bases as febr_bases
from recsys_ltr import datasets, split
from recsys_ltr.febr import FEBR

#: Settings the default grids searched before they were dropped (never won on the five data sets).
DROPPED = {
    "ALS": ({"regularization": 1.0, "alpha": 2.0},),
    "RP3beta": ({"beta": 0.7},),
    "KUNN": ({"k": 50},),
    "item-p": ({"k": 50},),
}


def record_grid_adg(log: list):
    """Patch FEBR's grid search to append ``(base class, setting, label-part ADG)`` to ``log``."""
    evaluate = febr_bases.evaluate_trusted

    def patched(model, *args, **kwargs):
        result = evaluate(model, *args, **kwargs)
        params = model.get_params()
        setting = {n: params[n] for n in ("regularization", "alpha", "beta", "k") if n in params}
        log.append((type(model).__name__, tuple(setting.items()), result["ADG"]))
        return result

    febr_bases.evaluate_trusted = patched


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="movielens-100k,msweb,lastfm-2k,movielens-1m-implicit,citeulike-a")
    parser.add_argument("--seeds", default="0,1")
    args = parser.parse_args()
    febr_bases.AUTO_BASES = tuple(b._replace(grid=b.grid + DROPPED.get(b.name, ())) for b in febr_bases.AUTO_BASES)
    log, wins = [], defaultdict(Counter)
    record_grid_adg(log)
    for name in args.datasets.split(","):
        X = datasets.load(name).matrix
        for seed in (int(s) for s in args.seeds.split(",")):
            train, _, _ = split.holdout(X, val=0.1, test=0.2, random_state=seed)
            log.clear()
            FEBR(random_state=seed, show_progress=False).fit(train)
            grids = defaultdict(list)
            for base, setting, adg in log:
                grids[base].append((setting, adg))
            print(f"{name}, seed {seed}")
            for base, points in grids.items():
                best = max(points, key=lambda p: p[1])
                wins[base][best[0]] += 1
                cells = [f"{'/'.join(f'{v:g}' for _, v in s)}: {adg:.4f}" for s, adg in points]
                print(f"  {base:8s} " + "  ".join(cells), flush=True)
    print("\nwins per setting (label-part ADG, over data sets and seeds):")
    for base, counter in wins.items():
        print(f"  {base:8s} " + "  ".join(f"{dict(s)}: {n}" for s, n in counter.most_common()))


if __name__ == "__main__":
    main()
