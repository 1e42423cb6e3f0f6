"""Run the dissertation's per-user holdout experiment (sec. 4.7.3-4.7.5) for several methods.

For each fold (:func:`recsys_ltr.split.folds`: seed ``seed + fold``), the data are split per user
into train / validation / test (10% / 20% of each user's positives by default).  Each method is
tuned on validation ADG in two levels (:func:`tune`), then its chosen setting is evaluated on test
with the validation positives excluded from the candidates.  The novelty protocol draws validation
and test items only outside the ``exclude_top`` most popular items, and reports every non-stacking
method twice: as tuned, and with those items pushed below the rest (the knowledge the stacked FEBR
gets through ``label_exclude_top``).  The fixed protocol takes a data set's published
train / valid / test split instead (LightGCN's gowalla): settings are chosen on validation
``REC@k``, the chosen one is refitted on train + valid and tested on test (every item outside the
user's train + valid positives a candidate).  The temporal protocol runs the same way on a
time-ordered split the caller makes (``python -m recsys_ltr.eval --protocol temporal``: per user the
latest 20% of the positives as test, the 10% before them as validation,
:func:`recsys_ltr.split.last_fraction`), settings chosen on validation ADG as in the holdout
protocols, the chosen one refitted on train + valid (the validation positives precede the test ones
in time, so the refitted model has seen everything before the test part).

One (method, fold) pair is a *unit*: units run as tasks of an executor (in-process, in local worker
processes or on Ray: :mod:`recsys_ltr.executors`), and each finished unit is cached as one JSON
file (test metrics, per-user values, tuning trace) keyed by everything that determines it.  While
a unit is tuned, every finished setting is logged next to it (:class:`TrialLog`), so an
interrupted run resumes at the next setting, not at the unit's start.

Logging (``logging.getLogger(__name__)``; the package configures no handler, the command line does):
one ``INFO`` line per stage of a unit (tuning, refit, test) and per finished unit (method, fold,
seconds, chosen setting, validation value), so that a run outside a terminal shows its progress.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from functools import cache, partial
from pathlib import Path

import numpy as np

from recsys_ltr import split
from recsys_ltr._io import atomic_write
from recsys_ltr._progress import progress, progress_write
from recsys_ltr._validation import check_feedback, check_positive_int
from recsys_ltr.eval.methods import get_method
from recsys_ltr.executors import ProcessExecutor, check_executor, get_executor
from recsys_ltr.metrics import DEFAULT_METRICS, evaluate, ranked_last

PROTOCOLS = ("standard", "novelty", "fixed", "temporal")
#: The dissertation's per-user holdout protocols (``--protocol both``).
HOLDOUT_PROTOCOLS = ("standard", "novelty")
#: The protocols on one given split ``parts=(train, valid, test)``: tuned on valid, refitted on
#: train + valid, tested on test (a published split; a time-ordered split).
PARTS_PROTOCOLS = ("fixed", "temporal")
#: Format of the log lines of the command line (:func:`configure_worker_logging` reuses it).
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

logger = logging.getLogger(__name__)
TABLE_METRICS = ("ADG", "REC@{k}", "MAP", "NDCG", "ATOP")
#: The fixed-split table: the published benchmarks' Recall@k and NDCG@k first.
FIXED_METRICS = ("REC@{k}", "NDCG@{k}", "ADG", "MAP", "ATOP")


def table_metrics(k: int, protocol: str = "standard") -> list[str]:
    """The metrics of Tables 4.3 / 4.4 with the recall cutoff ``k`` (fixed protocol: Recall@k, NDCG@k first)."""
    return [m.format(k=k) for m in (FIXED_METRICS if protocol == "fixed" else TABLE_METRICS)]


def selection_metric(protocol: str, k: int) -> str:
    """The validation metric that settings are chosen on: ADG (sec. 4.7.3), ``REC@k`` on a fixed split."""
    return f"REC@{k}" if protocol == "fixed" else "ADG"


def filtered_name(method: str, exclude_top: int) -> str:
    """Name of ``method``'s novelty row with the ``exclude_top`` most popular items pushed below the rest."""
    return f"{method} (top-{exclude_top} last)"


