"""Run the dissertation's per-user holdout experiment (sec. 4.7.3-4.7.5) for several methods.

For each fold (:func:`recsys_ltr.split.folds`: seed ``seed + fold``), the data are split per user
into train / validation / test (10% / 20% of each user's positives by default).  Each method is
tuned on validation ADG in two levels (:func:`tune`), then its chosen setting is evaluated on test
with the validation positives excluded from the candidates.  The novelty protocol draws validation
and test items only outside the ``exclude_top`` most popular items.

One (method, fold) pair is a *unit*: units run in-process or in ``jobs`` worker processes, and each
finished unit is cached as one JSON file (test metrics, per-user values, tuning trace) keyed by
everything that determines it, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from recsys_ltr import split
from recsys_ltr._validation import check_feedback, check_positive_int
from recsys_ltr.eval.methods import get_method
from recsys_ltr.metrics import evaluate

PROTOCOLS = ("standard", "novelty")
TABLE_METRICS = ("ADG", "REC@{k}", "MAP", "NDCG", "ATOP")


def table_metrics(k: int) -> list[str]:
    """The metrics of Tables 4.3 / 4.4 with the recall cutoff ``k``."""
    return [m.format(k=k) for m in TABLE_METRICS]

#: Bumped when the cached content or its meaning changes (older files are then recomputed).
CACHE_VERSION = 1


@dataclass
class FoldResult:
    """Test metrics of one method on one fold, with the setting chosen on validation.

    ``per_user`` holds the per-user test values of :func:`table_metrics` (aligned with ``users``);
    ``trials`` lists every setting tried: ``level`` (1: main hyper-parameter, 2: secondary),
    ``params``, ``validation_ADG`` and ``fit_seconds``.
    """

    method: str
    fold: int
    params: dict
    validation_adg: float
    test: dict[str, float]
    test_stderr: dict[str, float]
    per_user: dict[str, np.ndarray] = field(repr=False)
    users: np.ndarray = field(repr=False)
    fit_seconds: float = 0.0
    trials: list[dict] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        out = asdict(self)
        out["per_user"] = {m: np.asarray(v, dtype=float).tolist() for m, v in self.per_user.items()}
        out["users"] = np.asarray(self.users, dtype=np.int64).tolist()
        return out

    @classmethod
    def from_json(cls, data: dict) -> FoldResult:
        data = dict(data)
        data["per_user"] = {m: np.asarray(v, dtype=float) for m, v in data["per_user"].items()}
        data["users"] = np.asarray(data["users"], dtype=np.int64)
        return cls(**data)


@dataclass
class Skipped:
    """A unit whose method cannot run here (missing optional dependency, catalogue too large)."""

    method: str
    fold: int
    reason: str


@dataclass
class Experiment:
    """Outcome of :func:`run_experiment`: results per (fold, method) in a fixed order, skipped
    units, and the units computed in this run (the others came from the cache)."""

    results: list[FoldResult]
    skipped: list[Skipped]
    computed: list[tuple[str, int]]


# ------------------------------------------------------------------------------ tuning
def _fitter(method, train, val, random_state, num_threads):
    """``fit(params) -> (fitted model, seconds)`` with the method's seed/thread/validation habits."""
    extra = {}
    if method.seeded:
        extra["random_state"] = random_state
    if method.threaded:
        extra["num_threads"] = num_threads

    def fit(params):
        t0 = time.perf_counter()
        model = method.build(**params, **extra)
        model = model.fit(train, val) if method.uses_validation else model.fit(train)
        return model, time.perf_counter() - t0

    return fit


def _main_level(method, budget, shape, fit):
    """Yield ``(params, model, fit seconds)`` for level 1.  Models with ``with_k`` (neighbourhoods
    stored as row prefixes) are fitted once at the largest ``k``; smaller ones are truncations."""
    settings = method.main_settings(budget, shape)
    if method.main == "k" and len(settings) > 1:
        largest = max(settings, key=lambda p: p["k"])
        model, seconds = fit(largest)
        if hasattr(model, "with_k"):
            for params in settings:
                yield params, (model if params is largest else model.with_k(params["k"])), seconds
            return
        yield largest, model, seconds
        settings = [p for p in settings if p is not largest]
    for params in settings:
        yield (params, *fit(params))


