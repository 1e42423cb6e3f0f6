"""FRML retrieval benchmark (issue 7 sec. 3; protocol of dissertation sec. 3.5).

Queries are the test points, the database is the training set; each query ranks the database by
learned distance.  Reported: MAP, P@1, P@10, AUC (means over queries) and fit time.

Tasks
-----
* ``digits``, ``wine`` (scikit-learn), z-scored with the training statistics after appending 64
  correlated Gaussian noise dimensions (Eq. 2.11: Σ from a unit-scale Wishart; sec. 2.4.1);
  relevant = same class.  70/30 random split.
* ``lastfm-2k`` artists (tf-idf of tag counts) and ``citeulike-a`` articles (tf-idf of item
  tags): the ``--items`` most popular items that have tags, tags kept when used by >= 3 training
  items (at most ``--max-tags``), 70/30 split; the relevant set of item q is its 5% nearest
  database items by cosine of their user vectors in the feedback matrix.

Methods: Euclidean (identity metric), FRML-WARP and FRML-AUC (β = 1), and metric-learn's LMNN,
ITML and NCA.

FRML tuning (dissertation sec. 3.5.1: hyper-parameters chosen by MAP on held-out data, κ tuned
for FRML-WARP).  Both FRML variants get the same grid of learning rates ``LEARNING_RATES`` and
initialisations (``init`` = "pca", "random"; a diverging setting is skipped); FRML-WARP also tries ``κ in KAPPAS`` (FRML-AUC is
β = 1 by definition and has no κ).  Other settings (``n_components``, ``max_iter``, λ = 0.1, batch
5, reciprocal loss) are fixed per task in ``FRML_PARAMS``.  Selection: a random 20% of the TRAINING
points become validation queries against the other 80% (relevance rebuilt on that split exactly as
for the test queries), one fit per setting with seed 0, best validation MAP wins; the chosen
setting is then refit on the whole training set for each of the ``--runs`` seeds and evaluated on
the test queries.  The test queries are never used for selection.  metric-learn 0.7.0 calls a scikit-learn argument removed
in recent releases, so the peers run in a separate virtual environment pinned to
``scikit-learn==1.5.*`` (created on first use, see ``benchmarks/_peers.py``) through a
subprocess; a peer that fails or exceeds ``--peer-timeout`` seconds is recorded as such.  LMNN and
NCA need class labels, so on the content tasks (relevance is not a class structure) they are
"n/a"; ITML runs there on pairs (relevant = similar, random non-relevant = dissimilar).

FRML rows are medians over ``--runs`` seeds; peers run once.  Usage::

    NUMBA_NUM_THREADS=2 python benchmarks/bench_frml.py [--tasks digits wine lastfm-2k citeulike-a]
        [--runs 3] [--no-peers] [--peer-timeout 900]
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.stats import wishart
from sklearn.datasets import load_digits, load_wine
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.preprocessing import normalize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._peers import VENV, run_peer_script
from recsys_ltr.metric_learning.frml import FRML, label_relevance
from recsys_ltr.metrics import retrieval_metrics
from recsys_ltr.neighbors.content import top_fraction

METRICS = ("MAP", "P@1", "P@10", "AUC")
FRML_PARAMS = {  # fixed settings; the tuned ones (learning_rate, init, kappa) come from the grid
    "digits": dict(n_components=32, max_iter=5000),
    "wine": dict(n_components=16, max_iter=3000),
    "lastfm-2k": dict(n_components=32, max_iter=5000),
    "citeulike-a": dict(n_components=32, max_iter=5000),
}
LEARNING_RATES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
INITS = ("pca", "random")
KAPPAS = (1.0, 0.1, 0.04)  # dissertation sec. 3.5.1
VALIDATION_FRACTION = 0.2


# ------------------------------------------------------------------------------------ tasks


def noisy_classification(name, seed, noise_dims=64):
    X, y = (load_digits if name == "digits" else load_wine)(return_X_y=True)
    rng = np.random.default_rng(seed)
    sigma = wishart(df=noise_dims, scale=np.eye(noise_dims)).rvs(random_state=seed)
    X = np.hstack((X, rng.multivariate_normal(np.zeros(noise_dims), sigma, size=len(X))))
    perm = rng.permutation(len(X))
    n_train = int(0.7 * len(X))
    tr, te = perm[:n_train], perm[n_train:]
    mean, std = X[tr].mean(axis=0), X[tr].std(axis=0)
    std[std == 0] = 1.0
    X = (X - mean) / std
    return dict(Xtr=X[tr], Xte=X[te], ytr=y[tr], yte=y[te], Rte=label_relevance(y[te], y[tr]))


def content_task(name, seed, n_items, max_tags):
    from recsys_ltr import datasets

    data = datasets.load(name)
    users = sp.csc_matrix(data.matrix > 0, dtype=np.float64)
    F = sp.csr_matrix(data.item_features)
    eligible = np.flatnonzero(np.diff(F.indptr) > 0)
    popularity = np.diff(users.indptr)[eligible]
    items = np.sort(eligible[np.argsort(-popularity, kind="stable")[:n_items]])
    rng = np.random.default_rng(seed)
    perm = rng.permutation(items.size)
    n_train = int(0.7 * items.size)
    tr, te = items[np.sort(perm[:n_train])], items[np.sort(perm[n_train:])]
    df = np.diff(sp.csc_matrix(F[tr] > 0).indptr)
    keep = np.flatnonzero(df >= 3)
    keep = keep[np.argsort(-df[keep], kind="stable")[:max_tags]]
    tfidf = TfidfTransformer().fit(F[tr][:, keep])
    Xtr = normalize(tfidf.transform(F[tr][:, keep])).toarray()
    Xte = normalize(tfidf.transform(F[te][:, keep])).toarray()
    U = normalize(users.T.tocsr())  # items x users, unit rows: cosine of user vectors
    Str = (U[tr] @ U[tr].T).toarray()  # cosines among training items, kept to split them again
    Rtr = top_fraction(Str.copy(), 0.05, exclude_self=True)
    Rte = top_fraction((U[te] @ U[tr].T).toarray(), 0.05, exclude_self=False)
    return dict(Xtr=Xtr, Xte=Xte, Rtr=Rtr, Rte=Rte, Str=Str)


def validation_task(task, seed):
    """The tuning task: a random ``VALIDATION_FRACTION`` of the training points as queries against
    the others, with relevance rebuilt on that split as for the test queries."""
    n = task["Xtr"].shape[0]
    perm = np.random.default_rng(seed).permutation(n)
    n_val = int(round(VALIDATION_FRACTION * n))
    va, tr = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    sub = dict(Xtr=task["Xtr"][tr], Xte=task["Xtr"][va])
    if "ytr" in task:
        y = task["ytr"]
        return {**sub, "ytr": y[tr], "Rte": label_relevance(y[va], y[tr])}
    S = task["Str"]
    Rtr = top_fraction(S[np.ix_(tr, tr)], 0.05, exclude_self=True)
    Rte = top_fraction(S[np.ix_(va, tr)], 0.05, exclude_self=False)
    return {**sub, "Rtr": Rtr, "Rte": Rte}


# ------------------------------------------------------------------------------------ peers

PEER_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import metric_learn
    data = np.load(sys.argv[1], allow_pickle=False)
    method, Xtr = sys.argv[3], data["Xtr"]
    start = time.perf_counter()
    if method == "ITML-pairs":
        pairs, labels = data["pairs"], data["pair_labels"]
        model = metric_learn.ITML(preprocessor=Xtr, random_state=0).fit(pairs, labels)
    else:
        cls = {"LMNN": metric_learn.LMNN, "ITML": metric_learn.ITML_Supervised, "NCA": metric_learn.NCA}[method]
        kwargs = {"n_neighbors": 10} if method == "LMNN" else {}
        model = cls(random_state=0, **kwargs).fit(Xtr, data["ytr"])
    elapsed = time.perf_counter() - start
    np.savez(sys.argv[2], L=model.components_)
    print(json.dumps({"fit_time": elapsed}))
    """
)