def method_of(row: str) -> str:
    """The method of a table row: ``row`` itself, or the method of a :func:`filtered_name` row."""
    return re.sub(r" \(top-\d+ last\)$", "", row)


#: Bumped when the cached content or its meaning changes (older files are then recomputed).
CACHE_VERSION = 3


@cache
def code_fingerprint() -> str:
    """sha256 of the package's source files: cached results are tied to the code that made them."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@dataclass
class FoldResult:
    """Test metrics of one method on one fold, with the setting chosen on validation.

    ``per_user`` holds the per-user test values of :func:`table_metrics` (aligned with ``users``);
    ``trials`` lists every setting tried: ``level`` (1: main hyper-parameter, 2: secondary),
    ``params``, ``validation`` (the ``select`` metric on validation) and ``fit_seconds``.
    ``filtered`` is the novelty protocol's second row of the same model (:func:`filtered_name`).
    ``seconds`` is the unit's wall time where it ran.
    """

    method: str
    fold: int
    params: dict
    validation: float
    test: dict[str, float]
    test_stderr: dict[str, float]
    per_user: dict[str, np.ndarray] = field(repr=False)
    users: np.ndarray = field(repr=False)
    fit_seconds: float = 0.0
    trials: list[dict] = field(default_factory=list, repr=False)
    select: str = "ADG"
    filtered: FoldResult | None = field(default=None, repr=False)
    seconds: float = 0.0  # wall time of the whole unit (tuning, refit, test)

    def to_json(self) -> dict:
        out = asdict(replace(self, filtered=None))
        out["per_user"] = {m: np.asarray(v, dtype=float).tolist() for m, v in self.per_user.items()}
        out["users"] = np.asarray(self.users, dtype=np.int64).tolist()
        out["filtered"] = None if self.filtered is None else self.filtered.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict) -> FoldResult:
        data = dict(data)
        data["per_user"] = {m: np.asarray(v, dtype=float) for m, v in data["per_user"].items()}
        users = np.asarray(data["users"])
        if users.ndim != 1 or (users.size and users.dtype.kind not in "iu"):  # 0.5 was read as user 0
            raise ValueError(f"users must be a list of integer user ids, got {users.dtype} of shape {users.shape}")
        data["users"] = users.astype(np.int64)
        data["filtered"] = None if data.get("filtered") is None else cls.from_json(data["filtered"])
        return cls(**data)

    def rows(self) -> list[FoldResult]:
        """This result and its ``filtered`` row, if any: the table rows of the unit."""
        return [self] if self.filtered is None else [self, self.filtered]

    def check(self, users: np.ndarray) -> None:
        """Raise ``ValueError`` unless the result covers exactly the evaluated ``users`` and every
        mean is the mean of its per-user values."""
        if not np.array_equal(self.users, users):
            raise ValueError(f"holds {self.users.size} users, the fold evaluates {users.size}")
        for name, values in self.per_user.items():
            if values.shape != users.shape or not np.all(np.isfinite(values)):
                raise ValueError(f"per-user {name} has {values.size} values for {users.size} users")
            if not np.isclose(self.test.get(name, np.nan), values.mean(), rtol=1e-12, atol=1e-15):
                raise ValueError(f"test {name} = {self.test.get(name)!r} is not the mean of its per-user values")
        if self.filtered is not None:
            self.filtered.check(users)


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
def build(method, params, random_state=None, num_threads=0, context=None):
    """The unfitted estimator of ``method`` at ``params`` with the method's seed and thread habits
    and the unit's ``context`` (``stack_context``): a stacking method's bases are built here."""
    extra = dict(context or {})
    if method.seeded:
        extra["random_state"] = random_state
    if method.threaded:
        extra["num_threads"] = num_threads
    if "bases" in extra:
        extra["bases"] = [(n, build(get_method(n), p, random_state, num_threads)) for n, p in extra["bases"]]
    model = method.build(**params, **extra)
    if hasattr(model, "show_progress"):  # the run's bar counts units; the fits inside stay quiet
        model.set_params(show_progress=False)
    return model


def stack_context(method, fold_results, exclude_top=None, n_items=None, select="ADG") -> dict | None:
    """Constructor arguments of a stacking ``method`` (``stack_on``) on one fold of ``n_items``
    items: ``bases``, the ``[name, params]`` chosen for each base method it stacks there
    (``Method.stacked``) in ``fold_results`` (name -> FoldResult; a skipped one is left out),
    ``label_exclude_top`` under the novelty protocol and, when the protocol selects settings on
    another metric than ADG (``select``), ``validation_metric``: FEBR's own validation decisions
    judge by what the protocol judges.  ``{}`` for the other methods, ``None`` when no base ran."""
    if not method.stack_on:
        return {}
    bases = [[n, fold_results[n].params] for n in method.stacked(n_items) if n in fold_results]
    if not bases:
        return None
    context = {"bases": bases, **({"label_exclude_top": exclude_top} if exclude_top is not None else {})}
    return context | ({"validation_metric": select} if select != "ADG" else {})


def _fitter(method, train, val, random_state, num_threads, context=None):
    """``fit(params) -> (fitted model, seconds)`` with the method's seed/thread/validation habits."""

    def fit(params):
        t0 = time.perf_counter()
        model = build(method, params, random_state, num_threads, context)
        model = model.fit(train, validation=val) if method.uses_validation and val is not None else model.fit(train)
        return model, time.perf_counter() - t0

    return fit


