"""Run the dissertation's per-user holdout experiment (sec. 4.7.3-4.7.5) for several methods.

For each fold (:func:`recsys_ltr.split.folds`: seed ``seed + fold``), the data are split per user
into train / validation / test (10% / 20% of each user's positives by default).  Each method is
tuned on validation ADG in two levels (:func:`~recsys_ltr.eval.tuning.tune`), then its chosen setting is evaluated on test
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
a unit is tuned, every finished setting is logged next to it (:class:`~recsys_ltr.eval.cache.TrialLog`), so an
interrupted run resumes at the next setting, not at the unit's start.  This module schedules the
units; a unit itself is :mod:`recsys_ltr.eval.tuning`, its records :mod:`recsys_ltr.eval.results`,
the cache :mod:`recsys_ltr.eval.cache`.

Logging (``logging.getLogger(__name__)``; the package configures no handler, the command line does):
one ``INFO`` line per stage of a unit (tuning, refit, test) and per finished unit (method, fold,
seconds, chosen setting, validation value), so that a run outside a terminal shows its progress.
"""

from __future__ import annotations

import logging
import sys

import numpy as np

from recsys_ltr import split
from recsys_ltr._progress import progress, progress_write
from recsys_ltr._validation import check_feedback, check_positive_int
from recsys_ltr.eval.cache import UnitCache, code_fingerprint, data_fingerprint
from recsys_ltr.eval.methods import get_method
from recsys_ltr.eval.results import (
    PARTS_PROTOCOLS,
    PROTOCOLS,
    Experiment,
    FoldResult,
    Skipped,
    selection_metric,
)
from recsys_ltr.eval.tuning import describe_setting, run_unit, stack_context
from recsys_ltr.executors import ProcessExecutor, check_executor, get_executor
from recsys_ltr.febr.bases import Workload

#: Format of the log lines of the command line (:func:`configure_worker_logging` reuses it).
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

logger = logging.getLogger(__name__)


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
    the cache (:class:`~recsys_ltr.eval.cache.UnitCache`) by this process as they finish, and unfinished units resume
    from their :class:`~recsys_ltr.eval.cache.TrialLog` (written by the worker running the unit: on a multi-node
    cluster, put ``cache_dir`` on a file system every node shares for that).  ``dataset`` names
    the data in cache keys (with a fingerprint of ``X``).  ``show_progress``: a bar over the
    units (``None``: on when standard error is a terminal).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    folds = check_positive_int(folds, "folds")
    executor, jobs = check_unit_executor(executor, jobs)
    X = check_feedback(X)
    workload = Workload.of(X)
    methods = with_bases(methods, workload)
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
                    get_method(name), done, exclude_top, workload, selection_metric(protocol, k)
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
        finished, total, outcome.method, outcome.fold, when, describe_setting(outcome.params), outcome.select, outcome.validation,
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


def with_bases(methods, workload=None) -> list[str]:
    """``methods`` (checked, duplicates dropped) with the base methods that the stacking ones stack
    on data of ``workload`` (:class:`~recsys_ltr.febr.bases.Workload`; ``None``: any) added before
    them: a stacking method needs its bases tuned on the same folds."""
    out = []
    for name in methods:
        for base in get_method(name).stacked(workload):  # fails on an unknown name before any work
            if base not in out:
                out.append(base)
        if name not in out:
            out.append(name)
    return out
