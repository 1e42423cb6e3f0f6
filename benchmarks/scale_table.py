"""Every default model at pipeline scale: fit, serve every user, evaluate, save and load, at 100k,
300k and 1M users, and how each cost grows with the positives.

Data: :func:`recsys_ltr.datasets.make_tastes` (seed 0; 64 tastes, Zipf(1) orders, log-normal
activity around 30 positives) at three sizes, the items a tenth of the users:

* ``100k``: 100,000 users x 10,000 items (about 3M positives);
* ``300k``: 300,000 users x 30,000 items (about 9M);
* ``1m``: 1,000,000 users x 100,000 items (about 30M).

A per-user 20% holdout (``split.holdout(val=0, test=0.2)``) gives the training matrix and the test
positives; 10,000 test users are sampled (seeded).  Each model at its defaults (SLIM as ``SLIM(k=100)``,
the sparse fsSLIM) runs in a fresh process on 2 threads: after a warm-up fit on a small matrix
(numba loads its cached kernels) and the data loaded, it records

* ``fit``: wall and CPU seconds (every thread), and the peak resident memory above the loaded data
  (``VmHWM``, reset before each phase);
* ``recommend``: :func:`~recsys_ltr.executors.recommend_users` of every training user, ``N=20``,
  consumed block by block (the blocks are bounded: nothing of size users x N is kept), wall and CPU
  seconds and peak; the first 2% of the users (at least 1,000) are timed first, and when all of them
  would take more than ``--serve-budget`` wall seconds the row gives that extrapolation (marked ``~``);
* ``evaluate``: ADG, MAP, Recall@20 and NDCG@20 of the 10,000 test users, wall and CPU seconds;
* ``save`` / ``load``: seconds and the file's size.

A model that refuses the fit (``MemoryError`` naming the bytes it needs) or runs past ``--budget``
seconds gets that as its row, after the phases it finished (each phase's figures are kept as it
ends).  Rows are appended to ``--out`` (JSON lines, the last row of a model and size wins), so sizes
and models can be run apart; the table (``--out`` with ``.inc``, included by ``docs/in_practice.rst``)
gives each size's rows and, for a model measured at two sizes or more, the growth exponent of each
cost in the number of positives (least squares on logs).

    NUMBA_NUM_THREADS=2 PYTHONPATH=. python benchmarks/scale_table.py --sizes 100k 300k
    PYTHONPATH=. python benchmarks/scale_table.py --sizes 1m --models ALS ItemKNN --budget 3600
"""

from __future__ import annotations

import os

THREADS = os.environ.setdefault("NUMBA_NUM_THREADS", "2")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, THREADS)

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
from _baseline import ROOT, fresh_process
from _timing import high_water_kib, reset_peak, timed

SIZES = {"100k": (100_000, 10_000), "300k": (300_000, 30_000), "1m": (1_000_000, 100_000)}
MODELS = {
    "ALS": "ALS()",
    "BPR": "BPR()",
    "ItemKNN": "ItemKNN()",
    "UserKNN": "UserKNN()",
    "KUNN": "KUNN()",
    "RP3beta": "RP3beta()",
    "EASE": "EASE()",
    "GF-CF": "GFCF()",
    "BSPM": "BSPM()",
    "SLIM": "SLIM(k=100)",
    "FEBR": "FEBR()",
}
METRICS = ("ADG", "MAP", "REC@20", "NDCG@20")
EVAL_USERS = 10_000
#: users whose recommend-all time is measured first (at least; 2% of the users above 50,000)
PROBE_USERS = 1_000
#: the costs whose growth is fitted, and their names in the table
GROWTH = {"fit_cpu": "fit CPU", "fit_peak_gb": "fit peak", "recommend_cpu": "recommend", "evaluate_cpu": "evaluate"}


def _phase(fn):
    """``(wall, cpu, peak GB above the start, result)`` of one call."""
    base = reset_peak()
    wall, cpu, result = timed(fn)
    return wall, cpu, (high_water_kib() - base) / 2**20, result