def _main_level(method, budget, shape, fit):
    """Yield ``(params, make)`` for level 1, ``make()`` fitting on demand to ``(model, fit seconds)``.
    Models with ``with_k`` (neighbourhoods stored as row prefixes) are fitted once at the largest
    ``k``; smaller ones are truncations."""
    settings = method.main_settings(budget, shape)
    if method.main != "k" or len(settings) < 2:
        yield from ((params, partial(fit, params)) for params in settings)
        return
    largest = max(settings, key=lambda p: p["k"])
    fit_largest = cache(partial(fit, largest))
    if not hasattr(method.build(**largest), "with_k"):
        yield largest, fit_largest
        yield from ((params, partial(fit, params)) for params in settings if params is not largest)
        return

    def truncated(params):
        model, seconds = fit_largest()
        return (model if params is largest else model.with_k(params["k"])), seconds

    yield from ((params, partial(truncated, params)) for params in settings)


def _setting_key(params) -> str:
    return json.dumps(params, sort_keys=True)


def tune(
    method_name,
    train,
    val,
    *,
    budget="quick",
    k=10,
    random_state=None,
    num_threads=0,
    log=None,
    context=None,
    select="ADG",
):
    """Two-level tuning on validation ADG (dissertation sec. 4.7.3), or on the metric ``select``.

    Level 1 tries every value of the main hyper-parameter with the secondary ones at their
    defaults; level 2 tries the secondary settings at the best main value (the default one is not
    refitted).  Ties keep the setting tried first.  With a :class:`TrialLog`, settings it holds are
    not refitted, every new one is appended to it, and the chosen setting is refitted when it came
    from the log.

    Returns
    -------
    params : dict
        The chosen setting.
    model : fitted estimator
    trials : list of dict
        Every setting tried (see :class:`FoldResult`).

    Examples
    --------
    >>> from recsys_ltr import split
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.eval.runner import tune
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> train, val, test = split.holdout(X, val=0.1, test=0.2, random_state=0)
    >>> params, model, trials = tune("item-p", train, val, budget="quick")  # the CLI's item-p row
    >>> params, [t["params"] for t in trials]
    ({'k': 50}, [{'k': 20}, {'k': 50}])
    """
    method = get_method(method_name)
    fit = _fitter(method, train, val, random_state, num_threads, context)
    logged = {_setting_key(t["params"]): t for t in (log.load() if log else ())}
    trials = []
    best = None

    def consider(level, params, make):
        nonlocal best
        trial, model = logged.get(_setting_key(params)), None
        if trial is None:
            if not method.keep_best and best is not None:
                best = (*best[:2], None)  # one model in memory at a time: the chosen one is refitted
            model, seconds = make()
            value = evaluate(model, train, val, metrics=(select,), k=k, num_threads=num_threads)[select]
            trial = {"level": level, "params": dict(params), "validation": value, "fit_seconds": seconds}
            if log:
                log.append(trial)
        trials.append(trial)
        if best is None or trial["validation"] > best[0]:
            best = (trial["validation"], dict(params), model)

    for params, make in _main_level(method, budget, train.shape, fit):
        consider(1, params, make)
    for params in method.secondary_settings(budget, best[1]):
        if params != best[1] and all(_setting_key(params) != _setting_key(t["params"]) for t in trials):
            consider(2, params, partial(fit, params))
    _, params, model = best
    if model is None:  # dropped above, or chosen before an interruption
        model, _ = fit(params)
    return params, model, trials


