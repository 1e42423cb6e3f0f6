"""What each model costs at three catalogue sizes: the measured table of ``docs/in_practice.rst``.

Data: :func:`recsys_ltr.datasets.make_synthetic` (seed 0) at three sizes whose users, items and
density keep the proportions of the real sets (mean user degree 20-40, item degree 20-50):

* small: 2,000 users x 1,000 items, density 2% (about 40k positives, movielens-100k's scale);
* medium: 10,000 users x 10,000 items, density 0.3% (about 300k positives);
* large: 25,000 users x 40,000 items, density 0.06% (about 600k positives, gowalla's catalogue).

Each model (at its defaults, ``num_threads=1``) runs in a fresh process on the saved matrix: after
the imports, the data and a warm-up fit and serve on a generated 300 x 200 matrix (numba loads its
cached kernels), the resident high-water mark restarts at the current size (``/proc/self/clear_refs``),
the baseline; then ``fit`` (seconds), ``recommend`` of the first 1,000 users, ``N=10``, in one
batched call (seconds), the peak resident memory above the baseline (``VmHWM`` of ``/proc/self/status``) and
the size of ``save``'s file.  Medians of ``--repeats`` runs on the small size, one run on the larger
ones.  A model whose cost explodes at a size is not run there: :data:`SKIP` gives the reason and the
estimated cost.  Everything is single-threaded (``NUMBA_NUM_THREADS=1`` and the BLAS's).

    PYTHONPATH=. python benchmarks/in_practice_costs.py          # writes docs/in_practice_costs.{json,inc}
    PYTHONPATH=. python benchmarks/in_practice_costs.py --sizes small --repeats 1 --out /tmp/x   # a quick look
    PYTHONPATH=. python benchmarks/in_practice_costs.py --models BSPM --update   # re-measure some rows only
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from _baseline import ROOT, fresh_process
from _timing import high_water_kib, reset_peak
from bench_febr import _file_mb

SIZES = {  # name: (users, items, density)
    "small": (2_000, 1_000, 0.02),
    "medium": (10_000, 10_000, 0.003),
    "large": (25_000, 40_000, 0.0006),
}
#: name -> constructor expression (evaluated in the subprocess with the models imported)
MODELS = {
    "Popularity": "Popularity()",
    "ItemKNN": "ItemKNN()",
    "UserKNN": "UserKNN()",
    "KUNN": "KUNN()",
    "SLIM": "SLIM()",
    "RP3beta": "RP3beta()",
    "GFCF": "GFCF()",
    "BSPM": "BSPM()",
    "EASE": "EASE()",
    "ALS": "ALS()",
    "BPR": "BPR()",
    "LightFMWARP": "LightFMWARP()",
    "FEBR": "FEBR()",
    "FEBR-light": "FEBR(bases=[RP3beta(), ALS()], candidates=50)",  # two given bases; a smaller head
}
#: (model, size) -> why it is not run there, with its estimated cost
SKIP = {
    ("SLIM", "large"): "not run: full SLIM's dense Gram X^T X of 40,000 items is 6 GiB, above its 1 GiB "
    "max_gram_bytes (MemoryError); by the n_items^2 growth of that Gram about 16x its medium fit. "
    "fsSLIM, SLIM(k=100), is sparse",
}
SERVE_USERS = 1_000


def _one(path: str, model: str) -> dict:
    """Fit, serve, peak memory and file size of one model on the matrix at ``path`` (subprocess)."""
    import gc

    import scipy.sparse as sp

    from recsys_ltr import models
    from recsys_ltr.datasets import make_synthetic
    from recsys_ltr.febr import FEBR

    names = {**vars(models), "FEBR": FEBR}  # what the constructor expressions name
    X = sp.load_npz(path)
    warm = eval(MODELS[model], names).set_params(num_threads=1, show_progress=False)
    if model.startswith("FEBR"):
        warm.set_params(max_iter=2000, eval_every=1000)
    if model in ("GFCF", "BSPM"):
        warm.set_params(factors=16)
    warm.fit(make_synthetic(300, 200, density=0.05, random_state=0).matrix).recommend(np.arange(10), N=10)
    del warm
    gc.collect()
    base = reset_peak()
    estimator = eval(MODELS[model], names).set_params(num_threads=1, show_progress=False)
    if "random_state" in estimator.get_params():
        estimator.set_params(random_state=0)
    t0 = time.perf_counter()
    estimator.fit(X)
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    estimator.recommend(np.arange(min(SERVE_USERS, X.shape[0])), N=10)
    serve = time.perf_counter() - t0
    peak = (high_water_kib() - base) / 2**10  # MiB
    return {"fit_s": fit, "serve_s": serve, "peak_mib": peak, "file_mb": _file_mb(estimator)}


def run(path: Path, model: str) -> dict:
    code = (
        f"import sys, json; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); "
        f"from in_practice_costs import _one; print(json.dumps(_one({str(path)!r}, {model!r})))"
    )
    env = {"RECSYS_LTR_COMPILE_NOTICE": "0", "PYTHONWARNINGS": "ignore"}
    return json.loads(fresh_process(code, ROOT, env).strip().splitlines()[-1])


def available(model: str) -> bool:
    if model != "LightFMWARP":
        return True
    try:
        import lightfm  # noqa: F401
    except ImportError:
        return False
    return True


def measure(sizes, models, repeats) -> dict:
    import scipy.sparse as sp

    from recsys_ltr.datasets import make_synthetic

    out = {"sizes": {}, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            n_users, n_items, density = SIZES[size]
            X = make_synthetic(n_users, n_items, density=density, random_state=0).matrix
            path = Path(tmp) / f"{size}.npz"
            sp.save_npz(path, X)
            out["sizes"][size] = {"users": n_users, "items": n_items, "positives": int(X.nnz)}
            runs = repeats if size == "small" else 1
            for model in models:
                row = {"size": size, "model": model, "runs": runs}
                if (model, size) in SKIP or not available(model):
                    row["skipped"] = SKIP.get((model, size), "lightfm is not installed")
                else:
                    try:
                        results = [run(path, model) for _ in range(runs)]
                    except RuntimeError as exc:  # the subprocess failed: record its last error line
                        row["skipped"] = "failed: " + str(exc).strip().splitlines()[-1]
                    else:
                        row.update({key: float(np.median([r[key] for r in results])) for key in results[0]})
                out["rows"].append(row)
                print(json.dumps(row), flush=True)
    return out


def merged(old: dict, new: dict, machine: dict) -> dict:
    """``old``'s table with ``new``'s rows in place of (or beside) those of the same model and size,
    in :data:`MODELS` order; ``machine`` is recorded under ``machine["updates"]``."""
    measured = {(r["model"], r["size"]) for r in new["rows"]}
    rows = [r for r in old["rows"] if (r["model"], r["size"]) not in measured] + new["rows"]
    order, sizes = list(MODELS), list(SIZES)
    rows.sort(key=lambda r: (sizes.index(r["size"]), order.index(r["model"])))  # as measure() writes them
    updates = old["machine"].get("updates", []) + [{**machine, "models": sorted({m for m, _ in measured})}]
    return {"sizes": {**old["sizes"], **new["sizes"]}, "rows": rows, "machine": {**old["machine"], "updates": updates}}


def render(result: dict) -> str:
    """The reStructuredText table (one row per model, fit / serve / peak / file per size)."""
    sizes = list(result["sizes"])
    header = ["model"] + [
        f"{s} ({d['items']:,} items, {d['users']:,} users, {d['positives']:,} positives)"
        for s, d in result["sizes"].items()
    ]
    lines = [".. list-table::", "   :header-rows: 1", "   :stub-columns: 1", ""]
    lines += ["   * - " + header[0]] + [f"     - {h}" for h in header[1:]]
    by_key = {(r["model"], r["size"]): r for r in result["rows"]}
    for model in dict.fromkeys(r["model"] for r in result["rows"]):
        lines.append(f"   * - ``{MODELS[model]}``")
        for size in sizes:
            r = by_key.get((model, size))
            if r is None:
                lines.append("     - ")
            elif "skipped" in r:
                lines.append(f"     - {r['skipped']}")
            else:
                lines.append(
                    f"     - fit {_seconds(r['fit_s'])}, serve {_seconds(r['serve_s'])}, "
                    f"peak {_mib(r['peak_mib'])}, file {r['file_mb']:,.1f} MB"
                )
    return "\n".join(lines) + "\n"


def _mib(m: float) -> str:
    return "< 1 MiB" if m < 1 else f"{m:,.0f} MiB"


def _seconds(s: float) -> str:
    return "< 0.01 s" if s < 0.01 else f"{s:.2f} s" if s < 10 else f"{s:,.0f} s"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--repeats", type=int, default=3, help="runs on the small size (median)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "in_practice_costs")
    parser.add_argument("--update", action="store_true", help="replace only the measured rows of --out's table")
    args = parser.parse_args()
    t0 = time.perf_counter()
    result = measure(args.sizes, args.models, args.repeats)
    machine = {
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "threads": 1,
        "python": platform.python_version(),
        "load_average_after": [round(v, 2) for v in os.getloadavg()],
        "total_s": round(time.perf_counter() - t0),
    }
    if args.update:
        result = merged(json.loads(args.out.with_suffix(".json").read_text()), result, machine)
    else:
        result["machine"] = machine
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    args.out.with_suffix(".inc").write_text(render(result))
    print(f"wrote {args.out.with_suffix('.json')} and .inc in {machine['total_s']} s")


if __name__ == "__main__":
    main()
