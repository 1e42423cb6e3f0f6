"""MLR / R-MLR on noise-padded UCI-style data (dissertation sec. 2.4.1, Fig. 2.2-2.3).

Data (offline stand-ins from scikit-learn): iris, wine, breast_cancer (for ionosphere) and digits
(subsampled to ``--digits-n`` points, stratified, when smaller than 1797).  Each is padded with
``D`` dimensions of correlated Gaussian noise ``x_σ ~ N(0, Σ)`` (Eq. 2.11), ``Σ`` drawn once per
data set and ``D`` from a unit-scale Wishart distribution (``df = D``, scale ``I``), then split
into random 40/30/30 train / validation / test sets (stratified by class, so that every class has
two training points) and z-scored with the training statistics; features constant on the
training set (digits' border pixels) are dropped.

Methods: Euclidean (identity), MLR (MAP loss, MLR-ADMM), l1-MLR and R-MLR (``RMLR``), FRML (WARP,
reciprocal loss), and metric-learn's LMNN and ITML in the peer environment
(``benchmarks/_peers.py``).  Grids (chapter in brackets where it differs): ``C`` in {1, 10, 100, 1000}
[10^0..10^6: beyond 10^3 the cutting plane needs far more than 100 rounds on non-separable data,
and on separable data the metric no longer changes];
``λ`` in {1, 0.1, 0.01, 0.001}; ITML ``γ`` in 10^0..10^6; LMNN ``μ`` (metric-learn's
``regularization``) in {0.2, 0.5, 0.8} [0.1, 0.2, .., 0.9], 3 target neighbours; FRML learning
rate in {0.5, 2, 8} (FRML is not in the chapter); the kNN ``k`` in {1, 3, 5, 7} for every method.
The setting and ``k`` with the best validation accuracy are chosen per split (first in grid order
on ties); test accuracy is kNN with the training set as examples.  MLR-family grids are swept
with ``warm_start=True`` (constraints are valid for every ``C`` and ``λ``); the fit time reported
is the CPU time of a cold refit of the chosen setting, every method on one thread (CPU time,
because the machine is shared).  Effective dimensionality ``E``: eigenvalues needed for 95%
of the spectral mass of ``W`` (Euclidean: of ``I``).

The chapter's claim checked: for ``D >= 64``, R-MLR beats MLR, ITML and LMNN (one-sided Wilcoxon
signed-rank test over splits, per setting and pooled over all settings with ``D >= 64``,
Bonferroni over all the tests printed).

Usage::

    python benchmarks/bench_mlr.py [--datasets iris wine breast_cancer digits] [--dims 32 64 128 256]
        [--splits 5] [--digits-splits 5] [--digits-n 500] [--no-peers] [--out run.json]
    python benchmarks/bench_mlr.py --report run1.json run2.json   # reprint saved runs together
    python benchmarks/bench_mlr.py --costs   # CPU time of each step of an ADMM iteration by d

``fit s`` is the median over splits of the CPU seconds of one fit of the chosen setting, ``grid s``
the median CPU seconds of the whole grid (warm-started for the MLR family), ``E`` the mean
effective dimensionality.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import wilcoxon, wishart
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._peers import run_peer_script
from recsys_ltr.metric_learning import FRML, MLR, RMLR

LOADERS = {"iris": load_iris, "wine": load_wine, "breast_cancer": load_breast_cancer, "digits": load_digits}
C_GRID = (1.0, 10.0, 100.0, 1e3)
LAM_GRID = (1.0, 0.1, 0.01, 0.001)
K_GRID = (1, 3, 5, 7)
MU_GRID = (0.2, 0.5, 0.8)
GAMMA_GRID = (1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6)
FRML_RATES = (0.5, 2.0, 8.0)
METHODS = ("Euclidean", "MLR", "l1-MLR", "R-MLR", "FRML", "ITML", "LMNN")
RIVALS = ("MLR", "ITML", "LMNN", "l1-MLR")  # the claim is about the first three


# ------------------------------------------------------------------------------------ data


def padded(name, D, digits_n):
    """The data set with ``D`` Wishart-correlated noise dimensions (Eq. 2.11)."""
    X, y = LOADERS[name](return_X_y=True)
    seed = 1000 * list(LOADERS).index(name) + D
    if name == "digits" and digits_n < len(y):
        X, _, y, _ = train_test_split(X, y, train_size=digits_n, stratify=y, random_state=0)
    sigma = wishart(df=D, scale=np.eye(D)).rvs(random_state=seed)
    noise = np.random.default_rng(seed).multivariate_normal(np.zeros(D), sigma, size=len(y))
    return np.hstack((X, noise)), y


def split(X, y, seed):
    """40/30/30 stratified split, z-scored by the training statistics, constant features dropped."""
    idx = np.arange(len(y))
    tr, rest = train_test_split(idx, train_size=0.4, stratify=y, random_state=seed)
    va, te = train_test_split(rest, train_size=0.5, stratify=y[rest], random_state=seed)
    mean, std = X[tr].mean(axis=0), X[tr].std(axis=0)
    keep = std > 0
    Z = (X[:, keep] - mean[keep]) / std[keep]
    return {part: (Z[i], y[i]) for part, i in (("train", tr), ("val", va), ("test", te))}


# ------------------------------------------------------------------------------------ evaluation


def cpu_seconds(fit) -> float:
    """CPU seconds of ``fit()`` (every method runs on one thread, so this is its compute time on a
    shared machine, where wall-clock time depends on the load)."""
    start = time.process_time()
    fit()
    return time.process_time() - start


def knn_accuracy(L, data, part, k):
    (Xtr, ytr), (Xq, yq) = data["train"], data[part]
    Ztr, Zq = (Xtr, Xq) if L is None else (Xtr @ L.T, Xq @ L.T)
    return float(np.mean(KNeighborsClassifier(n_neighbors=k).fit(Ztr, ytr).predict(Zq) == yq))


def effective_dim(L, d, mass=0.95):
    """Eigenvalues of ``W = LᵀL`` needed for ``mass`` of its trace (``I`` when ``L`` is None)."""
    eig = np.ones(d) if L is None else np.sort(np.linalg.svd(L, compute_uv=False) ** 2)[::-1]
    if eig.sum() <= 0:
        return 0
    return int(np.searchsorted(np.cumsum(eig) / eig.sum(), mass - 1e-12) + 1)


class Selection:
    """Keeps the candidate (setting, k) of best validation accuracy."""

    def __init__(self):
        self.best, self.grid_time, self.not_converged, self.count = None, 0.0, 0, 0

    def offer(self, setting, L, data, fit_time, converged=True):
        self.grid_time += fit_time
        self.count += 1
        self.not_converged += not converged
        for k in K_GRID:
            acc = knn_accuracy(L, data, "val", k)
            if self.best is None or acc > self.best[0]:
                self.best = (acc, setting, k, L)

    def result(self, data, d, fit_time):
        _, setting, k, L = self.best
        return dict(
            acc=knn_accuracy(L, data, "test", k), E=effective_dim(L, d), fit_time=fit_time, grid_time=self.grid_time,
            setting={**setting, "k": k}, not_converged=self.not_converged, fits=self.count,
        )  # fmt: skip


def mlr_family(method, data, threads):
    """Sweep the grid with warm starts, then time a cold refit of the chosen setting."""
    Xtr, ytr = data["train"]
    if method == "MLR":
        model, grid = MLR(warm_start=True, num_threads=threads), [{"C": C} for C in C_GRID]
    else:
        penalty = "l1" if method == "l1-MLR" else "l21"
        model = RMLR(penalty=penalty, warm_start=True, num_threads=threads)
        grid = [{"regularization": lam, "C": C} for lam in LAM_GRID for C in C_GRID]
    sel = Selection()
    for setting in grid:
        seconds = cpu_seconds(lambda: model.set_params(**setting).fit(Xtr, ytr))
        sel.offer(setting, model.components_, data, seconds, model.converged_)
    refit = clone(model).set_params(warm_start=False, **sel.best[1])
    return sel.result(data, Xtr.shape[1], cpu_seconds(lambda: refit.fit(Xtr, ytr)))


def frml(data, threads, seed):
    Xtr, ytr = data["train"]
    sel = Selection()
    m = min(Xtr.shape[1], 16)
    for rate in FRML_RATES:
        model = FRML(n_components=m, learning_rate=rate, max_iter=2000, random_state=seed, num_threads=threads)
        try:
            seconds = cpu_seconds(lambda: model.fit(Xtr, ytr))
        except FloatingPointError:  # a diverging rate is not chosen
            continue
        sel.offer({"learning_rate": rate}, model.components_, data, seconds)
    return sel.result(data, Xtr.shape[1], sel.grid_time / max(sel.count, 1))


PEER_SCRIPT = textwrap.dedent(
    """
    import json, sys, time, warnings
    import numpy as np
    import metric_learn
    warnings.simplefilter("ignore")
    data = np.load(sys.argv[1], allow_pickle=False)
    X, y = data["X"], data["y"]
    out, times = {}, {}
    for name, grid in (("LMNN", data["mu"]), ("ITML", data["gamma"])):
        for i, value in enumerate(grid):
            start = time.process_time()
            if name == "LMNN":
                model = metric_learn.LMNN(n_neighbors=3, regularization=float(value), random_state=0).fit(X, y)
            else:
                model = metric_learn.ITML_Supervised(gamma=float(value), random_state=0).fit(X, y)
            times[f"{name}{i}"] = time.process_time() - start
            out[f"{name}{i}"] = model.components_
    np.savez(sys.argv[2], **out)
    print(json.dumps(times))
    """
)


def peers(data, timeout):
    Xtr, ytr = data["train"]
    arrays = dict(X=Xtr, y=ytr, mu=np.array(MU_GRID), gamma=np.array(GAMMA_GRID))
    times, outputs, note = run_peer_script(PEER_SCRIPT, arrays, [], timeout, threads=1)
    if times is None:
        return dict.fromkeys(("LMNN", "ITML"), note)
    rows = {}
    for name, key, grid in (("LMNN", "mu", MU_GRID), ("ITML", "gamma", GAMMA_GRID)):
        sel = Selection()
        for i, value in enumerate(grid):
            sel.offer({key: value}, outputs[f"{name}{i}"], data, times[f"{name}{i}"])
        chosen = grid.index(sel.best[1][key])
        rows[name] = sel.result(data, Xtr.shape[1], times[f"{name}{chosen}"])
    return rows


# ------------------------------------------------------------------------------------ main


def run_setting(name, D, n_splits, args, threads):
    X, y = padded(name, D, args.digits_n)
    results = {m: [] for m in METHODS}
    notes = {}
    for s in range(n_splits):
        data = split(X, y, seed=s)
        d = data["train"][0].shape[1]
        sel = Selection()
        sel.offer({}, None, data, 0.0)
        results["Euclidean"].append(sel.result(data, d, 0.0))
        for method in ("MLR", "l1-MLR", "R-MLR"):
            results[method].append(mlr_family(method, data, threads))
        results["FRML"].append(frml(data, threads, s))
        if not args.no_peers:
            for method, row in peers(data, args.peer_timeout).items():
                if isinstance(row, str):
                    notes[method] = row
                else:
                    results[method].append(row)
    shape = [data["train"][0].shape[1]] + [len(data[part][1]) for part in ("train", "val", "test")]
    return shape, results, notes


def print_setting(name, D, shape, results, notes):
    d, n_tr, n_va, n_te = shape
    n_splits = max(len(rows) for rows in results.values())
    print(f"\n## {name} + D={D}: d={d}; train/val/test {n_tr}/{n_va}/{n_te}; {n_splits} splits")
    print(f"{'method':<10} {'acc ± SE':>15} {'E':>6} {'fit s':>8} {'grid s':>8}  chosen (first splits) / notes")
    for method in METHODS:
        rows = results[method]
        if not rows:
            print(f"{method:<10} {'-':>15} {'-':>6} {'-':>8} {'-':>8}  {notes.get(method, 'not run')}")
            continue
        acc = np.array([r["acc"] for r in rows])
        se = acc.std(ddof=1) / np.sqrt(acc.size) if acc.size > 1 else 0.0
        E = np.mean([r["E"] for r in rows])
        fit, grid = np.median([r["fit_time"] for r in rows]), np.median([r["grid_time"] for r in rows])
        chosen = "; ".join(",".join(f"{k}={v:g}" for k, v in r["setting"].items()) for r in rows[:3])
        unconv = sum(r["not_converged"] for r in rows)
        extra = f"  [{unconv}/{sum(r['fits'] for r in rows)} fits hit max_iter]" if unconv else ""
        print(
            f"{method:<10} {acc.mean():7.4f} ± {se:.4f} {E:6.1f} {fit:8.2f} {grid:8.2f}  {chosen}{'; ...' if len(rows) > 3 else ''}{extra}"
        )
    sys.stdout.flush()


def one_sided(ours, theirs):
    """Mean of ``ours - theirs`` and the one-sided Wilcoxon p-value of ``ours > theirs``."""
    diff = ours - theirs
    p = 1.0 if np.all(diff == 0) else float(wilcoxon(ours, theirs, alternative="greater").pvalue)
    return diff.mean(), p


def wilcoxon_table(all_results):
    """Per (data set, D >= 64) and pooled over them: R-MLR against each rival, paired by split."""
    tests, pooled = [], {rival: ([], []) for rival in RIVALS}
    for (name, D), results in all_results.items():
        if D < 64:
            continue
        ours = np.array([r["acc"] for r in results["R-MLR"]])
        for rival in RIVALS:
            theirs = np.array([r["acc"] for r in results[rival]])
            if theirs.size != ours.size:
                continue
            tests.append((name, D, rival, *one_sided(ours, theirs)))
            pooled[rival][0].extend(ours)
            pooled[rival][1].extend(theirs)
    if not tests:
        return
    n_settings = len({(name, D) for name, D, *_ in tests})
    for rival, (ours, theirs) in pooled.items():
        if ours:
            tests.append(("pooled", ">=64", rival, *one_sided(np.array(ours), np.array(theirs))))
    alpha = 0.05 / len(tests)
    n_min = min(len(r["R-MLR"]) for r in all_results.values())
    print(
        f"\n## Wilcoxon signed-rank, one-sided (R-MLR > rival) over splits; Bonferroni α = 0.05/{len(tests)} = "
        f"{alpha:.2g}; with {n_min} splits no p-value can be below 2^-{n_min} = {2.0**-n_min:.3g}; "
        f"'pooled': all splits of the {n_settings} settings with D >= 64"
    )
    print(f"{'data':<14} {'D':>4} {'rival':<7} {'mean diff':>10} {'p':>9}  p<0.05  Bonferroni")
    for name, D, rival, diff, p in tests:
        print(
            f"{name:<14} {D:>4} {rival:<7} {diff:>+10.4f} {p:>9.4g}  {'yes' if p < 0.05 else 'no':<6}  {'yes' if p < alpha else 'no'}"
        )


def cost_breakdown():
    """CPU seconds of one call of each step of an R-MLR fit, by ``d`` (medians of 5 calls)."""
    from recsys_ltr.metric_learning._admm import Constraints, project_psd, prox_l21_symmetric, w_update

    rng = np.random.default_rng(0)
    print("\n## cost of one step by d (CPU ms, median of 5): PSD projection (eigh), W-update (dual QP + (2.9),")
    print("## m = 50 constraints), symmetric l2,1 prox (inner ADMM to 1e-4, cold start)")
    print(f"{'d':>5} {'project_psd':>12} {'w_update':>10} {'prox_l21_sym':>13}")
    for d in (36, 68, 132, 260, 320):
        B = rng.standard_normal((d, d))
        S = (B + B.T) / 2
        A = Constraints(d)
        for _ in range(50):
            P = rng.standard_normal((d, 3))
            A.add(rng.random(), P @ P.T / d)
        steps = {
            "psd": lambda: project_psd(S),
            "w": lambda: w_update(A, S, 1.0, 10.0, np.zeros(50)),
            "prox": lambda: prox_l21_symmetric(S, 0.5, np.zeros((d, d)), np.zeros((d, d)), 1e-4, 500),
        }
        ms = {k: 1e3 * np.median([cpu_seconds(f) for _ in range(5)]) for k, f in steps.items()}
        print(f"{d:>5} {ms['psd']:>12.2f} {ms['w']:>10.2f} {ms['prox']:>13.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(LOADERS), choices=list(LOADERS))
    parser.add_argument("--dims", nargs="+", type=int, default=[32, 64, 128, 256])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--digits-splits", type=int, default=5)
    parser.add_argument("--digits-n", type=int, default=500)
    parser.add_argument("--threads", type=int, default=1, help="numba/BLAS threads of our methods")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--peer-timeout", type=float, default=3600.0)
    parser.add_argument("--out", help="also write the per-split results to this JSON file")
    parser.add_argument("--report", nargs="+", metavar="JSON", help="only print the tables of saved runs")
    parser.add_argument("--costs", action="store_true", help="only time the steps of an ADMM iteration by d")
    args = parser.parse_args()
    if args.costs:
        cost_breakdown()
        return
    if args.report:
        all_results = {}
        for path in args.report:
            for entry in json.loads(Path(path).read_text()):
                all_results[(entry["name"], entry["D"])] = entry
        for (name, D), entry in all_results.items():
            print_setting(name, D, entry["shape"], entry["results"], entry["notes"])
        wilcoxon_table({key: entry["results"] for key, entry in all_results.items()})
        return
    print(f"# bench_mlr: {' '.join(sys.argv)}  (threads={args.threads})")
    warnings.simplefilter("ignore", ConvergenceWarning)  # counted per method instead
    start, saved, all_results = time.perf_counter(), [], {}
    for name in args.datasets:
        for D in args.dims:
            n_splits = args.digits_splits if name == "digits" else args.splits
            shape, results, notes = run_setting(name, D, n_splits, args, args.threads)
            all_results[(name, D)] = results
            print_setting(name, D, shape, results, notes)
            print(f"# {time.perf_counter() - start:.0f} s wall, {total_cpu():.0f} s CPU so far", flush=True)
            saved.append(dict(name=name, D=D, shape=shape, results=results, notes=notes))
            if args.out:
                Path(args.out).write_text(json.dumps(saved, default=float))
    wilcoxon_table(all_results)
    print(f"\n# wall {time.perf_counter() - start:.0f} s, CPU {total_cpu():.0f} s (peers included)")


def total_cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    main()