def tune(method_name, train, val, *, budget="quick", k=10, random_state=None, num_threads=0):
    """Two-level tuning on validation ADG (dissertation sec. 4.7.3).

    Level 1 tries every value of the main hyper-parameter with the secondary ones at their
    defaults; level 2 tries the secondary settings at the best main value (the default one is not
    refitted).  Ties keep the setting tried first.

    Returns
    -------
    params : dict
        The chosen setting.
    model : fitted estimator
    trials : list of dict
        Every setting tried (see :class:`FoldResult`).
    """
    method = get_method(method_name)
    fit = _fitter(method, train, val, random_state, num_threads)
    trials = []
    best = None

    def consider(level, params, model, seconds):
        nonlocal best
        adg = evaluate(model, train, val, metrics=("ADG",), k=k, num_threads=num_threads)["ADG"]
        trials.append({"level": level, "params": dict(params), "validation_ADG": adg, "fit_seconds": seconds})
        if best is None or adg > best[0]:
            best = (adg, dict(params), model, seconds)

    for params, model, seconds in _main_level(method, budget, train.shape, fit):
        consider(1, params, model, seconds)
    for params in method.secondary_settings(budget, best[1]):
        if params != best[1] and all(params != t["params"] for t in trials):
            consider(2, params, *fit(params))
    return best[1], best[2], trials


def tune_and_test(method_name, train, val, test, *, budget="quick", k=10, random_state=None,
                  num_threads=0) -> FoldResult:
    """Pick a method's setting by :func:`tune`, then evaluate it on ``test`` (validation excluded).

    Returns the fold's :class:`FoldResult` (``fold`` is left at -1 for the caller to set).
    """
    params, model, trials = tune(method_name, train, val, budget=budget, k=k, random_state=random_state,
                                 num_threads=num_threads)
    res = evaluate(model, train, test, exclude=val, k=k, num_threads=num_threads)
    chosen = next(t for t in trials if t["params"] == params)
    return FoldResult(
        method=method_name,
        fold=-1,
        params=params,
        validation_adg=float(chosen["validation_ADG"]),
        test=dict(res),
        test_stderr=dict(res.stderr),
        per_user={m: res.per_user[m] for m in table_metrics(k)},  # for the paired tests
        users=np.asarray(res.users),
        fit_seconds=chosen["fit_seconds"],
        trials=trials,
    )