def _describe(params) -> str:
    """A setting as ``k=50, lam=0.001`` (nested ones flattened, floats short)."""
    flat = {}
    for key, value in params.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        elif key != "bases":
            flat[key] = value
    return (
        ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(flat.items())) or "defaults"
    )


def tune_and_test(
    method_name,
    train,
    val,
    test,
    *,
    budget="quick",
    k=10,
    random_state=None,
    num_threads=0,
    log=None,
    context=None,
    protocol="standard",
    push_down=None,
    label=None,
) -> FoldResult:
    """Pick a method's setting by :func:`tune`, then evaluate it on ``test``.

    Under the holdout protocols the tuned model is tested with the validation positives excluded;
    under ``"fixed"`` and ``"temporal"`` it is refitted on ``train + val`` first (``"fixed"``
    tunes on validation ``REC@k``, the others on ADG).  ``push_down`` (item ids) adds the
    ``filtered`` row: the same model with those items ranked last.  ``label`` names the unit in
    the log lines (default: the method).  Returns the fold's :class:`FoldResult` (``fold`` is
    left at -1 for the caller to set).
    """
    select = selection_metric(protocol, k)
    label = label or method_name
    t0 = time.perf_counter()
    logger.info("%s: tuning on validation %s (%d validation positives)", label, select, val.nnz)
    params, model, trials = tune(
        method_name,
        train,
        val,
        budget=budget,
        k=k,
        random_state=random_state,
        num_threads=num_threads,
        log=log,
        context=context,
        select=select,
    )
    chosen = next(t for t in trials if _setting_key(t["params"]) == _setting_key(params))
    logger.info(
        "%s: tuned in %.1f s, %d setting(s) tried; chose %s (validation %s %.4f)",
        label, time.perf_counter() - t0, len(trials), _describe(params), select, chosen["validation"],
    )  # fmt: skip
    fit_seconds, exclude = chosen["fit_seconds"], val
    if protocol in PARTS_PROTOCOLS:
        train, exclude = (train + val).tocsr(), None  # disjoint parts: their union, canonical
        model, fit_seconds = _fitter(get_method(method_name), train, None, random_state, num_threads, context)(params)
        logger.info("%s: refitted on train + validation (%d positives) in %.1f s", label, train.nnz, fit_seconds)
    metrics = table_metrics(k, protocol)

    def result(name, scorer):
        res = evaluate(
            scorer, train, test, exclude=exclude, metrics=(*DEFAULT_METRICS, *metrics), k=k, num_threads=num_threads
        )
        return FoldResult(
            method=name,
            fold=-1,
            params=params,
            validation=float(chosen["validation"]),
            test=dict(res),
            test_stderr=dict(res.stderr),
            per_user={m: res.per_user[m] for m in metrics},  # for the paired tests
            users=np.asarray(res.users),
            fit_seconds=fit_seconds,
            trials=trials,
            select=select,
        )

    t_test = time.perf_counter()
    out = result(method_name, model)
    if push_down is not None:
        out.filtered = result(filtered_name(method_name, push_down.size), ranked_last(model.score, push_down))
    logger.info(
        "%s: tested on %d users in %.1f s: %s",
        label, out.users.size, time.perf_counter() - t_test, ", ".join(f"{m} {out.test[m]:.4f}" for m in metrics[:2]),
    )  # fmt: skip
    return out


