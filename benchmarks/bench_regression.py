"""No-regression check: this checkout against a baseline git ref on the same operations.

Every operation runs in a fresh Python subprocess whose ``PYTHONPATH`` is this checkout or a
temporary detached worktree of ``--baseline`` (default ``ead6bbd``, the commit where the
throughput issue was opened; removed afterwards; both through ``benchmarks/_baseline.py``).  Inside the subprocess the data are prepared,
the operation is called once untimed (warm-up: numba compiles or loads its cache) and then timed
``--calls`` times (their median).  Runs alternate (ours, baseline, ours, ...) so both sides see
the same machine; the table gives the median wall seconds of ``--runs`` runs and the ratio this
code / baseline.  Each subprocess also prints a short digest of its result, and a row is flagged
when the digests of the two sides differ.

Operations (the same computation on both sides; only import paths differ):

* ``tour``: the README's short tour (import, load movielens-100k, split, ``ItemKNN(k=50).fit``, one
  ``recommend``, ``evaluate``) in a fresh process with an empty numba cache: the first contact of a
  new user, timed whole (``--calls`` does not apply); and the warm ``import recsys_ltr.models``.
* ``knn-fit``: ``ItemKNN(k=100).fit(X)`` on the whole movielens-1m-implicit matrix.
* ``evaluate``: ``evaluate(ItemKNN(k=100).fit(train), train, test, k=10)`` on gowalla,
  ``split.holdout(X, val=0.0, test=0.2, random_state=0)``; the evaluate call alone is timed.
* ``febr``: ``FEBR(random_state=0).fit(train)`` at its defaults (stacked FEBR, the call a user makes)
  on movielens-1m-implicit, ``split.holdout(X, val=0.1, test=0.2, random_state=0)``; two threads.
* ``febri``: the dissertation's FEBRi on item-p cosine features (``recsys_ltr.models.FEBR`` at
  ead6bbd, ``recsys_ltr.febr.AffinityFEBR`` now), ``fit(train, validation=val)`` on the same split.
  Settings, the ead6bbd constructor's defaults passed explicitly on both sides: affinity="cosine",
  side="item", k=100, regularization (lam) 1e-3, learning_rate=0.01, 2,000,000 samples, gamma=50,
  beta=None, eval_every=100_000, early_stopping=5, holdout=0.0, validation_users=None, init="sum",
  random_state=0 (num_threads=0: all NUMBA_NUM_THREADS).  The warm-up fit stops after 1000 samples.
* ``frml``: FRML-WARP fit (``recsys_ltr.metric`` at ead6bbd, ``recsys_ltr.metric_learning`` now)
  on a seeded synthetic classification problem: 2000 points, 10 classes, 128 dimensions (Gaussian
  class means plus noise); n_components=32, max_iter=5000, learning_rate=4.0, kappa=0.1,
  init="pca", random_state=0, num_threads=2 (the settings of ``bench_frml.py``'s digits task).
* ``lgmml``: ``LGMML(random_state=0)`` (its defaults, one thread) fitted on LETOR MQ2008 fold 1
  train (``recsys_ltr.metric`` at ead6bbd, ``recsys_ltr.ltr`` now).

Operations take the names a side has (``OLD``: the baseline's spellings where they were renamed).

Usage::

    RECSYS_LTR_DATA=../shared/datasets python benchmarks/bench_regression.py [--runs 3] [--calls 3]
        [--baseline ead6bbd] [--only tour,knn-fit,febr] [--contention]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys

from _baseline import ROOT, checkout, fresh_process

ENV = {"NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2", "RECSYS_LTR_COMPILE_NOTICE": "0",
       "RECSYS_LTR_DATA": os.environ.get("RECSYS_LTR_DATA", str(ROOT.parent / "shared" / "datasets"))}  # fmt: skip

# Each snippet defines ``setup`` (untimed), ``run`` (the timed call), ``warm`` (the warm-up call,
# default ``run``) and ``digest(result)``; ``OLD`` is True at the baseline.
HARNESS = """
import time
OLD = {old}
{snippet}
setup()
(globals().get("warm") or run)()
seconds = []
for _ in range({calls}):
    t = time.perf_counter()
    result = run()
    seconds.append(time.perf_counter() - t)
