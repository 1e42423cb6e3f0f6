"""Cold start through content (issue 7 sec. 4): recommend items nobody has consumed, from content alone.

Protocol (per data set and seed)
--------------------------------
* Catalogue: the ``--items`` most popular items having content after the tag filter (tags used by
  >= 3 of the candidate items, at most ``--max-tags`` most frequent ones); content = tf-idf of the
  tag counts, rows L2-normalised.  Users without any interaction with these items are dropped.
* Cold items: a random 20% of the catalogue (seeded).  ALL their interactions are removed from
  training; the test set is every user's interactions with cold items.
* Candidates are the cold items only: every scorer gives warm items ``-inf``, so a cold test
  item's rank counts cold candidates only (ADG, REC@10 depend on the rank alone; ties by id, since
  cold items all have training popularity 0).  Users with no training interaction (nothing to
  build on) or no cold test item are not evaluated.
* FRML is fit on the warm items' content with relevance = each warm item's 5% nearest warm items
  by cosine of their user vectors in the training matrix (settings of ``bench_frml.py``).

Methods
-------
* ``random (pop)``: popularity is undefined on cold items (all counts 0), so popularity degrades
  to an arbitrary order; we report a seeded random order (and not the id order, which may leak
  the data set's construction).
* ``content-pop``: the popularity a cold item is predicted to have, the affinity-weighted mean
  training popularity of its Euclidean content neighbours (same list for every user).
* ``item-p Euclid``: content item-p (ContentItemKNN) over ContentAffinity(metric=None): Euclidean
  on tf-idf/L2 content (the cosine neighbourhood of tag vectors).
* ``item-p FRML``: the same over ContentAffinity(metric=FRML fitted as above).
* ``oracle pop``: the cold items' TEST counts, a reference only (not a valid method: it reads the
  test set); it shows how much of the task pure popularity explains.

Figures are medians over ``--runs`` seeds (each: new cold split, new FRML seed).  Usage::

    NUMBA_NUM_THREADS=2 python benchmarks/cold_start.py [--datasets lastfm-2k citeulike-a]
        [--runs 3] [--items 3000] [--k 100]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.preprocessing import normalize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_frml import FRML_PARAMS  # noqa: E402  (same directory)

from recsys_ltr.metric.frml import FRML  # noqa: E402
from recsys_ltr.metrics import evaluate  # noqa: E402
from recsys_ltr.models.content import ContentItemKNN  # noqa: E402
from recsys_ltr.neighbors.content import ContentAffinity, top_fraction  # noqa: E402

METRICS = ("ADG", "REC@10")
COLD_FRACTION = 0.2


def catalogue(name, n_items, max_tags):
    """Binary users x items matrix and tf-idf/L2 content of the selected items."""
    from recsys_ltr import datasets

    data = datasets.load(name)
    X = sp.csc_matrix(data.matrix > 0, dtype=np.float64)
    F = sp.csr_matrix(data.item_features)
    tagged = np.flatnonzero(np.diff(F.indptr) > 0)
    df = np.diff(sp.csc_matrix(F[tagged] > 0).indptr)
    keep = np.flatnonzero(df >= 3)
    keep = keep[np.argsort(-df[keep], kind="stable")[:max_tags]]
    F = F[:, keep]
    popularity = np.diff(X.indptr)
    eligible = np.flatnonzero((np.diff(F.indptr) > 0) & (popularity > 0))
    items = np.sort(eligible[np.argsort(-popularity[eligible], kind="stable")[:n_items]])
    X = sp.csr_matrix(X[:, items])
    X = X[np.diff(X.indptr) > 0]
    content = normalize(TfidfTransformer().fit_transform(F[items]))
    return X, sp.csr_matrix(content)


def cold_split(X, seed):
    """(train, test, cold ids): test holds all interactions with a random 20% of the items."""
    n = X.shape[1]
    cold = np.sort(np.random.default_rng(seed).choice(n, int(round(COLD_FRACTION * n)), replace=False))
    is_cold = np.zeros(n, bool)
    is_cold[cold] = True
    coo = X.tocoo()
    on_cold = is_cold[coo.col]
    part = lambda mask: sp.csr_matrix((coo.data[mask], (coo.row[mask], coo.col[mask])), shape=X.shape)  # noqa: E731
    return part(~on_cold), part(on_cold), cold


def fit_frml(name, train, content, cold, seed, threads):
    """FRML on the warm items, relevance = 5% nearest warm items by cosine of user vectors."""
    warm = np.setdiff1d(np.arange(train.shape[1]), cold)
    U = normalize(sp.csr_matrix(train.T)[warm])
    R = top_fraction((U @ U.T).toarray(), 0.05, exclude_self=True)
    return FRML(random_state=seed, num_threads=threads, **FRML_PARAMS[name]).fit(content[warm], relevance=R)


def cold_scorer(score_rows, cold, n_items):
    """Score function for :func:`evaluate`: the model's scores on cold items, ``-inf`` elsewhere."""
    warm = np.setdiff1d(np.arange(n_items), cold)

    def score(ids):
        S = np.array(score_rows(ids), dtype=np.float64)
        S[:, warm] = -np.inf
        return S

    return score


