"""Query-document learning to rank on LETOR 4.0 MQ2008: listwise, metric and tree learners.

Protocol.  Five folds (train S_f..S_{f+2}, validation S_{f+3}, test S_{f+4}); per fold every
method is trained on the training part for each configuration of its grid, the configuration with
the best validation NDCG@10 is scored once on the test part.  Nothing is chosen on test data.
Reported: mean ± standard error over the folds of NDCG@1, 3, 5, 10 and MAP (queries without a
relevant document have no defined NDCG/AP and are left out, see ``recsys_ltr.query_metrics``),
the median fit time of the chosen configuration, and paired tests across the pooled test queries
of the five folds (each MQ2008 query is tested once): paired t-test and Wilcoxon signed-rank on
per-query NDCG@10.

Methods (grids in METHODS below)
  best feature       the single feature (or its negation) with the best training NDCG@10
  RankSVM            sklearn LinearSVC on the within-query pairwise differences (pairs with
                     different labels), score w · x
  ListNet, ListMLE   recsys_ltr.ltr (ListMLE: top-k on the documents above a list's lowest label;
                     "ListMLE full": the whole derived ordering, ties shuffled every epoch)
  RPC-MTL K=3, K=5   recsys_ltr.ltr.RPCMTL, λ over the paper's grid, SGD settings = ListMLE's
                     choice on the same fold
  GMML               global GMML ranker: L-GMML with one metric over every query, no Φ fit
  L-GMML             recsys_ltr.ltr.LGMML (shared Φ), feature_scaling "l2" or none;
                     "L-GMML cand.": anchors moved into each test query's candidates;
                     "L-GMML per-query": Φ_q per training query, their mean for test queries
  LambdaMART         LightGBM lambdarank (recsys_ltr.ltr.LambdaMART), number of trees chosen on
                     validation among STAGES from one fit per configuration
  stack              LambdaMART (the configuration LambdaMART chose, trees chosen again) on the
                     features plus the scores of the chosen ListMLE and L-GMML (out-of-fold on
                     the training queries)
  blend              recsys_ltr.ltr.RankBlend of the ListMLE and LambdaMART chosen on the fold,
                     equal weights: the method we declared as ours before any test score of it
  blend tuned        the same with the weights chosen on the validation part (eval_set)

MQ2008 is distributed query-level normalised (every feature min-max scaled within each query,
LETOR's QueryLevelNorm), so ``feature_scaling="query"`` is the same as no scaling on it.

Run:  NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_ltr.py [--folds 1 2 ...]
      [--methods ...] [--dataset lightgbm-lambdarank-sample] [--out results.json]
(one thread everywhere: a quality benchmark; on a shared 2-core machine LightGBM's two OpenMP
threads ran 25 times slower than one)
The LightGBM sample has no validation part: its last 20% of training queries serve as one.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import stats
from sklearn.base import clone
from sklearn.svm import LinearSVC

from recsys_ltr.datasets.letor import load_letor
from recsys_ltr.ltr import LGMML, RPCMTL, LambdaMART, ListMLE, ListNet, RankBlend
from recsys_ltr.query_metrics import contiguous_query_offsets, ndcg_at_k, ranking_report

KEYS = ("NDCG@1", "NDCG@3", "NDCG@5", "NDCG@10", "MAP")
THREADS = 1
STAGES = (10, 25, 50, 100, 200, 300, 500, 800)
SGD_GRID = [
    dict(learning_rate=lr, iterations=e) for lr, e in itertools.product((1e-4, 3e-4, 1e-3, 3e-3), (10, 30, 100))
]


# ----------------------------------------------------------------------------- peers
class BestFeature:
    """Baseline: rank by the one feature (either sign) with the best training NDCG@10."""

    def fit(self, X, y, qid):
        _, self.feature, self.sign = max(
            ((ranking_report(y, s * X[:, f], qid)["NDCG@10"], f, s) for f in range(X.shape[1]) for s in (1.0, -1.0)),
            key=lambda t: t[0],
        )
        return self

    def predict(self, X, qid):
        return self.sign * X[:, self.feature]


class RankSVM:
    """Linear pairwise ranker: LinearSVC on ``x_i - x_j`` for the pairs of a query with
    ``y_i != y_j`` (half of them flipped, so both classes occur), no intercept."""

    def __init__(self, C=1.0):
        self.C = C

    def fit(self, X, y, qid):
        offsets = contiguous_query_offsets(qid)
        diffs = []
        for s, e in itertools.pairwise(offsets):
            i, j = np.triu_indices(e - s, 1)
            keep = y[s + i] != y[s + j]
            sign = np.sign(y[s + i[keep]] - y[s + j[keep]])[:, None]
            diffs.append(sign * (X[s + i[keep]] - X[s + j[keep]]))
        D = np.vstack(diffs)
        label = np.where(np.arange(D.shape[0]) % 2 == 0, 1, -1)
        svm = LinearSVC(C=self.C, fit_intercept=False, max_iter=20_000).fit(D * label[:, None], label)
        self.coef_ = svm.coef_[0]
        return self

    def predict(self, X, qid):
        return X @ self.coef_


class Stack:
    """LambdaMART on the features plus base rankers' scores; on the training queries the scores
    are out-of-fold (``n_folds`` query folds), so the trees see scores as noisy as at test time."""

    def __init__(self, bases, final, n_folds=3):
        self.bases, self.final, self.n_folds = bases, final, n_folds

    def fit(self, X, y, qid):
        offsets = contiguous_query_offsets(qid)
        part = np.repeat(np.arange(offsets.size - 1) % self.n_folds, np.diff(offsets))
        oof = np.empty((X.shape[0], len(self.bases)))
        for f in range(self.n_folds):
            inside, out = part != f, part == f
            for j, base in enumerate(self.bases):
                oof[out, j] = clone(base).fit(X[inside], y[inside], qid[inside]).predict(X[out], qid[out])
        self.bases_ = [clone(base).fit(X, y, qid) for base in self.bases]
        self.final_ = clone(self.final).fit(np.column_stack([X, oof]), y, qid)
        return self

    def features(self, X, qid):
        return np.column_stack([X] + [base.predict(X, qid) for base in self.bases_])

    def predict(self, X, qid):
        return self.final_.predict(self.features(X, qid), qid)


# ----------------------------------------------------------------------------- methods
@dataclass
class Method:
    """``grid(chosen)`` lists the configurations and ``make(params, chosen, seed)`` builds an
    unfitted model (``chosen``: the parameters the methods in ``needs`` chose on this fold);
    ``staged``: the model is fitted once with ``max(STAGES)`` trees and every stage is a
    configuration; ``eval_set``: ``fit`` gets the validation part (the model chooses on it)."""

    grid: Callable[[dict], list]
    make: Callable[[dict, dict, int], object]
    staged: bool = False
    eval_set: bool = False
    needs: tuple = field(default_factory=tuple)


def _fixed(grid):
    return lambda chosen: grid


def _lambdamart(p, chosen, seed):
    return LambdaMART(num_threads=THREADS, random_state=seed, **{"n_estimators": max(STAGES), **p})


METHODS = {
    "best feature": Method(_fixed([{}]), lambda p, c, s: BestFeature()),
    "RankSVM": Method(_fixed([dict(C=c) for c in (1e-4, 1e-3, 1e-2, 0.1, 1.0)]), lambda p, c, s: RankSVM(**p)),
    "ListNet": Method(
        _fixed([dict(learning_rate=lr, iterations=e) for lr, e in itertools.product((1e-3, 1e-2, 0.1), (10, 30, 100))]),
        lambda p, c, s: ListNet(random_state=s, **p),
    ),
    "ListMLE": Method(_fixed(SGD_GRID), lambda p, c, s: ListMLE(random_state=s, **p)),
    "ListMLE full": Method(
        _fixed(
            [dict(learning_rate=lr, iterations=e) for lr, e in itertools.product((3e-5, 1e-4, 3e-4), (10, 30, 100))]
        ),
        lambda p, c, s: ListMLE(top_k=None, random_state=s, **p),
    ),
    **{
        f"RPC-MTL K={K}": Method(
            lambda chosen: [dict(mtl_regularization=v, **chosen["ListMLE"]) for v in (0.001, 0.01, 0.1, 1.0, 2.0)],
            lambda p, c, s, K=K: RPCMTL(n_clusters=K, random_state=s, **p),
            needs=("ListMLE",),
        )
        for K in (3, 5)
    },
    "GMML": Method(
        _fixed([{}]),
        lambda p, c, s: LGMML(n_metrics=1, queries_per_metric=10**6, iterations=0, num_threads=THREADS, random_state=s),
    ),
    **{
        name: Method(
            _fixed(
                [
                    dict(n_metrics=m, margin=z, feature_scaling=f)
                    for m, z, f in itertools.product((10, 20, 50), (0.1, 1.0), ("l2", None))
                ]
            ),
            lambda p, c, s, kw=kw: LGMML(num_threads=THREADS, random_state=s, **kw, **p),
        )
        for name, kw in (
            ("L-GMML", {}),
            ("L-GMML cand.", {"test_anchors": "candidates"}),
            ("L-GMML per-query", {"phi_mode": "per_query"}),
        )
    },
    "LambdaMART": Method(
        _fixed(
            [
                dict(num_leaves=nl, learning_rate=lr, min_child_samples=mc)
                for nl, lr, mc in itertools.product((7, 15, 31, 63), (0.01, 0.03, 0.1), (10, 30, 60))
            ]
        ),
        _lambdamart,
        staged=True,
    ),
    "stack": Method(
        lambda chosen: [{k: v for k, v in chosen["LambdaMART"].items() if k != "n_estimators"}],
        lambda p, c, s: Stack(
            [ListMLE(random_state=s, **c["ListMLE"]), LGMML(num_threads=THREADS, random_state=s, **c["L-GMML"])],
            _lambdamart(p, c, s),
        ),
        staged=True,
        needs=("ListMLE", "L-GMML", "LambdaMART"),
    ),
    "blend": Method(
        _fixed([{}]),
        lambda p, c, s: RankBlend([ListMLE(random_state=s, **c["ListMLE"]), _lambdamart(c["LambdaMART"], c, s)]),
        needs=("ListMLE", "LambdaMART"),
    ),
    "blend tuned": Method(
        _fixed([{}]),
        lambda p, c, s: RankBlend([ListMLE(random_state=s, **c["ListMLE"]), _lambdamart(c["LambdaMART"], c, s)]),
        eval_set=True,
        needs=("ListMLE", "LambdaMART"),
    ),
}
OURS = "blend"
PAIRED = (
    ("RPC-MTL K=3", "ListMLE"),
    ("RPC-MTL K=5", "ListMLE"),
    (OURS, "LambdaMART"),
    ("blend tuned", "LambdaMART"),
    ("stack", "LambdaMART"),
    ("ListMLE", "LambdaMART"),
    ("L-GMML", "LambdaMART"),
)


# ----------------------------------------------------------------------------- protocol
def _candidates(method, params, model, X, qid):
    """``(params, scores)`` of every configuration one fitted model stands for."""
    if not method.staged:
        return [(params, model.predict(X, qid))]
    if isinstance(model, Stack):
        model, X = model.final_, model.features(X, qid)
    return [({**params, "n_estimators": k}, model.predict(X, qid, num_iteration=k)) for k in STAGES]


def select(method, chosen, seed, train, vali, test):
    """Fit every configuration, keep the best on validation NDCG@10, score it on test."""
    best = None
    grid = method.grid(chosen)
    for params in grid:
        t0 = time.perf_counter()
        model = method.make(params, chosen, seed)
        if method.eval_set:
            model.fit(*train, eval_set=vali)
        else:
            model.fit(*train)
        fit_s = time.perf_counter() - t0
        for p, scores in _candidates(method, params, model, vali[0], vali[2]):
            value = ranking_report(vali[1], scores, vali[2])["NDCG@10"]
            if best is None or value > best[0]:
                best = (value, p, model, fit_s)
    value, params, model, fit_s = best
    _, test_scores = next(c for c in _candidates(method, params, model, test[0], test[2]) if c[0] == params)
    report = ranking_report(test[1], test_scores, test[2])
    report.update(
        vali_ndcg10=value,
        fit_s=fit_s,
        params=params,
        per_query=ndcg_at_k(test[1], test_scores, test[2], 10).tolist(),
    )
    if isinstance(model, RankBlend):
        report["weights"] = model.weights_.tolist()
    return report


def load_fold(dataset, fold):
    data = load_letor(dataset, fold=fold)
    if "vali" in data:
        return data["train"], data["vali"], data["test"]
    X, y, qid = data["train"]
    offsets = contiguous_query_offsets(qid)
    cut = offsets[int(round(0.8 * (offsets.size - 1)))]
    return (X[:cut], y[:cut], qid[:cut]), (X[cut:], y[cut:], qid[cut:]), data["test"]


def run_fold(dataset, fold, names, seed):
    train, vali, test = load_fold(dataset, fold)
    chosen, out = {}, {}
    for name in names:
        rep = select(METHODS[name], chosen, seed, train, vali, test)
        chosen[name] = rep["params"]
        out[name] = rep
        extra = f" weights {rep['weights']}" if "weights" in rep else ""
        print(
            f"fold {fold} {name:13s} NDCG@10 {rep['NDCG@10']:.4f} (vali {rep['vali_ndcg10']:.4f}) MAP {rep['MAP']:.4f} "
            f"fit {rep['fit_s']:.1f}s {rep['params']}{extra}",
            flush=True,
        )
    return out


def _warm_up():
    """Compile the numba kernels once so that no fit time includes compilation."""
    rng = np.random.default_rng(0)
    X, y, qid = rng.random((60, 3)), np.tile([2, 1, 0, 0, 0, 0], 10), np.repeat(np.arange(10), 6)
    for model in (
        ListMLE(iterations=1),
        ListNet(iterations=1),
        RPCMTL(n_clusters=2, iterations=1, kappa2=3),
        LGMML(n_metrics=2),
    ):
        model.fit(X, y, qid).predict(X, qid)


# ----------------------------------------------------------------------------- report
def _cell(values):
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / np.sqrt(values.size) if values.size > 1 else float("nan")
    return f"{values.mean():.4f} ± {se:.4f}"


def paired_tests(results, pairs):
    """Rows ``(a, b, n, mean difference, t-test p, Wilcoxon p)`` on pooled per-query NDCG@10."""
    rows = []
    for a, b in pairs:
        if a not in results or b not in results:
            continue
        x = np.concatenate([r["per_query"] for r in results[a]])
        z = np.concatenate([r["per_query"] for r in results[b]])
        keep = ~np.isnan(x) & ~np.isnan(z)
        diff = x[keep] - z[keep]
        if np.any(diff != 0):
            t_p, w_p = stats.ttest_rel(x[keep], z[keep]).pvalue, stats.wilcoxon(diff[diff != 0]).pvalue
        else:  # identical rankings
            t_p = w_p = 1.0
        rows.append((a, b, int(keep.sum()), float(diff.mean()), float(t_p), float(w_p)))
    return rows


def print_table(results, dataset, folds):
    print(f"\n{dataset}, folds {folds}: test mean ± SE over folds (settings chosen on validation NDCG@10)\n")
    print("| method | " + " | ".join(KEYS) + " | fit s (median) |")
    print("|---|" + "---|" * (len(KEYS) + 1))
    for name, reps in results.items():
        cells = [_cell([r[k] for r in reps]) for k in KEYS]
        print(f"| {name} | " + " | ".join(cells) + f" | {np.median([r['fit_s'] for r in reps]):.1f} |")
    print("\nPaired tests on per-query NDCG@10, test queries of all folds pooled:\n")
    print("| A | B | queries | mean(A - B) | t-test p | Wilcoxon p |")
    print("|---|---|---|---|---|---|")
    for a, b, n, d, t_p, w_p in paired_tests(results, PAIRED):
        print(f"| {a} | {b} | {n} | {d:+.4f} | {t_p:.3g} | {w_p:.3g} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="letor-mq2008", choices=("letor-mq2008", "lightgbm-lambdarank-sample"))
    ap.add_argument("--folds", type=int, nargs="+", default=None)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write every fold's reports (JSON)")
    args = ap.parse_args()
    folds = args.folds or ([1, 2, 3, 4, 5] if args.dataset == "letor-mq2008" else [1])
    names = [n for n in METHODS if n in args.methods]
    for name in names:
        missing = [m for m in METHODS[name].needs if m not in names]
        if missing:
            ap.error(f"{name} needs {missing} in --methods")
    _warm_up()
    results = {}
    for fold in folds:
        for name, rep in run_fold(args.dataset, fold, names, args.seed).items():
            results.setdefault(name, []).append(rep)
    print_table(results, args.dataset, folds)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"dataset": args.dataset, "folds": folds, "seed": args.seed, "results": results}, fh)


if __name__ == "__main__":
    main()
