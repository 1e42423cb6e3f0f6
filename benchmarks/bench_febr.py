"""FEBR speed and memory next to implicit ALS and LightFM WARP: the one script that times FEBR.

For each data set (holdout split 70/10/20, seed 0) and method, in a fresh subprocess (so peak
memory is the method's own): fit time (FEBR: affinity + features + OPT-ADG training with early
stopping on validation ADG, timed after a warm-up fit on 500 users that loads numba's cached
kernels once per process, reported as ``warmup``), full evaluation time (all metrics, every test user, validation items
excluded), serving (``recommend`` of every user, N = 10, FEBR only: ``serve_s``) and peak resident
memory.  Medians over ``--repeats`` runs; ratios vs ALS of the same run (implicit's, or our ``ALS()`` when implicit's is not run).  ``bench_regression.py
--only febr`` times ``FEBR().fit`` against an earlier version of the code.

* FEBR-stack: ``FEBR()`` at its defaults (stacked bases, leak-free holdout, carved validation), fitted
  without the split's validation; ``bases_s`` is the time spent in base fits (on the feature part,
  the fit part and all of the training matrix), ``slowest_base_s`` the slowest
  single base fit and ``stacking_s = fit - bases_s`` the stacking layer (base scoring, pools,
  features, OPT-ADG, validation);
* FEBR: ``AffinityFEBR``, FEBRi, cosine affinity, k = 100, default max_iter / gamma / learning rate, validation
  ADG on 1000 validation users every 50k samples, early stopping after 2 evaluations without gain;
* ALS: implicit 0.7 ``AlternatingLeastSquares(factors=64, iterations=15)``;
* ALS(): our ``ALS()`` at its defaults, the one-line alternative of the FEBR issue;
* tuned:NAME: the command line's quick-budget two-level tuning of method NAME on this split's
  validation part (``recsys_ltr.eval.tuning.tune``: every setting fitted and scored, the chosen one
  kept), e.g. ``tuned:ALS``, ``tuned:EASE``; ``settings`` is the number of settings tried;
* LightFM: ``LightFM(no_components=64, loss="warp", max_sampled=10)``, epochs chosen so that it
  draws as many positives as FEBR did (one epoch = one pass over the training positives).

Run (2 threads)::

    NUMBA_NUM_THREADS=2 OMP_NUM_THREADS=2 python benchmarks/bench_febr.py \\
        --datasets movielens-1m-implicit gowalla --repeats 3
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

THREADS = 2


def _split(name):
    from recsys_ltr.datasets import load
    from recsys_ltr.split import holdout

    return holdout(load(name), val=0.1, test=0.2, random_state=0)


def _one(name, method, samples):
    """Fit and evaluate one method; prints one JSON line."""
    from recsys_ltr.metrics import evaluate

    train, val, test = _split(name)
    extra = {}
    if method.startswith("FEBR"):  # warm-up on 500 users: numba loads its cached kernels once per process
        from recsys_ltr.febr import FEBR, AffinityFEBR

        t0 = time.perf_counter()
        small = FEBR() if method == "FEBR-stack" else AffinityFEBR(affinity="cosine", k=10, holdout=0.0)
        small.set_params(max_iter=2000, eval_every=1000, num_threads=THREADS).fit(train[:500], validation=val[:500])
        extra["warmup"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if method == "FEBR-stack":
        model, base_fits = _timed_base_fits(lambda: FEBR(random_state=0, num_threads=THREADS).fit(train))
        scorer = model
        extra.update(bases_s=sum(base_fits), slowest_base_s=max(base_fits), base_fits=len(base_fits))
    elif method == "FEBR":
        model = AffinityFEBR(
            holdout=0.0,
            affinity="cosine",
            side="item",
            k=100,
            eval_every=50_000,
            early_stopping=2,
            validation_users=1000,
            random_state=0,
            num_threads=THREADS,
        ).fit(train, validation=val)
        scorer = model
        samples = max(h["iteration"] for h in model.history_ if isinstance(h["iteration"], int))
        extra.update(samples=samples, best_iteration=model.best_iteration_)
    elif method == "ALS":
        from implicit.cpu.als import AlternatingLeastSquares

        model = AlternatingLeastSquares(factors=64, iterations=15, num_threads=THREADS, random_state=0)
        model.fit(train.astype(np.float32), show_progress=False)
        scorer = _dot_scorer(model.user_factors, model.item_factors)
    elif method == "ALS()":
        from recsys_ltr.models import ALS as OurALS

        model = scorer = OurALS(random_state=0, num_threads=THREADS).fit(train)
    elif method.startswith("tuned:"):
        from recsys_ltr.eval.tuning import tune

        _, scorer, trials = tune(method[6:], train, val, budget="quick", random_state=0, num_threads=THREADS)
        extra["settings"] = len(trials)
    else:
        from lightfm import LightFM

        epochs = max(1, int(round(samples / train.nnz)))
        model = LightFM(no_components=64, loss="warp", max_sampled=10, random_state=0)
        model.fit(train.tocoo(), epochs=epochs, num_threads=THREADS)
        scorer = _dot_scorer(
            np.hstack([model.user_embeddings, model.user_biases[:, None]]),
            np.hstack([model.item_embeddings, np.ones((train.shape[1], 1), np.float32)]),
            item_bias=model.item_biases,
        )
        extra = {"epochs": epochs}
    fit = time.perf_counter() - t0
    if "bases_s" in extra:
        extra["stacking_s"] = fit - extra["bases_s"]
    if method.startswith("FEBR"):
        t0 = time.perf_counter()
        model.recommend(np.arange(train.shape[0]), train, N=10)
        extra["serve_s"] = time.perf_counter() - t0
    if method == "FEBR-stack":
        extra["file_mb"] = _file_mb(model)
        extra["largest_base_file_mb"] = max(_file_mb(base) for base in model.bases_)
    t0 = time.perf_counter()
    result = evaluate(scorer, train, test, exclude=val, num_threads=THREADS)
    ev = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # GiB (ru_maxrss in KiB)
    print(json.dumps({"fit": fit, "eval": ev, "peak_gb": peak, "ADG": result["ADG"], **extra}))


def _timed_base_fits(fit_febr):
    """``fit_febr()``'s result and the wall time of every base fit inside it (the bases are fitted
    on the validated matrix by ``_fit_trusted``)."""
    from recsys_ltr.febr.training import OptADGRecommender
    from recsys_ltr.models.base import Recommender

    times, original = [], Recommender._fit_trusted

    def timed(self, *args, **kwargs):
        if isinstance(self, OptADGRecommender):
            return original(self, *args, **kwargs)
        t0 = time.perf_counter()
        out = original(self, *args, **kwargs)
        times.append(time.perf_counter() - t0)
        return out

    Recommender._fit_trusted = timed
    try:
        return fit_febr(), times
    finally:
        Recommender._fit_trusted = original


def _file_mb(model) -> float:
    """Size of ``model.save`` in MB."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "model.npz"
        model.save(path)
        return sum(f.stat().st_size for f in Path(directory).iterdir()) / 1e6