def constant_scorer(values):
    return lambda ids: np.broadcast_to(values, (len(ids), values.size))


def run(name, X, content, seed, k, threads):
    train, test, cold = cold_split(X, seed)
    n_items = X.shape[1]
    users = np.flatnonzero(np.diff(train.indptr) > 0)
    start = time.perf_counter()
    euclid = ContentAffinity(k=k).fit(content)
    t_euclid = time.perf_counter() - start
    frml = fit_frml(name, train, content, cold, seed, threads)
    start = time.perf_counter()
    learned = ContentAffinity(k=k, metric=frml).fit(content)
    t_learned = time.perf_counter() - start

    popularity = np.diff(train.tocsc().indptr).astype(np.float64)
    A = euclid.affinity_.matrix
    mass = np.asarray(A.sum(axis=1)).ravel()
    content_pop = (A @ popularity) / np.where(mass > 0, mass, 1.0)
    scorers = {
        "random (pop)": constant_scorer(np.random.default_rng(seed + 1).random(n_items)),
        "content-pop": constant_scorer(content_pop),
        "item-p Euclid": ContentItemKNN(euclid, k=k, num_threads=threads).fit(train).score,
        "item-p FRML": ContentItemKNN(learned, k=k, num_threads=threads).fit(train).score,
        "oracle pop": constant_scorer(np.diff(test.tocsc().indptr).astype(np.float64)),
    }
    results = {}
    for method, score in scorers.items():
        res = evaluate(cold_scorer(score, cold, n_items), train, test, metrics=METRICS, users=users,
                       num_threads=threads)
        results[method] = {m: res[m] for m in METRICS}
    info = dict(users=len(res.users), cold=cold.size, test=test.nnz, frml_fit=frml.fit_time_,
                knn_euclid=t_euclid, knn_frml=t_learned)
    return results, info


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["lastfm-2k", "citeulike-a"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--max-tags", type=int, default=1000)
    parser.add_argument("--k", type=int, default=100)
    args = parser.parse_args()
    threads = int(os.environ.get("NUMBA_NUM_THREADS", "2"))
    print(f"# cold_start: {' '.join(sys.argv)}  (NUMBA_NUM_THREADS={threads}, medians over {args.runs} seeds; "
          f"{COLD_FRACTION:.0%} of the items cold; candidates = cold items)")
    for name in args.datasets:
        try:
            X, content = catalogue(name, args.items, args.max_tags)
        except (FileNotFoundError, ValueError, ImportError) as exc:
            print(f"\n## {name}: skipped ({exc})")
            continue
        runs = [run(name, X, content, seed, args.k, threads) for seed in range(args.runs)]
        info = {key: float(np.median([r[1][key] for r in runs])) for key in runs[0][1]}
        print(f"\n## {name}: {X.shape[0]} users x {X.shape[1]} items ({content.shape[1]} tags), "
              f"{info['cold']:.0f} cold items, {info['test']:.0f} test interactions, {info['users']:.0f} users "
              f"evaluated; k = {args.k}")
        print(f"#   FRML fit {info['frml_fit']:.1f} s, content KNN {info['knn_euclid']:.2f} s (Euclid) / "
              f"{info['knn_frml']:.2f} s (FRML)")
        base = {m: np.median([r[0]["item-p Euclid"][m] for r in runs]) for m in METRICS}
        print(f"{'method':<15} " + " ".join(f"{m:>8}" for m in METRICS) + " " + " ".join(f"{m + '/Eu':>10}" for m in METRICS))
        for method in runs[0][0]:
            med = {m: float(np.median([r[0][method][m] for r in runs])) for m in METRICS}
            print(f"{method:<15} " + " ".join(f"{med[m]:8.4f}" for m in METRICS) + " "
                  + " ".join(f"{med[m] / base[m]:10.3f}" for m in METRICS))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