def similar_dissimilar_pairs(R, n_pairs, seed):
    rng = np.random.default_rng(seed)
    R = sp.csr_matrix(R)
    rows, cols = R.nonzero()
    take = rng.choice(rows.size, size=min(n_pairs, rows.size), replace=False)
    similar = np.column_stack((rows[take], cols[take]))
    a, b = rng.integers(R.shape[0], size=(2, 4 * n_pairs))
    ok = (a != b) & (np.asarray(R[a, b]).ravel() == 0)
    dissimilar = np.column_stack((a[ok], b[ok]))[: similar.shape[0]]
    pairs = np.vstack((similar, dissimilar))
    return pairs, np.concatenate((np.ones(len(similar)), -np.ones(len(dissimilar))))


def run_peer(method, task, timeout):
    arrays = {"Xtr": task["Xtr"]}
    if "ytr" in task:
        arrays["ytr"] = task["ytr"]
    else:
        arrays["pairs"], arrays["pair_labels"] = similar_dissimilar_pairs(task["Rtr"], 2000, 0)
    result, outputs, note = run_peer_script(PEER_SCRIPT, arrays, [method], timeout)
    if result is None:
        return None, note
    return (outputs["L"], result["fit_time"]), ""


# ------------------------------------------------------------------------------------ main