print(sorted(seconds)[len(seconds) // 2], digest(result))
"""
KNN_FIT = """
import numpy as np
from recsys_ltr import datasets
from recsys_ltr.models import ItemKNN
def setup():
    global X
    X = datasets.load("{name}").matrix.tocsr()
def run():
    return ItemKNN(k=100).fit(X)
def digest(m):
    return f"{{m.score(np.arange(100)).sum():.6g}}"
"""
EVALUATE = """
from recsys_ltr import datasets, split
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ItemKNN
def setup():
    global train, test, model
    X = datasets.load("gowalla").matrix.tocsr()
    train, _, test = split.holdout(X, val=0.0, test=0.2, **{{"seed" if OLD else "random_state": 0}})
    model = ItemKNN(k=100).fit(train)
def run():
    return evaluate(model, train, test, k=10)
def digest(r):
    return ",".join(f"{{k}}={{v:.5f}}" for k, v in sorted(r.items()) if isinstance(v, float))
"""
FEBR = """
from recsys_ltr import datasets, split
from recsys_ltr.febr import FEBR
def setup():
    global train
    X = datasets.load("movielens-1m-implicit").matrix.tocsr()
    train = split.holdout(X, val=0.1, test=0.2, **{{"seed" if OLD else "random_state": 0}})[0]
def warm():
    return FEBR(random_state=0, **{{"iterations" if OLD else "max_iter": 1000}}).fit(train[:500])
def run():
    return FEBR(random_state=0, show_progress=False).fit(train)
def digest(m):
    return f"best_it={{m.best_iteration_}},val_adg={{max(h.get('val_adg', 0) for h in m.history_):.4f}}"
"""
FEBRI = """
import numpy as np
from recsys_ltr import datasets, split
if OLD:
    from recsys_ltr.models import FEBR
    names = {{"lam": 1e-3, "iterations": 2_000_000}}
else:
    from recsys_ltr.febr import AffinityFEBR as FEBR
    names = {{"regularization": 1e-3, "max_iter": 2_000_000}}
P = dict(affinity="cosine", side="item", k=100, learning_rate=0.01, gamma=50, beta=None, eval_every=100_000,
         early_stopping=5, holdout=0.0, validation_users=None, init="sum", random_state=0, show_progress=False,
         **names)
def setup():
    global train, val
    X = datasets.load("movielens-1m-implicit").matrix.tocsr()
    train, val, _ = split.holdout(X, val=0.1, test=0.2, **{{"seed" if OLD else "random_state": 0}})
def warm():
    return FEBR(**{{**P, "iterations" if OLD else "max_iter": 1000, "eval_every": 500}}).fit(train, validation=val)
def run():
    return FEBR(**P).fit(train, validation=val)
def digest(m):
    return f"best_it={{m.best_iteration_}},val_adg={{max(h.get('val_adg', 0) for h in m.history_):.4f}}"
"""
FRML = """
import numpy as np
if OLD:
    from recsys_ltr.metric import FRML
else:
    from recsys_ltr.metric_learning import FRML
def setup():
    global X, y
    rng = np.random.default_rng(0)
    y = rng.integers(10, size=2000)
    X = rng.normal(size=(10, 128))[y] * 0.5 + rng.normal(size=(2000, 128))
def run():
    return FRML(n_components=32, max_iter=5000, learning_rate=4.0, kappa=0.1, init="pca", random_state=0,
                num_threads=2).fit(X, y)
def digest(m):
    return f"{{np.abs(m.components_).sum():.6g}}"
"""
LGMML = """
if OLD:
    from recsys_ltr.metric import LGMML
else:
    from recsys_ltr.ltr import LGMML
from recsys_ltr.datasets import load_letor
def setup():
    global X, y, q, Xt, qt
    d = load_letor("letor-mq2008", fold=1)
    (X, y, q), (Xt, _, qt) = d["train"], d["test"]
def run():
    return LGMML(random_state=0).fit(X, y, q)
def digest(m):
    return f"{{m.predict(Xt, qt).sum():.6g}}"
"""
TOUR = """
import time
c0, t0 = time.process_time(), time.perf_counter()
from recsys_ltr import datasets, split
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ItemKNN
data = datasets.load("movielens-100k")
train, val, test = split.holdout(data.matrix, val=0.1, test=0.2, **{"seed" if OLD else "random_state": 0})
model = ItemKNN(k=50).fit(train)
model.recommend(0, train[0], N=10)
evaluate(model, train, test, exclude=val, k=10)
print(time.perf_counter() - t0, "-")
"""
IMPORT = "import time; t = time.perf_counter(); import recsys_ltr.models; print(time.perf_counter() - t, '-')"
OPERATIONS = {
    "tour": [("cold tour (empty numba cache), movielens-100k", TOUR, True),
             ("warm import recsys_ltr.models", IMPORT, False)],
    "knn-fit": [("ItemKNN(k=100).fit, movielens-1m-implicit", KNN_FIT.format(name="movielens-1m-implicit"), None)],
    "evaluate": [("evaluate(ItemKNN k=100, k=10), gowalla 80/20", EVALUATE.format(), None)],
    "febr": [("FEBR(random_state=0).fit(train), movielens-1m-implicit", FEBR.format(), None)],
    "febri": [("FEBRi cosine fit(train, validation), movielens-1m-implicit", FEBRI.format(), None)],
    "frml": [("FRML-WARP fit, synthetic 2000 x 128", FRML.format(), None)],
    "lgmml": [("L-GMML fit, LETOR MQ2008 fold 1", LGMML.format(), None)],
}  # fmt: skip


def _spin():
    while True:
        pass


def once(snippet, path, old, calls, cold):
    """(median wall seconds of ``calls`` timed calls, digest) of one fresh subprocess running
    ``snippet`` from ``path``; ``cold`` (a whole-process snippet): with an empty numba cache or not."""
    code = f"OLD = {old}\n{snippet}" if cold is not None else HARNESS.format(old=old, snippet=snippet, calls=calls)
    seconds, digest = fresh_process(code, path, ENV, cold=bool(cold)).strip().splitlines()[-1].split(" ", 1)
    return float(seconds), digest


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3, help="timed calls per subprocess (their median)")
    parser.add_argument("--baseline", default="ead6bbd")
    parser.add_argument("--only", default=",".join(OPERATIONS), help=f"comma-separated subset of {list(OPERATIONS)}")
    parser.add_argument("--contention", action="store_true", help="run a CPU-bound competitor process throughout")
    args = parser.parse_args()
    if args.contention:  # as on a shared server
        multiprocessing.get_context("spawn").Process(target=_spin, daemon=True).start()
    print(
        f"# bench_regression: {' '.join(sys.argv)}; {ENV}; median of {args.runs} alternating runs x {args.calls} calls\n"
    )
    print(f"| operation | this code s | baseline ({args.baseline}) s | ratio |\n|---|---:|---:|---:|", flush=True)
    odd = []
    with checkout(args.baseline) as base:
        for key in args.only.split(","):
            for label, snippet, cold in OPERATIONS[key]:
                ours, theirs = [], []
                for _ in range(args.runs):  # alternating: both sides see the same machine
                    ours.append(once(snippet, ROOT, False, args.calls, cold))
                    theirs.append(once(snippet, base, True, args.calls, cold))
                a, b = statistics.median(t for t, _ in ours), statistics.median(t for t, _ in theirs)
                print(f"| {label} | {a:.2f} | {b:.2f} | {a / b:.2f} |", flush=True)
                digests = {d for _, d in ours}, {d for _, d in theirs}
                if digests[0] != digests[1]:
                    odd.append(
                        f"{label}: results differ: this code {sorted(digests[0])}, baseline {sorted(digests[1])}"
                    )
    for line in odd:
        print(f"\nNOTE {line}")


if __name__ == "__main__":
    main()
