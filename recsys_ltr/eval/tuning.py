"""One unit of an evaluation run: a method tuned on validation in two levels (its main
hyper-parameter, then the others at the best main value), refitted where the protocol says, and
tested (``run_unit``); the constructor arguments of its model, a stacking method's bases
included (``build``, ``stack_context``)."""

from __future__ import annotations

import json
import logging
import time
from functools import cache, partial

import numpy as np

from recsys_ltr.eval.methods import get_method
from recsys_ltr.eval.results import PARTS_PROTOCOLS, FoldResult, Skipped, filtered_name, selection_metric, table_metrics
from recsys_ltr.metrics import DEFAULT_METRICS, evaluate, ranked_last

_log = logging.getLogger(__name__)


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


def stack_context(method, fold_results, exclude_top=None, workload=None, select="ADG") -> dict | None:
    """Constructor arguments of a stacking ``method`` (``stack_on``) on one fold of data of
    ``workload`` (:class:`~recsys_ltr.febr.bases.Workload`): ``bases``, the ``[name, params]``
    chosen for each base method it stacks there (``Method.stacked``) in ``fold_results`` (name ->
    FoldResult; a skipped one is left out), ``label_exclude_top`` under the novelty protocol and
    ``validation_metric``, the metric the protocol selects settings on (``select``): FEBR's own
    validation decisions judge by what the protocol judges.  ``{}`` for the other methods, ``None``
    when no base ran."""
    if not method.stack_on:
        return {}
    bases = [[n, fold_results[n].params] for n in method.stacked(workload) if n in fold_results]
    if not bases:
        return None
    context = {"bases": bases, **({"label_exclude_top": exclude_top} if exclude_top is not None else {})}
    return context | {"validation_metric": select}


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
    refitted).  Ties keep the setting tried first.  With a :class:`~recsys_ltr.eval.cache.TrialLog`, settings it holds are
    not refitted, every new one is appended to it, and the chosen setting is refitted when it came
    from the log.

    Returns
    -------
    params : dict
        The chosen setting.
    model : fitted estimator
    trials : list of dict
        Every setting tried (see :class:`~recsys_ltr.eval.results.FoldResult`).

    Examples
    --------
    >>> from recsys_ltr import split
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.eval.tuning import tune
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


def describe_setting(params) -> str:
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
    the log lines (default: the method).  Returns the fold's :class:`~recsys_ltr.eval.results.FoldResult` (``fold`` is
    left at -1 for the caller to set).
    """
    select = selection_metric(protocol, k)
    label = label or method_name
    t0 = time.perf_counter()
    _log.info("%s: tuning on validation %s (%d validation positives)", label, select, val.nnz)
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
    _log.info(
        "%s: tuned in %.1f s, %d setting(s) tried; chose %s (validation %s %.4f)",
        label, time.perf_counter() - t0, len(trials), describe_setting(params), select, chosen["validation"],
    )  # fmt: skip
    fit_seconds, exclude = chosen["fit_seconds"], val
    if protocol in PARTS_PROTOCOLS:
        train, exclude = (train + val).tocsr(), None  # disjoint parts: their union, canonical
        model, fit_seconds = _fitter(get_method(method_name), train, None, random_state, num_threads, context)(params)
        _log.info("%s: refitted on train + validation (%d positives) in %.1f s", label, train.nnz, fit_seconds)
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
    _log.info(
        "%s: tested on %d users in %.1f s: %s",
        label, out.users.size, time.perf_counter() - t_test, ", ".join(f"{m} {out.test[m]:.4f}" for m in metrics[:2]),
    )  # fmt: skip
    return out


def run_unit(
    method_name, fold, train, val, test, *, budget, k, random_state, num_threads, log=None, context=None, **protocol
):
    """One (method, fold) unit: a :class:`~recsys_ltr.eval.results.FoldResult`, or :class:`~recsys_ltr.eval.results.Skipped` when the method raises
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