def run_unit(method_name, fold, train, val, test, *, budget, k, random_state, num_threads):
    """One (method, fold) unit: a :class:`FoldResult`, or :class:`Skipped` when the method raises
    one of its ``skip_on`` errors (e.g. ``ImportError`` for a missing optional dependency)."""
    method = get_method(method_name)
    try:
        result = tune_and_test(method_name, train, val, test, budget=budget, k=k, random_state=random_state,
                               num_threads=num_threads)
    except method.skip_on as exc:
        return Skipped(method_name, fold, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    result.fold = fold
    return result


# ------------------------------------------------------------------------------ cache
def data_fingerprint(X) -> str:
    """sha1 of a feedback matrix's shape and sparsity pattern (what the experiment depends on)."""
    h = hashlib.sha1(repr(X.shape).encode())
    h.update(np.ascontiguousarray(X.indptr, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(X.indices, dtype=np.int64).tobytes())
    return h.hexdigest()


class UnitCache:
    """One JSON file per unit under ``directory``, written atomically (temporary file + rename).

    The file holds the unit's key (data set, data fingerprint, method spec, fold, protocol, budget,
    seed, split parameters, cutoff, :data:`CACHE_VERSION`) and its :class:`FoldResult`; a file
    whose key differs or that cannot be read is ignored (and overwritten when recomputed).
    """

    def __init__(self, directory, **settings):
        self.directory = Path(directory)
        self.settings = settings

    def key(self, method_name, fold) -> dict:
        key = {"version": CACHE_VERSION, **self.settings, "method": get_method(method_name).spec(), "fold": fold}
        return json.loads(json.dumps(key))  # tuples -> lists, as read back

    def path(self, method_name, fold) -> Path:
        key = self.key(method_name, fold)
        digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
        s = self.settings
        stem = f"{s['dataset']}-{s['protocol']}-{s['budget']}-seed{s['seed']}-{method_name}-fold{fold}-{digest}"
        return self.directory / (re.sub(r"[^\w.@-]", "_", stem) + ".json")

    def load(self, method_name, fold) -> FoldResult | None:
        path = self.path(method_name, fold)
        try:
            payload = json.loads(path.read_text())
            if payload["key"] != self.key(method_name, fold):
                return None
            return FoldResult.from_json(payload["result"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            print(f"ignoring unreadable cache file {path}: {exc}", file=sys.stderr)
            return None

    def store(self, result: FoldResult) -> Path:
        path = self.path(result.method, result.fold)
        self.directory.mkdir(parents=True, exist_ok=True)
        payload = {"key": self.key(result.method, result.fold), "result": result.to_json()}
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(payload, f)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 is needlessly private
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        return path


# ------------------------------------------------------------------------------ experiment
def _init_worker(num_threads):
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(num_threads)
    threadpool_limits(num_threads)  # BLAS (EASE, ALS) as well


def _execute(units, jobs, arguments):
    """Yield ``(unit, outcome)`` as units finish: in-process for one job, else in worker processes
    (spawned: forking after numba started its threads is unsafe)."""
    if jobs == 1:
        for unit in units:
            yield unit, run_unit(*arguments.args(*unit), **arguments.kwargs(*unit))
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker, initargs=(arguments.num_threads,))
    try:
        futures = {pool.submit(run_unit, *arguments.args(*unit), **arguments.kwargs(*unit)): unit for unit in units}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:  # on an error or interrupt, drop the queued units instead of running them
        pool.shutdown(wait=True, cancel_futures=True)


class _UnitArguments:
    """Arguments of :func:`run_unit` for a (method, fold) unit."""

    def __init__(self, splits, budget, k, seed, num_threads):
        self.splits, self.budget, self.k, self.seed, self.num_threads = splits, budget, k, seed, num_threads

    def args(self, name, fold):
        return (name, fold, *self.splits[fold])

    def kwargs(self, name, fold):
        return {"budget": self.budget, "k": self.k, "random_state": self.seed + fold, "num_threads": self.num_threads}


def threads_per_job(jobs: int) -> int:
    """numba threads of each job: ``max(1, cores // jobs)`` (cores: what numba may use)."""
    import numba

    return max(1, numba.config.NUMBA_NUM_THREADS // jobs)


def run_experiment(
    X,
    methods,
    *,
    folds=3,
    protocol="standard",
    val=0.1,
    test=0.2,
    exclude_top=100,
    seed=0,
    budget="quick",
    k=10,
    jobs=1,
    cache_dir=None,
    read_cache=True,
    dataset="data",
    show_progress=True,
) -> Experiment:
    """Run every method on ``folds`` seeded splits of ``X`` (units in parallel with ``jobs > 1``).

    With ``cache_dir``, finished units are read from (unless ``read_cache`` is false: recompute
    all) and written to the cache (:class:`UnitCache`).  ``dataset`` names the data in cache keys
    (with a fingerprint of ``X``).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    methods = list(dict.fromkeys(methods))
    for name in methods:
        get_method(name)  # fail before any work on an unknown name
    folds = check_positive_int(folds, "folds")
    jobs = check_positive_int(jobs, "jobs")
    X = check_feedback(X)
    exclude_top = exclude_top if protocol == "novelty" else None
    splits = list(split.folds(X, n_folds=folds, val=val, test=test, seed=seed, exclude_top=exclude_top))
    cache = None
    if cache_dir is not None:
        cache = UnitCache(cache_dir, dataset=dataset, data=data_fingerprint(X), protocol=protocol, budget=budget,
                          seed=seed, val=val, test=test, exclude_top=exclude_top, k=k)
    units = [(name, fold) for fold in range(folds) for name in methods]
    outcomes = {unit: cache.load(*unit) for unit in units} if cache and read_cache else {}
    todo = [unit for unit in units if outcomes.get(unit) is None]
    bar = tqdm(total=len(units), initial=len(units) - len(todo), desc=f"{dataset} {protocol}", unit="run",
               disable=not show_progress)
    reported = set()
    arguments = _UnitArguments(splits, budget, k, seed, threads_per_job(jobs))
    for unit, outcome in _execute(todo, jobs, arguments):
        outcomes[unit] = outcome
        if isinstance(outcome, Skipped):
            if outcome.method not in reported:
                reported.add(outcome.method)
                tqdm.write(f"skipped {outcome.method}: {outcome.reason}", file=sys.stderr)
        elif cache:
            cache.store(outcome)
        bar.set_postfix_str(f"fold {unit[1]} {unit[0]}")
        bar.update()
    bar.close()
    ordered = [outcomes[unit] for unit in units]
    return Experiment(
        results=[o for o in ordered if isinstance(o, FoldResult)],
        skipped=[o for o in ordered if isinstance(o, Skipped)],
        computed=todo,
    )