class _Stages(logging.Handler):
    """The package's INFO lines of a fit (FEBR's stages, each base's fit), with their times."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append((time.perf_counter(), record.getMessage()))

    def seconds(self, end) -> list:
        """``[(line, seconds until the next line or end)]``."""
        times = [t for t, _ in self.lines] + [end]
        return [(line, round(b - a, 2)) for (a, line), b in zip(self.lines, times[1:])]


def _one(folder: str, model: str, serve_budget: float) -> dict:
    """Every cost of one model on the split saved in ``folder`` (run in a fresh process); the row so
    far is written to :func:`_partial` as each phase ends."""
    import scipy.sparse as sp

    from recsys_ltr import _parallel, models
    from recsys_ltr.datasets import make_tastes
    from recsys_ltr.executors import recommend_users
    from recsys_ltr.febr import FEBR
    from recsys_ltr.metrics import evaluate
    from recsys_ltr.neighbors.slim import slim_weights

    names = {**vars(models), "FEBR": FEBR}
    X = make_tastes(500, 200, random_state=0).matrix
    mirrored = X[:, ::-1].tocsr() - X.multiply(X[:, ::-1]).tocsr()  # test positives apart from X
    default = _parallel.SERIAL_SECONDS
    for serial_seconds in (default, 0.0):  # numba loads (or compiles) both versions of the row kernels
        _parallel.SERIAL_SECONDS = serial_seconds
        warm = eval(MODELS[model], names).set_params(show_progress=False)
        warm.set_params(**({"max_iter": 2000, "eval_every": 1000} if model == "FEBR" else {}))
        warm.set_params(**({"factors": 16} if model in ("GF-CF", "BSPM") else {}))
        warm.fit(X).recommend(np.arange(10), N=10)
        evaluate(warm, X, mirrored, metrics=list(METRICS), show_progress=False)
    _parallel.SERIAL_SECONDS = default
    # the kernels of large catalogues: EASE's sparse solve (EASE(), FEBR()) and fsSLIM's sparse Gram matrix
    models.EASE(solver="sparse", show_progress=False).fit(X).recommend(np.arange(10), N=10)
    slim_weights(X, neighbors=(X.T @ X).tocsr(), max_gram_bytes=1, show_progress=False)
    del warm
    folder = Path(folder)
    train, test = sp.load_npz(folder / "train.npz"), sp.load_npz(folder / "test.npz")
    users = np.load(folder / "users.npy")
    estimator = eval(MODELS[model], names).set_params(show_progress=False)
    stages, logger = _Stages(), logging.getLogger("recsys_ltr")
    logger.addHandler(stages)
    logger.setLevel(logging.INFO)
    try:
        fit_wall, fit_cpu, fit_peak, _ = _phase(lambda: estimator.fit(train))
    except MemoryError as exc:
        return {"refused": str(exc)}
    logger.removeHandler(stages)
    row = {
        "fit_wall": fit_wall,
        "fit_cpu": fit_cpu,
        "fit_peak_gb": fit_peak,
        "stages": stages.seconds(time.perf_counter()),
    }
    finished = lambda: _partial(folder, model).write_text(json.dumps(row))  # noqa: E731
    finished()
    n_users = train.shape[0]
    probe = np.arange(min(n_users, max(PROBE_USERS, n_users // 50)))
    served = lambda users: sum(b.size for b, _, _ in recommend_users(estimator, users, N=20, show_progress=False))  # noqa: E731
    wall, cpu, peak, _ = _phase(lambda: served(probe))
    if wall * n_users / probe.size > serve_budget:  # extrapolated from the probe's users
        scale = n_users / probe.size
        row.update(
            recommend_wall=wall * scale,
            recommend_cpu=cpu * scale,
            recommend_peak_gb=peak,
            recommend_users=int(probe.size),
        )
    else:
        row["recommend_wall"], row["recommend_cpu"], row["recommend_peak_gb"], n = _phase(lambda: served(None))
        assert n == n_users
    finished()
    judged = lambda: evaluate(estimator, train, test, metrics=list(METRICS), users=users, show_progress=False)  # noqa: E731
    row["evaluate_wall"], row["evaluate_cpu"], _, result = _phase(judged)
    row.update({metric: float(result[metric]) for metric in METRICS})
    finished()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.npz"
        row["save_s"], _, _, _ = _phase(lambda: estimator.save(path))
        row["file_mb"] = path.stat().st_size / 1e6
        row["load_s"], _, _, _ = _phase(lambda: type(estimator).load(path))
    return row


def prepare(size: str, folder: Path, seed: int) -> dict:
    """Generate, split and save one size; its shape and positives."""
    import scipy.sparse as sp

    from recsys_ltr import split
    from recsys_ltr.datasets import make_tastes

    n_users, n_items = SIZES[size]
    X = make_tastes(n_users, n_items, random_state=seed).matrix
    train, _, test = split.holdout(X, val=0.0, test=0.2, random_state=seed)
    with_test = np.flatnonzero(np.diff(test.indptr))
    users = np.sort(np.random.default_rng(seed).choice(with_test, min(EVAL_USERS, with_test.size), replace=False))
    folder.mkdir(parents=True, exist_ok=True)
    sp.save_npz(folder / "train.npz", train, compressed=False)
    sp.save_npz(folder / "test.npz", test, compressed=False)
    np.save(folder / "users.npy", users)
    return {"users": n_users, "items": n_items, "positives": int(train.nnz)}


def _partial(folder: Path, model: str) -> Path:
    """Where :func:`_one` keeps the row of the phases it has finished."""
    return Path(folder) / f"{model}.json"


def run(folder: Path, model: str, budget: float, serve_budget: float) -> dict:
    code = (
        f"import sys, json; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); "
        f"from scale_table import _one; print(json.dumps(_one({str(folder)!r}, {model!r}, {serve_budget!r})))"
    )
    env = {"PYTHONWARNINGS": "ignore"}
    try:
        return json.loads(fresh_process(code, ROOT, env, timeout=budget).strip().splitlines()[-1])
    except RuntimeError as exc:  # failed or out of time: the phases it finished, then its last error line
        finished = _partial(folder, model)
        row = json.loads(finished.read_text()) if finished.exists() else {}
        return {**row, "failed": str(exc).strip().splitlines()[-1]}


def growth(rows: list[dict]) -> dict:
    """Per model, the exponent of each cost in the positives over the sizes it was measured at."""
    out = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        exponents = {}
        for key in GROWTH:
            measured = [r for r in rows if r["model"] == model and key in r]
            if len({r["positives"] for r in measured}) >= 2:
                x, y = np.log([r["positives"] for r in measured]), np.log([max(r[key], 1e-3) for r in measured])
                exponents[key] = float(np.polyfit(x, y, 1)[0])
        if "fit_cpu" in exponents:
            out[model] = exponents
    return out


def latest(path: Path) -> list[dict]:
    """The rows of ``path``, the last of each (model, size), in table order."""
    rows = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json.loads(line)
        rows[row["model"], row["size"]] = row
    return sorted(rows.values(), key=lambda r: (list(SIZES).index(r["size"]), list(MODELS).index(r["model"])))


HEAD = ["size", "model", "fit wall / CPU s", "fit peak GB", "recommend all, N=20: wall / CPU s",
        "evaluate 10k: wall / CPU s", "save / load s", "file MB", "ADG", "Recall@20"]  # fmt: skip


def cells(r: dict) -> list[str]:
    """One row of the table: the measured costs; why the model stopped in the first cell it left empty."""
    columns = [
        ("fit_cpu", lambda: f"{_s(r['fit_wall'])} / {_s(r['fit_cpu'])}"),
        ("fit_peak_gb", lambda: f"{r['fit_peak_gb']:.2f}"),
        ("recommend_cpu", lambda: f"{'~' if 'recommend_users' in r else ''}{_s(r['recommend_wall'])} / {_s(r['recommend_cpu'])}"),
        ("evaluate_cpu", lambda: f"{_s(r['evaluate_wall'])} / {_s(r['evaluate_cpu'])}"),
        ("load_s", lambda: f"{r['save_s']:.1f} / {r['load_s']:.1f}"),
        ("file_mb", lambda: f"{r['file_mb']:,.0f}"),
        ("ADG", lambda: f"{r['ADG']:.4f}"),
        ("REC@20", lambda: f"{r['REC@20']:.4f}"),
    ]  # fmt: skip
    row = [f"{r['size']} ({r['positives']:,} positives)", MODELS[r["model"]]]
    row += [show() if key in r else "" for key, show in columns]
    why = r.get("refused") or r.get("failed")
    if why:
        row[row.index("")] = why
    return row


def _s(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds < 10 else f"{seconds:,.0f}"


def tables(rows: list[dict]) -> list[list[list[str]]]:
    """The costs (a header, then one row per size and model) and, where a model ran at two sizes or
    more, the growth exponents."""
    out = [[HEAD, *(cells(r) for r in rows)]]
    exponents = growth(rows)
    if exponents:
        out.append(
            [["model", *GROWTH.values()]]
            + [[MODELS[m], *(f"{e[k]:.2f}" for k in GROWTH)] for m, e in exponents.items()]
        )
    return out


def rst(table) -> str:
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in table:
        lines += [f"   * - {row[0]}"] + [f"     - {c}" for c in row[1:]]
    return "\n".join(lines) + "\n"


def markdown(table) -> str:
    lines = ["| " + " | ".join(table[0]) + " |", "|---" * len(table[0]) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in table[1:]]) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--budget", type=float, default=5400.0, help="seconds a model may take at one size")
    parser.add_argument(
        "--serve-budget", type=float, default=1800.0,
        help="wall seconds above which recommend-all is extrapolated from its first users' time",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "scale_costs")
    parser.add_argument("--users", type=int, help="override the sizes' users (the items stay a tenth): a quick look")
    args = parser.parse_args()
    if args.users:
        SIZES.update({size: (args.users, max(args.users // 10, 50)) for size in args.sizes})
    jsonl = args.out.with_suffix(".jsonl")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            shape = prepare(size, Path(tmp) / size, args.seed)
            for model in args.models:
                row = {
                    "size": size,
                    "model": model,
                    **shape,
                    **run(Path(tmp) / size, model, args.budget, args.serve_budget),
                }
                with jsonl.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
    results = tables(latest(jsonl))
    args.out.with_suffix(".inc").write_text("\n".join(rst(t) for t in results))
    print("\n".join(markdown(t) for t in results))
    print(f"wrote {jsonl} and {args.out.with_suffix('.inc')}")


if __name__ == "__main__":
    main()