def evaluate(task, L):
    Ztr, Zte = (task["Xtr"], task["Xte"]) if L is None else (task["Xtr"] @ L.T, task["Xte"] @ L.T)
    return retrieval_metrics(Zte, Ztr, task["Rte"], ks=(1, 10))


def fit_frml(task, params, seed, threads):
    model = FRML(random_state=seed, num_threads=threads, **params)
    if "ytr" in task:
        return model.fit(task["Xtr"], task["ytr"])
    return model.fit(task["Xtr"], relevance=task["Rtr"])


def grid(variant):
    """The candidate settings of one FRML variant (module docstring)."""
    kappas = [{"kappa": k} for k in KAPPAS] if variant == "FRML-WARP" else [{"beta": 1}]
    return [{"learning_rate": lr, "init": init, **kb} for lr in LEARNING_RATES for init in INITS for kb in kappas]


def tune(name, task, variant, threads):
    """The grid setting with the best validation MAP (one fit each, seed 0) and the tuning time."""
    val = validation_task(task, 0)
    best, best_map, elapsed = None, -np.inf, 0.0
    for setting in grid(variant):
        try:
            model = fit_frml(val, {**FRML_PARAMS[name], **setting}, 0, threads)
        except FloatingPointError:  # a learning rate that diverges is simply not chosen
            continue
        elapsed += model.fit_time_
        score = evaluate(val, model.components_)["MAP"]
        if score > best_map:
            best, best_map = setting, score
    return best, best_map, elapsed


def frml_rows(name, task, runs, threads):
    rows = {}
    for variant in ("FRML-WARP", "FRML-AUC"):
        setting, val_map, tune_time = tune(name, task, variant, threads)
        params = {**FRML_PARAMS[name], **setting}
        results, times = [], []
        for seed in range(runs):
            model = fit_frml(task, params, seed, threads)
            results.append(evaluate(task, model.components_))
            times.append(model.fit_time_)
        note = ", ".join(f"{k}={v}" for k, v in setting.items())
        note += f" (val MAP {val_map:.4f}; {len(grid(variant))} settings tuned in {tune_time:.0f} s)"
        rows[variant] = ({m: float(np.median([r[m] for r in results])) for m in METRICS}, float(np.median(times)), note)
    return rows


def print_table(name, task, rows):
    print(f"\n## {name}: {task['Xtr'].shape[0]} database x {task['Xte'].shape[0]} queries, d = {task['Xtr'].shape[1]}")
    print(f"{'method':<11} {'MAP':>7} {'P@1':>7} {'P@10':>7} {'AUC':>7} {'fit s':>9}  note")
    for method, (scores, fit_time, note) in rows.items():
        if scores is None:
            print(f"{method:<11} {'-':>7} {'-':>7} {'-':>7} {'-':>7} {'-':>9}  {note}")
        else:
            cells = " ".join(f"{scores[m]:7.4f}" for m in METRICS)
            t = "-" if fit_time is None else f"{fit_time:9.2f}"
            print(f"{method:<11} {cells} {t:>9}  {note}")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["digits", "wine", "lastfm-2k", "citeulike-a"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--max-tags", type=int, default=1000)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--peer-timeout", type=float, default=900.0)
    args = parser.parse_args()
    threads = int(os.environ.get("NUMBA_NUM_THREADS", "2"))
    print(f"# bench_frml: {' '.join(sys.argv)}  (NUMBA_NUM_THREADS={threads}, FRML medians over {args.runs} seeds)")
    if not args.no_peers:
        print(f"# peers: metric-learn in {VENV} (scikit-learn 1.5.x), run as subprocesses, once each, "
              f"timeout {args.peer_timeout:.0f} s")  # fmt: skip
    for name in args.tasks:
        if name in ("digits", "wine"):
            task = noisy_classification(name, args.seed)
        else:
            try:
                task = content_task(name, args.seed, args.items, args.max_tags)
            except (FileNotFoundError, ValueError, ImportError) as exc:
                print(f"\n## {name}: skipped ({exc})")
                continue
        rows = {"Euclidean": (evaluate(task, None), None, "")}
        rows.update(frml_rows(name, task, args.runs, threads))
        if not args.no_peers:
            for method in ("LMNN", "ITML", "NCA"):
                if "ytr" not in task and method != "ITML":
                    rows[method] = (None, None, "n/a: needs class labels (relevance is not a class structure)")
                    continue
                result, note = run_peer("ITML-pairs" if "ytr" not in task else method, task, args.peer_timeout)
                if result is None:
                    rows[method] = (None, None, note)
                else:
                    L, fit_time = result
                    rows[method] = (
                        evaluate(task, L),
                        fit_time,
                        "pairs: 2000 similar + 2000 dissimilar" if "ytr" not in task else "",
                    )
        print_table(name, task, rows)


if __name__ == "__main__":
    main()