def run_unit(
    method_name, fold, train, val, test, *, budget, k, random_state, num_threads, log=None, context=None, **protocol
):
    """One (method, fold) unit: a :class:`FoldResult`, or :class:`Skipped` when the method raises
    one of its ``skip_on`` errors (e.g. ``ImportError`` for a missing optional dependency).
    ``protocol``: ``protocol`` and ``push_down`` of :func:`tune_and_test`."""
    method = get_method(method_name)
    t0 = time.perf_counter()
    try:
        result = tune_and_test(
            method_name,
            train,
            val,
            test,
            budget=budget,
            k=k,
            random_state=random_state,
            num_threads=num_threads,
            log=log,
            context=context,
            label=f"{method_name} fold {fold}",
            **protocol,
        )
    except method.skip_on as exc:
        return Skipped(method_name, fold, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    for row in result.rows():
        row.fold = fold
        row.seconds = time.perf_counter() - t0
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
    seed, split parameters, cutoff, the unit's context -- a stacking method's bases --,
    :data:`CACHE_VERSION`) and its :class:`FoldResult`; a file whose key differs or that cannot be
    read is ignored (and overwritten when recomputed).  ``contexts`` maps ``(method, fold)`` to the
    unit's context (``stack_context``), filled before the unit is looked up.
    """

    def __init__(self, directory, contexts=None, **settings):
        self.directory = Path(directory)
        self.contexts = {} if contexts is None else contexts
        self.settings = settings

    def key(self, method_name, fold) -> dict:
        key = {
            "version": CACHE_VERSION,
            **self.settings,
            "method": get_method(method_name).spec(),
            "fold": fold,
            "context": self.contexts.get((method_name, fold), {}),
        }
        return json.loads(json.dumps(key))  # tuples -> lists, as read back

    def path(self, method_name, fold) -> Path:
        key = self.key(method_name, fold)
        digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
        s = self.settings
        stem = f"{s['dataset']}-{s['protocol']}-{s['budget']}-seed{s['seed']}-{method_name}-fold{fold}-{digest}"
        return self.directory / (re.sub(r"[^\w.@-]", "_", stem) + ".json")

    def load(self, method_name, fold, users) -> FoldResult | None:
        """The cached unit, or ``None`` when absent, made for other inputs or code, or failing its
        integrity checks (digest of its content, coverage of the fold's evaluated ``users``)."""
        path = self.path(method_name, fold)
        try:
            payload = json.loads(path.read_text())
            if payload["key"] != self.key(method_name, fold):
                return None
            if payload.get("sha256") != _digest(payload["key"], payload["result"]):
                raise ValueError("its content does not match its sha256 digest (edited or damaged)")
            result = FoldResult.from_json(payload["result"])
            result.check(users)
            return result
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as exc:
            print(f"ignoring cache file {path}: {exc}; recomputing", file=sys.stderr)
            return None

    @staticmethod
    def finished(directory, protocol) -> list[FoldResult]:
        """Every finished unit of ``protocol`` under ``directory``, whatever the rest of its key, each
        checked against its digest (a file failing it is reported and left out): what reports on
        earlier runs read."""
        results = []
        for path in sorted(Path(directory).glob("*.json")):
            if path.name.endswith(".trials.json"):
                continue
            try:
                payload = json.loads(path.read_text())
                if payload["key"].get("protocol") != protocol:
                    continue
                if payload.get("sha256") != _digest(payload["key"], payload["result"]):
                    raise ValueError("its content does not match its sha256 digest (edited or damaged)")
                results.append(FoldResult.from_json(payload["result"]))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                print(f"ignoring cache file {path}: {exc}", file=sys.stderr)
        return results

    def store(self, result: FoldResult) -> Path:
        """Write the finished unit (with the digest of its content) and drop its :class:`TrialLog`."""
        path = self.path(result.method, result.fold)
        key, content = self.key(result.method, result.fold), json.loads(json.dumps(result.to_json()))
        _write_json(path, {"key": key, "result": content, "sha256": _digest(key, content)})
        self.trial_log(result.method, result.fold).clear()
        return path

    def trial_log(self, method_name, fold, resume=True) -> TrialLog:
        """The log of the settings the unit has finished (``resume=False``: start it afresh)."""
        path = self.path(method_name, fold)
        return TrialLog(path.with_name(path.stem + ".trials.json"), self.key(method_name, fold), resume)


class TrialLog:
    """The settings of one unit finished so far (JSON, rewritten atomically after each), so that an
    interrupted unit resumes at its next setting.  A log whose key differs is ignored."""

    def __init__(self, path, key, resume=True):
        self.path, self.key, self.resume = Path(path), key, resume
        self.trials = []

    def load(self) -> list[dict]:
        self.trials = []
        if self.resume:
            try:
                payload = json.loads(self.path.read_text())
                if payload["key"] == self.key:
                    self.trials = list(payload["trials"])
            except FileNotFoundError:
                pass
            except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
                print(f"ignoring unreadable trial log {self.path}: {exc}", file=sys.stderr)
        return list(self.trials)

    def append(self, trial: dict) -> None:
        self.trials.append(trial)
        _write_json(self.path, {"key": self.key, "trials": self.trials})

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def _digest(key, result) -> str:
    return hashlib.sha256(json.dumps({"key": key, "result": result}, sort_keys=True).encode()).hexdigest()


def _write_json(path: Path, payload) -> None:
    """Write ``payload`` to ``path`` atomically (:func:`recsys_ltr._io.atomic_write`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: f.write(json.dumps(payload).encode()))


# ------------------------------------------------------------------------------ experiment
class _UnitRunner:
    """The :func:`unit_executor` ``(executor, jobs)`` of a run, created when the first units are
    to run (no Ray session when every unit is cached) and closed on exit unless it was passed in."""

    def __init__(self, executor, jobs):
        self.executor, self.jobs, self.runner = executor, jobs, None

    def run(self, units, arguments):
        """Yield ``(unit, outcome)`` as the ``units`` finish, one task per unit; ``arguments`` (a
        :class:`_UnitArguments`: the splits) are shipped once, set to the executor's threads per task."""
        if not units:
            return
        if self.runner is None:
            self.runner = unit_executor(self.executor, self.jobs)
        arguments.num_threads = self.runner.threads
        for position, outcome in self.runner.map(_run_unit_task, units, arguments):
            yield units[position], outcome

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.runner is not None and self.runner is not self.executor:
            self.runner.close()


def _run_unit_task(arguments, unit):
    configure_worker_logging(arguments.log_level)
    return run_unit(*arguments.args(*unit), **arguments.kwargs(*unit))


def configure_worker_logging(level) -> None:
    """In a worker process whose logging nobody configured, log the package's records at ``level``
    (the level of the process that started the run, :func:`_run_level`) to standard error in
    :data:`LOG_FORMAT`; nothing when ``level`` is None or logging is configured already (in the
    run's own process, or in a Ray worker)."""
    if level is None or logging.getLogger().handlers:
        return
    logging.basicConfig(format=LOG_FORMAT, stream=sys.stderr)
    logging.getLogger("recsys_ltr").setLevel(level)


def _run_level():
    """The level the package logs at in this process when an application configured logging
    (a handler on the root logger), else None: what the run's worker processes should log."""
    if not logging.getLogger().handlers:
        return None
    return logging.getLogger("recsys_ltr").getEffectiveLevel()


class _UnitArguments:
    """Arguments of :func:`run_unit` for a (method, fold) unit."""

    def __init__(
        self,
        splits,
        budget,
        k,
        seed,
        num_threads,
        cache=None,
        resume=True,
        contexts=None,
        protocol="standard",
        push_down=None,
        log_level=None,
    ):
        self.splits, self.budget, self.k, self.seed, self.num_threads = splits, budget, k, seed, num_threads
        self.cache, self.resume, self.contexts = cache, resume, {} if contexts is None else contexts
        self.protocol, self.push_down, self.log_level = protocol, push_down, log_level

    def args(self, name, fold):
        return (name, fold, *self.splits[fold])

    def kwargs(self, name, fold):
        log = self.cache.trial_log(name, fold, self.resume) if self.cache else None
        return {
            "budget": self.budget,
            "k": self.k,
            "random_state": self.seed + fold,
            "num_threads": self.num_threads,
            "log": log,
            "context": self.contexts.get((name, fold)),
            "protocol": self.protocol,
            "push_down": None if get_method(name).stack_on else self.push_down,
        }


def check_unit_executor(executor=None, jobs=None):
    """Checked ``(executor, jobs)`` of the units, nothing started: ``executor`` is an
    :class:`~recsys_ltr.executors.Executor` or one of :data:`~recsys_ltr.executors.EXECUTORS`;
    ``jobs`` is the number of worker processes of ``"processes"`` (default: one per core).  Without
    an executor, ``jobs > 1`` means ``"processes"``."""
    if jobs is not None:
        jobs = check_positive_int(jobs, "jobs")
    if executor is None and jobs is not None and jobs > 1:
        executor = "processes"
    executor = check_executor(executor)
    if executor != "processes" and jobs is not None and jobs > 1:
        raise ValueError(
            f"jobs={jobs} is the number of local worker processes: it applies to executor='processes' only"
        )
    return executor, jobs


def unit_executor(executor=None, jobs=None):
    """The executor of the units (arguments as in :func:`check_unit_executor`)."""
    executor, jobs = check_unit_executor(executor, jobs)
    return ProcessExecutor(jobs) if executor == "processes" else get_executor(executor)


def run_experiment(
    X,
    methods,
    *,
    folds=3,
    protocol="standard",
    val=0.1,
    test=0.2,
    exclude_top=100,
    random_state=0,
    budget="quick",
    k=10,
    jobs=None,
    cache_dir=None,
    read_cache=True,
    dataset="data",
    show_progress=None,
    executor=None,
    parts=None,
) -> Experiment:
    """Run every method on ``folds`` splits of ``X`` seeded by ``random_state``, one task per
    (method, fold) unit; under ``protocol="fixed"`` or ``"temporal"``, on the one split ``parts``
    (train, valid, test: disjoint, summing to ``X``; e.g. :func:`recsys_ltr.split.last_fraction`
    for ``"temporal"``), ``folds`` and the split parameters then unused.

    The units run on ``executor`` (``unit_executor``: in this process by default, in ``jobs``
    local processes, or on Ray), each on the executor's threads per task.  With ``cache_dir``,
    finished units are read from (unless ``read_cache`` is false: recompute all) and written to
    the cache (:class:`UnitCache`) by this process as they finish, and unfinished units resume
    from their :class:`TrialLog` (written by the worker running the unit: on a multi-node
    cluster, put ``cache_dir`` on a file system every node shares for that).  ``dataset`` names
    the data in cache keys (with a fingerprint of ``X``).  ``show_progress``: a bar over the
    units (``None``: on when standard error is a terminal).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    folds = check_positive_int(folds, "folds")
    executor, jobs = check_unit_executor(executor, jobs)
    X = check_feedback(X)
    methods = with_bases(methods, X.shape[1])
    exclude_top = exclude_top if protocol == "novelty" else None
    if protocol in PARTS_PROTOCOLS:
        splits, folds, val, test = [check_parts(X, parts, protocol)], 1, None, None
    elif parts is not None:
        raise ValueError(f"parts (one given split) belong to protocol='fixed' or 'temporal', not {protocol!r}")
    else:
        splits = list(
            split.folds(X, n_folds=folds, val=val, test=test, random_state=random_state, exclude_top=exclude_top)
        )
    cache, contexts = None, {}
    if cache_dir is not None:
        cache = UnitCache(
            cache_dir,
            contexts,
            dataset=dataset,
            data=data_fingerprint(X) if parts is None else [data_fingerprint(p) for p in splits[0]],
            protocol=protocol,
            budget=budget,
            seed=random_state,
            val=val,
            test=test,
            exclude_top=exclude_top,
            k=k,
            code=code_fingerprint(),
        )
    units = [(name, fold) for fold in range(folds) for name in methods]
    evaluated = [np.flatnonzero(np.diff(test_part.indptr) > 0) for _, _, test_part in splits]
    bar = progress(show_progress, total=len(units), desc=f"{dataset} {protocol}", unit="run")
    push_down = None if exclude_top is None else split.top_items_trusted(X, exclude_top)
    arguments = _UnitArguments(
        splits, budget, k, random_state, None, cache, read_cache, contexts, protocol, push_down, _run_level()
    )
    outcomes, computed, reported = {}, [], set()
    finished = 0
    logger.info(
        "%s %s protocol: %d unit(s) (%d method(s) x %d fold(s))", dataset, protocol, len(units), len(methods), folds
    )
    with bar, _UnitRunner(executor, jobs) as runner:
        for stacking in (False, True):  # the stacking methods once their bases are tuned on the same fold
            wave = [unit for unit in units if bool(get_method(unit[0]).stack_on) == stacking]
            for name, fold in wave if stacking else ():
                done = {o.method: o for (_, f), o in outcomes.items() if f == fold and isinstance(o, FoldResult)}
                contexts[(name, fold)] = stack_context(
                    get_method(name), done, exclude_top, X.shape[1], selection_metric(protocol, k)
                )
                if contexts[(name, fold)] is None:
                    outcomes[(name, fold)] = Skipped(name, fold, "none of its base methods ran")
            if cache and read_cache:
                outcomes.update({u: cache.load(*u, evaluated[u[1]]) for u in wave if u not in outcomes})
            todo = [unit for unit in wave if outcomes.get(unit) is None]
            for unit in wave:
                if unit not in todo:
                    finished += 1
                    _log_unit(outcomes[unit], finished, len(units), "cached")
            bar.update(len(wave) - len(todo))
            for unit, outcome in runner.run(todo, arguments):
                outcomes[unit] = outcome
                finished += 1
                if isinstance(outcome, Skipped):
                    if outcome.method not in reported:
                        reported.add(outcome.method)
                        progress_write(f"skipped {outcome.method}: {outcome.reason}")
                elif cache:
                    cache.store(outcome)
                _log_unit(outcome, finished, len(units), "finished")
                bar.set_postfix_str(f"fold {unit[1]} {unit[0]}")
                bar.update()
            computed += todo
    ordered = [outcomes[unit] for unit in units]
    return Experiment(
        results=[row for o in ordered if isinstance(o, FoldResult) for row in o.rows()],
        skipped=[o for o in ordered if isinstance(o, Skipped)],
        computed=computed,
    )


def _log_unit(outcome, finished, total, how) -> None:
    """One ``INFO`` line for a unit done (``how``: "finished" here, or read from the "cache")."""
    if isinstance(outcome, Skipped):
        logger.info("[%d/%d] %s fold %d skipped: %s", finished, total, outcome.method, outcome.fold, outcome.reason)
        return
    when = (
        f"finished in {outcome.seconds:.1f} s"
        if how == "finished"
        else f"read from the cache (computed in {outcome.seconds:.1f} s)"
    )
    logger.info(
        "[%d/%d] %s fold %d %s: %s, validation %s %.4f",
        finished, total, outcome.method, outcome.fold, when, _describe(outcome.params), outcome.select, outcome.validation,
    )  # fmt: skip


def check_parts(X, parts, protocol="fixed") -> tuple:
    """``parts`` = (train, valid, test) checked: feedback matrices of ``X``'s shape, pairwise
    disjoint, summing to ``X``, valid and test not empty."""
    if parts is None or len(parts) != 3:
        what = "the published split of X" if protocol == "fixed" else "a time-ordered split of X (split.last_fraction)"
        raise ValueError(f"protocol={protocol!r} needs parts=(train, valid, test), {what}")
    names = ("train", "valid", "test")
    checked = [check_feedback(p, f"parts {n}", allow_empty=n == "train") for p, n in zip(parts, names)]
    for p, n in zip(checked, names):
        if p.shape != X.shape:
            raise ValueError(f"parts {n} has shape {p.shape}, X has {X.shape}")
    union = checked[0] + checked[1] + checked[2]
    if union.max() > 1 or union.nnz != X.nnz or (union != (X != 0)).nnz:
        raise ValueError("parts (train, valid, test) must be disjoint and hold exactly the positives of X")
    return tuple(checked)


def with_bases(methods, n_items=None) -> list[str]:
    """``methods`` (checked, duplicates dropped) with the base methods that the stacking ones stack
    on ``n_items`` items (``None``: any) added before them: a stacking method needs its bases tuned
    on the same folds."""
    out = []
    for name in methods:
        for base in get_method(name).stacked(n_items):  # fails on an unknown name before any work
            if base not in out:
                out.append(base)
        if name not in out:
            out.append(name)
    return out
