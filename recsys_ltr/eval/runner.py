"""Run the dissertation's per-user holdout experiment (sec. 4.7.3-4.7.5) for several methods.

For each fold (:func:`recsys_ltr.split.folds`: seed ``seed + fold``), the data are split per user into train / validation /
test (10% / 20% of each user's positives by default). Every setting in a method's grid is fit
on train and scored on validation ADG; the best setting is then evaluated on test with the
validation positives excluded from the candidates. The novelty protocol draws validation and
test items only outside the ``exclude_top`` most popular items.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from recsys_ltr import split
from recsys_ltr.eval.methods import get_method
from recsys_ltr.metrics import evaluate

PROTOCOLS = ("standard", "novelty")
TABLE_METRICS = ("ADG", "REC@{k}", "MAP", "NDCG", "ATOP")


@dataclass
class FoldResult:
    """Test metrics of one method on one fold, with the setting chosen on validation."""

    method: str
    fold: int
    params: dict
    validation_adg: float
    test: dict[str, float]
    test_stderr: dict[str, float]
    per_user: dict[str, np.ndarray] = field(repr=False)
    users: np.ndarray = field(repr=False)
    fit_seconds: float = 0.0


def tune_and_test(method_name, train, val, test, *, budget="quick", k=10, show_progress=False) -> FoldResult:
    """Pick a method's setting on validation ADG, then evaluate it on test.

    Returns the fold's :class:`FoldResult` (``fold`` is left at -1 for the caller to set).
    """
    method = get_method(method_name)
    best = None
    for params, model, fit_seconds in _fitted_grid(method, budget, train):
        adg = evaluate(model, train, val, metrics=("ADG",), k=k)["ADG"]
        if best is None or adg > best[0]:
            best = (adg, params, model, fit_seconds)
    adg, params, model, fit_seconds = best
    res = evaluate(model, train, test, exclude=val, k=k, show_progress=show_progress)
    return FoldResult(
        method=method_name,
        fold=-1,
        params=dict(params),
        validation_adg=float(adg),
        test=dict(res),
        test_stderr=dict(res.stderr),
        per_user=dict(res.per_user),
        users=np.asarray(res.users),
        fit_seconds=fit_seconds,
    )


def _fitted_grid(method, budget, train):
    """Yield ``(params, fitted model, fit seconds)`` for every setting of the grid.

    Models with ``with_k`` (neighbourhoods stored as row prefixes) are fitted once per group of
    settings that differ only in ``k``, at the largest ``k``; smaller ones are row truncations.
    """
    groups: dict[str, list[dict]] = {}
    for params in method.grid(budget, train.shape):
        rest = {key: v for key, v in params.items() if key != "k"}
        groups.setdefault(repr(sorted(rest.items())), []).append(params)
    for settings in groups.values():
        largest = max(settings, key=lambda p: p.get("k") or 0)
        t0 = time.perf_counter()
        model = method.build(**largest).fit(train)
        fit_seconds = time.perf_counter() - t0
        for params in settings:
            if params is largest:
                yield params, model, fit_seconds
            elif hasattr(model, "with_k"):
                yield params, model.with_k(params["k"]), fit_seconds
            else:
                t0 = time.perf_counter()
                yield params, method.build(**params).fit(train), time.perf_counter() - t0


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
    show_progress=True,
) -> list[FoldResult]:
    """Run every method on ``folds`` seeded splits of ``X``; returns one result per (fold, method)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    for name in methods:
        get_method(name)  # fail before any work on an unknown name
    splits = split.folds(
        X, n_folds=folds, val=val, test=test, seed=seed, exclude_top=exclude_top if protocol == "novelty" else None
    )
    results = []
    bar = tqdm(total=folds * len(methods), desc="runs", unit="run", disable=not show_progress)
    for fold, (train, val_m, test_m) in enumerate(splits):
        for name in methods:
            bar.set_postfix_str(f"fold {fold} {name}")
            result = tune_and_test(name, train, val_m, test_m, budget=budget, k=k)
            result.fold = fold
            results.append(result)
            bar.update()
    bar.close()
    return results