def _dot_scorer(U, V, item_bias=None):
    U, V = np.asarray(U, np.float64), np.asarray(V, np.float64)
    bias = 0.0 if item_bias is None else np.asarray(item_bias, np.float64)[None, :]

    def score(user_ids):
        return U[user_ids] @ V.T + bias

    return score


def _run(name, method, samples=0):
    out = subprocess.run(
        [sys.executable, __file__, "--one", name, method, str(samples)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["movielens-1m-implicit", "gowalla"])
    parser.add_argument(
        "--methods", nargs="+", default=["FEBR-stack", "FEBR", "ALS", "ALS()", "tuned:ALS", "tuned:EASE", "LightFM"]
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args.one[0], args.one[1], int(args.one[2]))
        return
    print(
        f"{'data set':<24}{'method':<12}{'fit s':>8}{'eval s':>8}{'total s':>9}{'peak GB':>9}"
        f"{'fit/ALS':>9}{'ADG':>8}  notes"
    )
    for name in args.datasets:
        runs = {}
        for _ in range(args.repeats):
            for method in args.methods:
                samples = runs.get("FEBR", [{}])[-1].get("samples", 0) if method == "LightFM" else 0
                runs.setdefault(method, []).append(_run(name, method, samples))
        med = {m: {key: float(np.median([r[key] for r in rs])) for key in rs[0]} for m, rs in runs.items()}
        for method, r in med.items():
            ref = next((m for m in ("ALS", "ALS()") if m in med), None)  # implicit's, else ours
            ratio = r["fit"] / med[ref]["fit"] if ref else float("nan")
            notes = {
                key: round(v, 2)
                for key, v in r.items()
                if key
                in (
                    "samples",
                    "best_iteration",
                    "epochs",
                    "warmup",
                    "bases_s",
                    "slowest_base_s",
                    "stacking_s",
                    "serve_s",
                    "settings",
                    "file_mb",
                    "largest_base_file_mb",
                )
            }
            print(
                f"{name:<24}{method:<12}{r['fit']:>8.2f}{r['eval']:>8.2f}{r['fit'] + r['eval']:>9.2f}"
                f"{r['peak_gb']:>9.2f}{ratio:>9.2f}{r['ADG']:>8.4f}  {notes or ''}",
                flush=True,
            )


if __name__ == "__main__":
    main()
